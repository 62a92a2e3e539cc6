import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { TestContext } from 'node:test';
import { listenForTest } from '@agentq/test-support';

/**
 * What the proxy answers instead of forwarding: true = 503. `'lost'`: the request is forwarded
 * and the coordinator answers it, but the proxy resets the connection instead of passing the
 * answer on (an answer lost on the way back: the request did take effect).
 */
export type Injected = boolean | { status: number; code: string; message?: string; details?: Record<string, unknown> } | 'lost';

export interface Recorded {
  method: string;
  url: string;
  /** the parsed JSON body (undefined when there was none) */
  body: unknown;
  /** a request a `POST /launcher/sync` stands for (see below), not one that was sent as such */
  virtual?: true;
}

export interface Proxy {
  url: string;
  count: (match: (url: string) => boolean) => number;
  /** resolves once a request whose URL matches has arrived (`times` such requests, counting those before) */
  seen: (match: (url: string) => boolean, times?: number) => Promise<void>;
  /** every request so far, with its JSON body */
  readonly requests: Recorded[];
  /** the bodies of the requests to `POST path` so far */
  bodies(path: string | RegExp): unknown[];
}

/**
 * The requests of the one-call-per-report protocol a `POST /launcher/sync` stands for: a long-poll
 * (`GET /launcher/jobs?launcher_id=&capacity=`) when it asks for work or waits (capacity > 0, or no
 * reports), and one `POST /launcher/jobs/{id}/{kind}` per report, with the body that endpoint takes.
 * The launcher sends its polls and reports this way; tests written against the single endpoints
 * see them as such, and an error injected into one of them fails the whole sync (as a lost sync
 * would fail every report in it).
 */
function standsFor(body: unknown): Recorded[] {
  const b = body as { launcher_id?: string; capacity?: number; reports?: Array<Record<string, unknown>> } | undefined;
  if (!b || typeof b !== 'object' || !Array.isArray(b.reports)) return [];
  const out: Recorded[] = [];
  if (b.reports.length === 0 || (b.capacity ?? 0) > 0) {
    out.push({ method: 'GET', url: `/launcher/jobs?launcher_id=${b.launcher_id}&capacity=${b.capacity}`, body: undefined, virtual: true });
  }
  for (const r of b.reports) {
    const { job_id, kind, ...rest } = r;
    out.push({ method: 'POST', url: `/launcher/jobs/${String(job_id)}/${String(kind)}`, body: { launcher_id: b.launcher_id, ...rest }, virtual: true });
  }
  return out;
}

/**
 * An HTTP proxy in front of the coordinator that records every request with its body, answers
 * 503 (or the given error) to the requests `fail` picks, or loses the coordinator's answer to them
 * (`'lost'`), and forwards everything else (long polls included). Lets tests see exactly what a launcher sent, also the fields the coordinator accepts
 * but does not keep yet. A `POST /launcher/sync` is recorded, and offered to `fail`, also as the
 * single-endpoint requests it stands for (`standsFor`).
 */
export async function proxy(
  t: TestContext,
  target: string,
  fail: (req: IncomingMessage) => Injected = () => false,
  /**
   * The coordinator's JSON answer to a request as the launcher gets it (a coordinator older than
   * a field of it, say); undefined: passed on as it came
   */
  answer?: (req: IncomingMessage) => ((body: unknown) => unknown) | undefined,
): Promise<Proxy> {
  const upstream = new URL(target);
  const requests: Recorded[] = [];
  const waiters: Array<{ match: (url: string) => boolean; resolve: () => void; left: number }> = [];
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
      const virtual = req.method === 'POST' && url === '/launcher/sync' ? standsFor(body) : [];
      const recorded: Recorded[] = [{ method: req.method ?? '', url, body }, ...virtual];
      requests.push(...recorded);
      for (const r of recorded) {
        for (const w of waiters.filter((w) => w.match(r.url))) {
          if (--w.left > 0) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      }
      let injected = fail(req);
      // the single requests a sync stands for: an error injected into one fails the sync
      for (const v of virtual) {
        if (injected) break;
        injected = fail(Object.assign(Object.create(req) as IncomingMessage, { method: v.method, url: v.url }));
      }
      if (injected && injected !== 'lost') {
        const { status, code, message, details } = injected === true ? { status: 503, code: 'shutting_down', message: undefined, details: undefined } : injected;
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { code, message: message ?? 'injected by the test proxy', ...(details ? { details } : {}) } }));
        return;
      }
      const out = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          if (injected === 'lost') {
            // the whole answer read (the coordinator is done with the request), then dropped
            up.resume();
            up.on('end', () => res.destroy());
            return;
          }
          const rewrite = answer?.(req);
          if (!rewrite) {
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
            return;
          }
          const parts: Buffer[] = [];
          up.on('data', (c: Buffer) => parts.push(c));
          up.on('end', () => {
            const text = JSON.stringify(rewrite(JSON.parse(Buffer.concat(parts).toString('utf8'))));
            res.writeHead(up.statusCode ?? 502, { ...up.headers, 'content-length': Buffer.byteLength(text) });
            res.end(text);
          });
        },
      );
      out.on('error', () => res.destroy());
      res.on('close', () => out.destroy());
      out.end(Buffer.concat(chunks));
    });
  });
  const url = await listenForTest(t, server);
  const urls = () => requests.map((r) => r.url);
  return {
    url,
    requests,
    count: (match) => urls().filter(match).length,
    seen: (match, times = 1) =>
      new Promise<void>((resolve) => {
        const left = times - urls().filter(match).length;
        if (left <= 0) resolve();
        else waiters.push({ match, resolve, left });
      }),
    bodies: (path) =>
      requests
        .filter((r) => r.method === 'POST' && (typeof path === 'string' ? r.url === path : path.test(r.url)))
        .map((r) => r.body),
  };
}

/**
 * For `proxy`'s `answer`: the coordinator's registration and heartbeat answers as one older than
 * `max_output_bytes` gives them (it does not say how much of a job's output it keeps).
 */
export function olderThanOutputWindow(req: IncomingMessage): ((body: unknown) => unknown) | undefined {
  if (req.url !== '/launcher/register' && req.url !== '/launcher/heartbeat') return undefined;
  return (body) => {
    const { max_output_bytes: _kept, ...older } = body as Record<string, unknown>;
    return older;
  };
}
