import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { test, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '@agentq/coordinator';
import {
  COORDINATOR_OPTIONS,
  controlServer,
  coordinator,
  launcher,
  outputOf,
  script,
  settled,
} from './helpers.js';

test('coordinator restarted during a job: every report still arrives, in order', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'outage',
    prompt: script(
      [
        { say: 'before the outage' },
        { hello: true },
        { await: true },
        { say: 'during the outage 1' },
        { say: 'during the outage 2' },
        { event: { type: 'result', text: 'done despite the outage' } },
      ],
      control,
    ),
  });
  const hello = await control.next();
  await c.close();
  // the executor finishes while nobody answers: output and `completed` wait in the report queue
  hello.release();
  await hello.closed;

  const c2 = await startCoordinator({ ...COORDINATOR_OPTIONS, port: c.port }, { core: c.core });
  const client2 = new AgentqClient({ url: c2.url });
  t.after(async () => {
    await client2.close();
    await c2.close();
  });
  const done = await settled(client2, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'done despite the outage');
  assert.equal(await outputOf(client2, job.job_id), 'before the outage\nduring the outage 1\nduring the outage 2\n');

  // and the launcher polls the restarted coordinator again
  const next = await client2.createJob({ type: 'start_session', session_name: 'after', prompt: script([]) });
  assert.equal((await settled(client2, next.job_id)).status, 'completed');
});

test('a coordinator that lost its state (401 launcher_unknown) is answered by registering again', async (t) => {
  const { c } = await coordinator(t);
  const { launcher: l, id } = await launcher(t, c.url);
  await c.close();
  const fresh = await startCoordinator({ ...COORDINATOR_OPTIONS, port: c.port });
  const client = new AgentqClient({ url: fresh.url });
  t.after(async () => {
    await client.close();
    await fresh.close();
  });
  const job = await client.createJob({ type: 'start_session', session_name: 'new-world', prompt: script([]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.notEqual(done.launcher_id, id);
  assert.equal(l.launcherId, done.launcher_id);
});

test('a report answered 503 is retried until it is acknowledged', async (t) => {
  const { c, client } = await coordinator(t);
  const proxy = await failingProxy(t, c.url, (req) => req.method === 'POST' && /\/completed$/.test(req.url ?? ''));
  await launcher(t, proxy.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'flaky',
    prompt: script([{ say: 'hello' }, { event: { type: 'result', text: 'made it' } }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'made it');
  assert.equal(proxy.failed, 1);
  assert.equal(proxy.count((req) => /\/completed$/.test(req)), 2);
});

/**
 * An HTTP proxy in front of the coordinator that answers 503 to the first request matching
 * `failFirst`, and forwards everything else (long polls included).
 */
async function failingProxy(
  t: TestContext,
  target: string,
  failFirst: (req: IncomingMessage) => boolean,
): Promise<{ url: string; failed: number; count: (match: (url: string) => boolean) => number }> {
  const upstream = new URL(target);
  const seen: string[] = [];
  let failed = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(req.url ?? '');
    if (failed === 0 && failFirst(req)) {
      failed++;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 'shutting_down', message: 'injected by the test proxy' } }));
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
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    get failed() {
      return failed;
    },
    count: (match) => seen.filter(match).length,
  };
}
