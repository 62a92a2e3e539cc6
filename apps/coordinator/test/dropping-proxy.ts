import { createServer, request, type IncomingHttpHeaders } from 'node:http';
import type { TestContext } from 'node:test';

/**
 * A proxy that forwards everything to the coordinator but, for the first `drops` POSTs to `path`
 * (with its query: `/sessions/s/stop?tree=true`), closes the client's connection instead of
 * passing the answer on: the coordinator did it (created the job, made the stop), the answer is
 * lost. `keys`: the Idempotency-Key of each request to `path`, in order.
 */
export async function droppingProxy(t: TestContext, target: string, drops: number, path = '/jobs') {
  const upstream = new URL(target);
  const keys: (string | undefined)[] = [];
  let dropped = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const drop = req.method === 'POST' && req.url === path && dropped < drops;
      if (req.url === path) keys.push(header(req.headers, 'idempotency-key'));
      const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
        if (drop) {
          dropped++;
          // the coordinator has answered (it did what was asked); the client never hears it
          up.resume();
          up.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.end(Buffer.concat(chunks));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, keys, dropped: () => dropped };
}

const header = (h: IncomingHttpHeaders, name: string) => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

