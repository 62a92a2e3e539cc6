import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import pg from 'pg';

/*
 * A throwaway PostgreSQL server for the tests: the Debian `postgresql` package's initdb and
 * pg_ctl, a fresh data directory in /tmp, a free port on 127.0.0.1, trust authentication, no
 * fsync. As root (CI), it runs as the `postgres` user (PostgreSQL refuses to run as root). One
 * server per test process, stopped and removed when the process exits. Each test gets its own
 * schema (`freshDatabaseUrl`): the store keeps everything in the connection's search_path, and
 * its channels and locks are per schema, so tests sharing the server do not see each other.
 *
 * AGENTQ_TEST_PG_URL=postgres://user@host:port/db uses an existing server instead.
 * No server: the tests skip with a loud message, except under CI=true, where that is a failure.
 */

export interface PgServer {
  /** the server's admin URL (database `postgres`) */
  readonly adminUrl: string;
}

let started: Promise<PgServer | string> | undefined;

/** The test server, started once per process; or why there is none. */
export function pgServer(): Promise<PgServer | string> {
  started ??= start().catch((err: unknown) => `could not start PostgreSQL: ${(err as Error).message}`);
  return started;
}

/**
 * A URL to a fresh, empty schema on the test server; or null after telling the test to skip
 * (loudly), or a thrown error under CI=true.
 */
export async function freshDatabaseUrl(t: TestContext): Promise<string | null> {
  const server = await pgServer();
  if (typeof server === 'string') {
    const message = `PostgreSQL tests SKIPPED: ${server}. Install the Debian package (apt-get install -y postgresql) or set AGENTQ_TEST_PG_URL.`;
    if (process.env.CI === 'true') throw new Error(`${message} (CI must run them)`);
    process.stderr.write(`\n${'!'.repeat(100)}\n!! ${message}\n${'!'.repeat(100)}\n\n`);
    t.skip(message);
    return null;
  }
  const schema = `t_${process.pid}_${++schemas}_${Date.now().toString(36)}`;
  const client = new pg.Client({ connectionString: server.adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA ${schema}`);
  } finally {
    await client.end();
  }
  const url = new URL(server.adminUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}
let schemas = 0;

/** Record the SQL of every query node-postgres sends from this process while `fn` runs. */
export async function pgStatementsDuring(fn: () => Promise<void>): Promise<string[]> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const seen: string[] = [];
  proto.query = function (this: unknown, ...args: unknown[]) {
    const q = args[0];
    seen.push(typeof q === 'string' ? q : String((q as { text?: unknown }).text));
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return seen;
}

/**
 * The round trips to the server of every connection of this process while `fn` runs, and the
 * statements sent. A query sent while an earlier one on the same connection is still unanswered
 * (node-postgres' pipeline mode) rides in that round trip: it is counted only when it is sent to
 * a connection with nothing in flight, so the count is the times a client waited for the server.
 */
export async function pgRoundTripsDuring(fn: () => Promise<void>): Promise<{ roundTrips: number; statements: string[] }> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const inFlight = new WeakMap<object, number>();
  const statements: string[] = [];
  let roundTrips = 0;
  proto.query = function (this: object, ...args: unknown[]) {
    const q = args[0];
    statements.push(typeof q === 'string' ? q : String((q as { text?: unknown }).text));
    const n = inFlight.get(this) ?? 0;
    if (n === 0) roundTrips++;
    inFlight.set(this, n + 1);
    const done = () => inFlight.set(this, inFlight.get(this)! - 1);
    const result = original.apply(this, args);
    if (result instanceof Promise) result.then(done, done);
    else done();
    return result;
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  return { roundTrips, statements };
}

async function start(): Promise<PgServer> {
  const given = process.env.AGENTQ_TEST_PG_URL;
  if (given) return { adminUrl: given };
  const bin = findBinDir();
  if (!bin) throw new Error('initdb and pg_ctl were not found (in PATH or /usr/lib/postgresql/*/bin)');
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'agentq-pg-'));
  const data = join(dir, 'data');
  let run = (cmd: string, args: string[]) => execFileSync(join(bin, cmd), args, { stdio: 'pipe' });
  if (asRoot) {
    // PostgreSQL will not run as root: the data directory and the server belong to `postgres`
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o700);
    run = (cmd, args) => execFileSync('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args], { stdio: 'pipe' });
  }
  const cleanup = () => {
    spawnSync(asRoot ? 'runuser' : join(bin, 'pg_ctl'), [...(asRoot ? ['-u', 'postgres', '--', join(bin, 'pg_ctl')] : []), '-D', data, '-m', 'immediate', 'stop'], {
      stdio: 'ignore',
    });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    run('initdb', ['-D', data, '-U', 'agentq', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']);
    const logFile = join(dir, 'server.log');
    let port = 0;
    // PostgreSQL cannot be given port 0: a port found free is closed again and handed to it, and
    // another process may take it meanwhile (an outgoing connection's local port comes from the
    // same range, or a test file beside this one listens on port 0). A start refused for that
    // ("could not bind ... Address already in use") is tried again on another free port.
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const options = [
        `-p ${port}`,
        `-k ${dir}`,
        '-c listen_addresses=127.0.0.1',
        '-c fsync=off',
        '-c synchronous_commit=off',
        '-c full_page_writes=off',
        '-c max_connections=300',
        '-c shared_buffers=64MB',
      ].join(' ');
      const logged = existsSync(logFile) ? readFileSync(logFile, 'utf8').length : 0;
      try {
        run('pg_ctl', ['-D', data, '-o', options, '-l', logFile, '-w', '-t', '60', 'start']);
        break;
      } catch (err) {
        const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(logged) : '';
        if (attempt === 10 || !/could not bind .*Address already in use|could not create any TCP\/IP sockets/.test(log)) throw err;
      }
    }
    process.once('exit', cleanup);
    // a test process killed by a signal runs no exit handler: a watchdog stops the server then
    const stop = `${asRoot ? `runuser -u postgres -- ` : ''}'${join(bin, 'pg_ctl')}' -D '${data}' -m immediate stop`;
    spawn('sh', ['-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ${stop}; rm -rf '${dir}'`], {
      detached: true,
      stdio: 'ignore',
    }).unref();
    const adminUrl = `postgres://agentq@127.0.0.1:${port}/postgres`;
    return { adminUrl };
  } catch (err) {
    const log = existsSync(join(dir, 'server.log')) ? readFileSync(join(dir, 'server.log'), 'utf8').slice(-2000) : '';
    const out = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    cleanup();
    throw new Error(`${(err as Error).message.split('\n')[0]} ${out} ${log}`.trim(), { cause: err });
  }
}

function findBinDir(): string | null {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return null;
  const versions = readdirSync(base)
    .filter((v) => existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] ? join(base, versions[0], 'bin') : null;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/**
 * A TCP proxy to the database that, once armed with a text, lets the COMMIT of the transaction
 * that sent that text through, then cuts that connection before the answer comes back: the
 * commit is made, and the coordinator only sees its connection break. `arm` resolves once the
 * database has closed that connection, the commit made (not when the cut was, before it).
 */
export async function commitCuttingProxy(t: TestContext, databaseUrl: string): Promise<{ url: string; arm: (text: string) => Promise<void> }> {
  const target = new URL(databaseUrl);
  let armed: string | undefined;
  let cut = (): void => undefined;
  const { url } = await databaseStandIn(t, databaseUrl, (inbound, track) => {
    const outbound = track(connect(Number(target.port || 5432), target.hostname));
    let sawText = false;
    inbound.on('data', (chunk: Buffer) => {
      const s = chunk.toString('latin1');
      if (armed !== undefined && s.includes(armed)) sawText = true;
      outbound.write(chunk);
      if (sawText && /\bCOMMIT\b/.test(s)) {
        armed = undefined;
        sawText = false;
        // the server reads the COMMIT to its end and commits, then closes the connection: the
        // commit is made (and seen by every later read) once it has
        outbound.once('close', () => cut());
        outbound.end();
        inbound.destroy(); // the coordinator never hears of it
      }
    });
    outbound.on('data', (chunk: Buffer) => void (inbound.destroyed || inbound.write(chunk)));
  });
  return {
    url,
    arm: (text) => {
      armed = text;
      return new Promise<void>((resolve) => (cut = resolve));
    },
  };
}

/**
 * A TCP proxy to the database that, once told to `hang`, cuts the pool's connections and takes
 * every new one without ever answering it (a database host that hangs: each connection attempt
 * waits out the connect timeout), counting them; `restore` forwards new connections again. The
 * store's control connection (the one that LISTENs) is left alone, so that its reconnections
 * do not count. `hang` returns the number of pool connections it cut.
 */
export async function hangingProxy(t: TestContext, databaseUrl: string) {
  const target = new URL(databaseUrl);
  const pooled = new Set<Socket>();
  let hanging = false;
  let attempts = 0;
  const { url } = await databaseStandIn(t, databaseUrl, (inbound, track) => {
    if (hanging) {
      attempts++;
      return; // taken, never answered
    }
    const outbound = track(connect(Number(target.port || 5432), target.hostname));
    const pair = Object.assign(inbound, { peer: outbound });
    pooled.add(pair);
    inbound.on('close', () => pooled.delete(pair));
    inbound.on('data', (chunk: Buffer) => {
      if (chunk.toString('latin1').includes('LISTEN ')) pooled.delete(pair); // the control connection
      outbound.write(chunk);
    });
    outbound.on('data', (chunk: Buffer) => void (inbound.destroyed || inbound.write(chunk)));
  });
  return {
    url,
    /** connections taken while hanging */
    get attempts(): number {
      return attempts;
    },
    hang(): number {
      hanging = true;
      const cut = [...pooled];
      for (const s of cut) {
        (s as Socket & { peer: Socket }).peer.destroy();
        s.destroy();
      }
      return cut.length;
    },
    restore(): void {
      hanging = false;
    },
  };
}

/**
 * A TCP proxy to the database that can cut every connection and refuse new ones, then let them in
 * again (`cut`, `restore`); or `freeze`: the connections stay open but nothing goes through any
 * more, either way, and new ones are taken and never answered (a database host that hangs: frozen,
 * or a network that drops packets without resetting); `thaw` lets what was held go through again,
 * as TCP would once the host is back; `freezeAtCommit(text)`: freeze once the COMMIT of the
 * transaction that sent `text` has gone to the database (the commit is made, its answer held);
 * `stallAt(text)`: the same for one connection only, once it sent `text`. A side that closes
 * closes the other.
 */
export async function cuttableProxy(t: TestContext, databaseUrl: string) {
  const target = new URL(databaseUrl);
  const open = new Set<Socket>();
  let frozen = false;
  let armed: { text: string; seen: boolean; frozen: () => void } | undefined;
  let stall: { text: string; stalled: () => void } | undefined;
  /** connections stalled (stallAt): thaw leaves them as they are */
  const held = new WeakSet<Socket>();
  const freeze = () => {
    frozen = true;
    for (const s of open) s.pause();
  };
  const { url, server, sockets } = await databaseStandIn(t, databaseUrl, (inbound, track) => {
    if (frozen) return; // taken, never answered
    const outbound = track(connect(Number(target.port || 5432), target.hostname));
    inbound.on('data', (chunk: Buffer) => {
      if (!stall || !chunk.toString('latin1').includes(stall.text)) return;
      // this chunk still goes on to the database (the listener below runs for it after this
      // one); nothing more goes through this connection, either way
      const { stalled } = stall;
      stall = undefined;
      for (const s of [inbound, outbound]) {
        held.add(s);
        s.pause();
      }
      stalled();
    });
    inbound.on('data', (chunk: Buffer) => {
      if (!armed) return;
      const s = chunk.toString('latin1');
      if (s.includes(armed.text)) armed.seen = true;
      if (armed.seen && /\bCOMMIT\b/.test(s)) {
        // this chunk still goes on to the database (the listener below runs for it after this
        // one): the commit is made; its answer is not read
        const { frozen: done } = armed;
        armed = undefined;
        freeze();
        done();
      }
    });
    for (const [from, to] of [
      [inbound, outbound],
      [outbound, inbound],
    ] as const) {
      open.add(from);
      from.on('data', (chunk: Buffer) => void (to.destroyed || to.write(chunk)));
      from.on('close', () => {
        open.delete(from);
        to.destroy();
      });
    }
  });
  const port = Number(new URL(url).port);
  return {
    url,
    async cut(): Promise<void> {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const s of sockets) s.destroy();
      await closed;
    },
    async restore(): Promise<void> {
      server.listen(port, '127.0.0.1');
      await once(server, 'listening');
    },
    /** nothing goes through any more: every open connection is no longer read (both ways) */
    freeze,
    /** resolves once frozen, the COMMIT of the transaction that sent `text` passed on to the database */
    freezeAtCommit(text: string): Promise<void> {
      return new Promise<void>((resolve) => (armed = { text, seen: false, frozen: resolve }));
    },
    /**
     * resolves once the next connection that sends `text` is stalled: that connection only (the
     * others, and new ones, go on) freezes once `text` has gone to the database, for good (a host
     * that freezes in the middle of a connection's set-up, and is back for the next one)
     */
    stallAt(text: string): Promise<void> {
      return new Promise<void>((resolve) => (stall = { text, stalled: resolve }));
    },
    /** what was held goes through, and new connections are forwarded again (not the stalled ones) */
    thaw(): void {
      frozen = false;
      for (const s of open) if (!held.has(s)) s.resume();
    },
  };
}

/**
 * A TCP server on 127.0.0.1 that stands in for the database of `databaseUrl`, its URL, the server
 * and its open sockets: each connection goes to `serve`, which proxies or holds it; the
 * connections it takes and the ones `serve` opens (through `track`) are closed when the test
 * ends, their errors ignored.
 */
async function databaseStandIn(
  t: TestContext,
  databaseUrl: string,
  serve: (inbound: Socket, track: (socket: Socket) => Socket) => void,
): Promise<{ url: string; server: Server; sockets: ReadonlySet<Socket> }> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket): Socket => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    return socket;
  };
  const server = createServer((inbound) => serve(track(inbound), track));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as AddressInfo).port);
  return { url: url.toString(), server, sockets };
}
