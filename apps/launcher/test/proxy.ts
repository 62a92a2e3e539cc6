import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { TestContext } from 'node:test';

/** What the proxy answers instead of forwarding: true = 503. */
export type Injected = boolean | { status: number; code: string };

export interface Recorded {
  method: string;
  url: string;
  /** the parsed JSON body (undefined when there was none) */
  body: unknown;
}

export interface Proxy {
  url: string;
  count: (match: (url: string) => boolean) => number;
  /** resolves once a request whose URL matches has arrived */
  seen: (match: (url: string) => boolean) => Promise<void>;
  /** every request so far, with its JSON body */
  readonly requests: Recorded[];
  /** the bodies of the requests to `POST path` so far */
  bodies(path: string | RegExp): unknown[];
}

/**
 * An HTTP proxy in front of the coordinator that records every request with its body, answers
 * 503 (or the given error) to the requests `fail` picks, and forwards everything else (long polls
 * included). Lets tests see exactly what a launcher sent, also the fields the coordinator accepts
 * but does not keep yet.
 */
export async function proxy(
  t: TestContext,
  target: string,
  fail: (req: IncomingMessage) => Injected = () => false,
): Promise<Proxy> {
  const upstream = new URL(target);
  const requests: Recorded[] = [];
  const waiters: Array<{ match: (url: string) => boolean; resolve: () => void }> = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '';
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      requests.push({ method: req.method ?? '', url, body });
      for (const w of waiters.filter((w) => w.match(url))) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      const injected = fail(req);
      if (injected) {
        const { status, code } = injected === true ? { status: 503, code: 'shutting_down' } : injected;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code, message: 'injected by the test proxy' } }));
        return;
      }
      const out = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      out.on('error', () => res.destroy());
      res.on('close', () => out.destroy());
      out.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const urls = () => requests.map((r) => r.url);
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    requests,
    count: (match) => urls().filter(match).length,
    seen: (match) =>
      new Promise<void>((resolve) => (urls().some(match) ? resolve() : waiters.push({ match, resolve }))),
    bodies: (path) =>
      requests
        .filter((r) => r.method === 'POST' && (typeof path === 'string' ? r.url === path : path.test(r.url)))
        .map((r) => r.body),
  };
}
