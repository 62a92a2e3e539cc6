import { createServer, connect, type Socket } from 'node:net';
import type { TestContext } from 'node:test';

/**
 * What a connection does with the bytes of one direction:
 * - `flow`: forwards them (after `delayMs`, if set);
 * - `hold`: keeps them, and forwards them (in order) when the direction flows again: a network
 *   partition, which TCP outlives by sending them again;
 * - `drop`: discards them: a NAT or firewall that forgot the connection. Neither end hears of it.
 */
export type Flow = 'flow' | 'hold' | 'drop';

export interface ProxiedConnection {
  /** client → coordinator */
  up: Flow;
  /** coordinator → client */
  down: Flow;
  /** bytes forwarded so far in each direction */
  readonly sent: { up: number; down: number };
}

export interface TcpProxy {
  /** the URL clients use instead of the coordinator's */
  url: string;
  /** connections open now, oldest first */
  readonly connections: readonly ProxiedConnection[];
  /** connections accepted so far */
  readonly accepted: number;
  /** resolves once `n` connections in all have been accepted */
  acceptedAtLeast(n: number): Promise<void>;
  /**
   * Resolves once what a client sent on one connection (forwarded or not) matches, e.g. a request
   * line; with `times`, once that many matches of a global regex, counted over the connections
   * accepted from number `from` on (0: the first).
   */
  sentUp(match: RegExp, o?: { times?: number; from?: number }): Promise<void>;
  /**
   * Freeze every open connection: both directions are dropped (or held). Connections made later
   * flow, as after a NAT forgot its table, unless `next` says otherwise.
   */
  freeze(how?: 'drop' | 'hold', next?: Flow): void;
  /** Let every connection (and the next ones) flow again; held bytes go out. */
  heal(): void;
  /** Cut every open connection: a reset to the client, a close to the coordinator. */
  cut(): void;
  /** Forward every byte this long after it came (0: at once). */
  delayMs: number;
}

interface Entry {
  c: ProxiedConnection;
  client: Socket;
  server: Socket;
  /** forward what was held in the directions that flow again */
  flush: () => void;
}

/**
 * A TCP proxy (node:net) between a client and the coordinator, for network faults the HTTP layer
 * cannot show: connections that stay open but carry nothing (freeze), resets (cut), and latency
 * (delay). Closed, with its connections, when the test ends.
 */
export async function tcpProxy(t: TestContext, target: string): Promise<TcpProxy> {
  const upstream = new URL(target);
  const open = new Set<Entry>();
  let next: Flow = 'flow';
  let accepted = 0;
  const acceptWaiters: Array<{ n: number; resolve: () => void }> = [];
  const texts: string[] = [];
  const textWaiters: Array<{ done: () => boolean; resolve: () => void }> = [];
  const count = (match: RegExp, from: number) =>
    texts.slice(from).reduce((n, text) => n + (match.global ? (text.match(match)?.length ?? 0) : match.test(text) ? 1 : 0), 0);
  const state = { delayMs: 0 };

  const server = createServer((client) => {
    accepted++;
    for (const w of acceptWaiters.filter((w) => accepted >= w.n)) {
      acceptWaiters.splice(acceptWaiters.indexOf(w), 1);
      w.resolve();
    }
    const to = connect(Number(upstream.port), upstream.hostname);
    const held = { up: [] as Buffer[], down: [] as Buffer[] };
    const c: ProxiedConnection = { up: next, down: next, sent: { up: 0, down: 0 } };
    const entry: Entry = { c, client, server: to, flush: () => {} };
    open.add(entry);
    const pass = (dir: 'up' | 'down', out: Socket, chunk: Buffer) => {
      c.sent[dir] += chunk.length;
      if (state.delayMs > 0) setTimeout(() => out.write(chunk), state.delayMs);
      else out.write(chunk);
    };
    const text = texts.push('') - 1;
    client.on('data', (chunk: Buffer) => {
      texts[text] += chunk.toString('latin1');
      for (const w of textWaiters.filter((w) => w.done())) {
        textWaiters.splice(textWaiters.indexOf(w), 1);
        w.resolve();
      }
    });
    const forward = (dir: 'up' | 'down', from: Socket, out: Socket) => {
      from.on('data', (chunk: Buffer) => {
        if (c[dir] === 'drop') return;
        if (c[dir] === 'hold' || held[dir].length > 0) held[dir].push(chunk);
        else pass(dir, out, chunk);
      });
    };
    forward('up', client, to);
    forward('down', to, client);
    entry.flush = () => {
      for (const dir of ['up', 'down'] as const) {
        if (c[dir] !== 'flow') continue;
        const out = dir === 'up' ? to : client;
        for (const chunk of held[dir].splice(0)) pass(dir, out, chunk);
      }
    };
    // a close is a packet too: a frozen connection does not pass it on
    const end = () => {
      if (c.up !== 'flow' || c.down !== 'flow') return;
      client.destroy();
      to.destroy();
      open.delete(entry);
    };
    client.on('close', end);
    to.on('close', end);
    client.on('error', () => {});
    to.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const destroyAll = () => {
    for (const { client, server: to } of open) {
      client.destroy();
      to.destroy();
    }
    open.clear();
  };
  t.after(async () => {
    destroyAll();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    get connections() {
      return [...open].map((e) => e.c);
    },
    get accepted() {
      return accepted;
    },
    acceptedAtLeast: (n) =>
      new Promise<void>((resolve) => (accepted >= n ? resolve() : acceptWaiters.push({ n, resolve }))),
    sentUp: (match, o = {}) =>
      new Promise<void>((resolve) => {
        const done = () => count(match, o.from ?? 0) >= (o.times ?? 1);
        if (done()) resolve();
        else textWaiters.push({ done, resolve });
      }),
    freeze(how = 'drop', then = 'flow') {
      for (const { c } of open) c.up = c.down = how;
      next = then;
    },
    heal() {
      next = 'flow';
      for (const e of open) {
        e.c.up = e.c.down = 'flow';
        e.flush();
        // an end that came while frozen goes out after the bytes that came before it
        if (e.client.destroyed || e.server.destroyed) {
          e.client.end();
          e.server.end();
          open.delete(e);
        }
      }
    },
    cut() {
      for (const { client, server: to } of open) {
        client.resetAndDestroy();
        to.destroy();
      }
      open.clear();
    },
    get delayMs() {
      return state.delayMs;
    },
    set delayMs(ms: number) {
      state.delayMs = ms;
    },
  };
}
