import assert from 'node:assert/strict';
import { copyFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import {
  captureLog,
  controlServer,
  coordinator,
  coordinatorAgain,
  launcher,
  outputOf,
  script,
  settled,
  tempDir,
} from './helpers.js';
import { proxy } from './proxy.js';

test('coordinator restarted during a job: every report still arrives, in order', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const { log, lines, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log });
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
  // the executor finishes while nobody answers: its output and `completed` wait in the job's
  // report queue (the restart waits until the launcher has queued `completed` and a report of
  // the job has failed four times)
  hello.release();
  await waitFor((l) => l['msg'] === 'job completed' && l['job_id'] === job.job_id);
  await waitFor(
    (l) => l['msg'] === 'report not delivered; will retry' && l['job_id'] === job.job_id && Number(l['attempt']) >= 3,
  );

  const c2 = await coordinatorAgain(t, c.port, {}, { core: c.core });
  const client2 = new AgentqClient({ url: c2.url });
  t.after(() => client2.close());
  const done = await settled(client2, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'done despite the outage');
  assert.equal(await outputOf(client2, job.job_id), 'before the outage\nduring the outage 1\nduring the outage 2\n');

  // and the launcher polls the restarted coordinator again
  const next = await client2.createJob({ type: 'start_session', session_name: 'after', prompt: script([]) });
  assert.equal((await settled(client2, next.job_id)).status, 'completed');

  // the outage is logged when it starts and when it ends, not at every retry (twice at most: a
  // request in flight while the server closes may still succeed after the first failure)
  const count = (msg: RegExp) => lines.filter((l) => msg.test(String(l['msg']))).length;
  const retries = count(/will retry/);
  // (its parked poll may be answered 503 shutting_down as it closes: "coordinator unavailable")
  const down = count(/coordinator (unreachable|unavailable)/);
  assert.ok(retries >= 4, `report retries: ${retries}`);
  assert.ok(down >= 1 && down <= 2, `outage logged ${down} times for ${retries} report retries`);
  assert.equal(count(/coordinator reachable again/), down);
});

test('coordinator restarted on its SQLite file during a job: the job still completes, with all its output', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const { c, client } = await coordinator(t, { databaseUrl });
  const control = await controlServer(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'journaled',
    prompt: script(
      [{ say: 'before' }, { hello: true }, { await: true }, { say: 'after' }, { event: { type: 'result', text: 'kept' } }],
      control,
    ),
  });
  const hello = await control.next();
  await waitFor((l) => l['msg'] === 'report delivered' && l['report'] === 'output' && l['job_id'] === job.job_id);
  await c.close();
  hello.release();
  await waitFor((l) => l['msg'] === 'job completed' && l['job_id'] === job.job_id);

  const c2 = await coordinatorAgain(t, c.port, { databaseUrl });
  const client2 = new AgentqClient({ url: c2.url });
  t.after(() => client2.close());
  const done = await settled(client2, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'kept');
  // output is stored too: what was sent before the restart is still there, and the batch sent
  // after it lands at its byte offset
  const out = await client2.getOutput(job.job_id, { offset: 0 });
  assert.equal(out.output, 'before\nafter\n');
  assert.equal(out.total_bytes, Buffer.byteLength('before\nafter\n'));
});

test('a coordinator that lost its state (401 launcher_unknown) is answered by registering again', async (t) => {
  const { c } = await coordinator(t);
  const { launcher: l, id } = await launcher(t, c.url);
  await c.close();
  const fresh = await coordinatorAgain(t, c.port);
  const client = new AgentqClient({ url: fresh.url });
  t.after(() => client.close());
  const job = await client.createJob({ type: 'start_session', session_name: 'new-world', prompt: script([]) });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.notEqual(done.launcher_id, id);
  assert.equal(l.launcherId, done.launcher_id);
});

test('a coordinator older than registration_key (it refuses the field) is registered with as before, at once', async (t) => {
  const { c, client } = await coordinator(t);
  // as a coordinator without the field answers it: an unknown field of the body
  const px = await proxy(t, c.url, (req) => {
    if (req.method !== 'POST' || req.url !== '/launcher/register') return false;
    const body = px.requests.at(-1)?.body as { registration_key?: string };
    if (body.registration_key === undefined) return false;
    return { status: 400, code: 'validation_failed', message: 'registration_key: is not a known field', details: { field: 'registration_key', in: 'body' } };
  });
  const log = captureLog();
  const { id } = await launcher(t, px.url, {}, { log: log.log });
  const bodies = px.bodies('/launcher/register') as Array<{ registration_key?: string }>;
  assert.deepEqual(bodies.map((b) => b.registration_key === undefined), [false, true], 'once with the key, then without it');
  assert.ok(log.lines.some((l) => /does not know registration_key/.test(String(l['msg']))), 'and says so');
  assert.deepEqual((await client.listLaunchers()).launchers.map((l) => l.launcher_id), [id]);
});

test('a launcher that fell back from registration_key (an older coordinator) sends it again when it registers again, once the coordinator knows it', async (t) => {
  const { c } = await coordinator(t);
  let older = true;
  let forget = false;
  const px = await proxy(t, c.url, (req) => {
    if (req.method === 'POST' && req.url === '/launcher/register') {
      const body = px.requests.at(-1)?.body as { registration_key?: string };
      if (!older || body.registration_key === undefined) return false;
      return { status: 400, code: 'validation_failed', message: 'registration_key: is not a known field', details: { field: 'registration_key', in: 'body' } };
    }
    if (!forget || !req.url?.startsWith('/launcher/')) return false;
    forget = false;
    return { status: 401, code: 'launcher_unknown', message: 'the coordinator lost its state' };
  });
  const log = captureLog();
  const { id } = await launcher(t, px.url, {}, { log: log.log });
  assert.deepEqual((px.bodies('/launcher/register') as Array<{ registration_key?: string }>).map((b) => b.registration_key === undefined), [false, true]);

  // the coordinator is upgraded, and the launcher must register again
  older = false;
  forget = true;
  const again = await log.waitFor((l) => l['msg'] === 'registered again under a new id');
  assert.equal(again['previous_launcher_id'], id);
  const bodies = px.bodies('/launcher/register') as Array<{ registration_key?: string }>;
  assert.equal(bodies.length, 3);
  assert.match(bodies[2]?.registration_key ?? '', /^[A-Za-z0-9_-]{16,128}$/, 'the new registration carries a key again');
});

test('a registration whose answer was lost (connection reset) is sent again with its key: one launcher is listed, and it runs jobs', async (t) => {
  const { c, client } = await coordinator(t);
  let lost = 0;
  const px = await proxy(t, c.url, (req) => {
    if (lost > 0 || req.method !== 'POST' || req.url !== '/launcher/register') return false;
    lost++;
    return 'lost';
  });
  const { id } = await launcher(t, px.url);

  const [first, again, ...more] = px.bodies('/launcher/register') as Array<{ registration_key?: string }>;
  assert.equal(more.length, 0);
  assert.match(first?.registration_key ?? '', /^[A-Za-z0-9_-]{16,128}$/);
  assert.equal(again?.registration_key, first?.registration_key, 'the retry sends the same key');
  const { launchers } = await client.listLaunchers();
  assert.deepEqual(
    launchers.map((l) => [l.launcher_id, l.status]),
    [[id, 'online']],
    'the first try registered the launcher; the retry was answered with it, not with a second one',
  );

  const job = await client.createJob({
    type: 'start_session',
    session_name: 'after-a-lost-answer',
    prompt: script([{ event: { type: 'result', text: 'ran' } }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.launcher_id, id);
  assert.equal(done.result, 'ran');
});

test('a report answered 503 is retried until it is acknowledged', async (t) => {
  const { c, client } = await coordinator(t);
  let injected = 0;
  const px = await proxy(t, c.url, (req) => {
    if (injected > 0 || req.method !== 'POST' || !/\/completed$/.test(req.url ?? '')) return false;
    injected++;
    return true;
  });
  await launcher(t, px.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'flaky',
    prompt: script([{ say: 'hello' }, { event: { type: 'result', text: 'made it' } }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'made it');
  assert.equal(injected, 1);
  assert.equal(px.count((url) => /\/completed$/.test(url)), 2);
});

test("a sync answered 503 storage_unavailable (the coordinator cannot reach its database) is sent again: none of its reports is dropped", async (t) => {
  const { c, client } = await coordinator(t);
  let injected = 0;
  // what a PostgreSQL coordinator answers, at once, for a sync whose store cannot be reached
  const unreachable = { status: 503, code: 'storage_unavailable', message: 'the database is unavailable: timeout exceeded when trying to connect', details: { sql_state: null } };
  const px = await proxy(t, c.url, (req) => {
    if (injected > 0 || req.method !== 'POST' || !/\/completed$/.test(req.url ?? '')) return false;
    injected++;
    return unreachable;
  });
  await launcher(t, px.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'db-down',
    prompt: script([{ say: 'hello' }, { event: { type: 'result', text: 'kept' } }]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'kept');
  assert.equal(injected, 1);
  assert.equal(px.count((url) => /\/completed$/.test(url)), 2, 'the completed report was sent again');
});

test('shutdown while `started` is not acknowledged: the executor never runs and the launcher still exits', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const px = await proxy(t, c.url, (req) => /\/started$/.test(req.url ?? ''));
  const { launcher: l } = await launcher(t, px.url, { shutdownGraceMs: 0 }, { reportDrainMs: 200 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'never-started',
    prompt: script([{ hello: true }], control),
  });
  // the launcher holds the job (claimed) and keeps retrying `started`
  await px.seen((url) => url.endsWith(`/launcher/jobs/${job.job_id}/started`));
  assert.equal(await l.shutdown(), 'shutdown');
  assert.equal(control.connected, 0);
  assert.equal(control.maxConnected, 0, 'the executor was never spawned');
  // the launcher's deregistration released the job it never started: back in the queue
  assert.equal((await client.getJob(job.job_id)).status, 'pending');
});

test('shutdown while the poller is registering again: polling ends, reports drain and the launcher deregisters', async (t) => {
  // heartbeats out of the way, so that the poller is the one that starts the re-registration
  const { c, client } = await coordinator(t, { heartbeatIntervalSeconds: 60, heartbeatTimeoutSeconds: 120 });
  let forgotten = false;
  // once `forgotten`, the coordinator seems to have lost the launcher (polls: 401) and
  // registering again does not succeed yet (503, retried with backoff)
  const px = await proxy(t, c.url, (req) => {
    if (!forgotten) return false;
    if (req.method === 'GET' && req.url?.startsWith('/launcher/jobs')) return { status: 401, code: 'launcher_unknown' };
    return req.method === 'POST' && req.url === '/launcher/register';
  });
  const { log, waitFor } = captureLog();
  const { launcher: l, id } = await launcher(t, px.url, { shutdownGraceMs: 0 }, { log, reportDrainMs: 200 });
  forgotten = true;
  await waitFor((line) => /registering again/.test(String(line['msg'])));
  await px.seen((url) => url === '/launcher/register');

  // the end of the drain aborts polling while it waits for the registration: not a failure
  assert.equal(await l.shutdown(), 'shutdown');
  // it deregistered itself (the real coordinator still knew it)
  assert.equal(px.count((url) => url.startsWith(`/launchers/${id}`)), 1);
  assert.equal((await client.listLaunchers()).launchers.some((x) => x.launcher_id === id), false);
});

test('a job that ended here but that a coordinator restored from a backup counts as running is reported stopped when it is stopped, not left stopping', { timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const db = join(dir, 'agentq.db');
  const databaseUrl = `sqlite:${db}`;
  const { c } = await coordinator(t, { databaseUrl });
  const control = await controlServer(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log });
  const client = new AgentqClient({ url: c.url });
  t.after(() => client.close());
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'restored',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'done' } }], control),
  });
  const hello = await control.next();
  await waitFor((l) => l['msg'] === 'report delivered' && l['report'] === 'started' && l['job_id'] === job.job_id);
  // the backup: taken while the job runs (the coordinator stopped for it, so the file is whole)
  await client.close();
  await c.close();
  copyFileSync(db, join(dir, 'backup.db'));
  const open = async () => {
    const next = await coordinatorAgain(t, c.port, { databaseUrl });
    const nextClient = new AgentqClient({ url: next.url });
    t.after(() => nextClient.close());
    return { next, nextClient };
  };
  // the job ends, and the coordinator hears of it
  const second = await open();
  hello.release();
  assert.equal((await settled(second.nextClient, job.job_id)).status, 'completed');
  await second.nextClient.close();
  await second.next.close();

  // the restore: the coordinator counts the job as running on the launcher, which has ended it
  for (const suffix of ['-wal', '-shm']) rmSync(db + suffix, { force: true });
  copyFileSync(join(dir, 'backup.db'), db);
  const third = await open();
  assert.equal((await third.nextClient.getJob(job.job_id)).status, 'running');
  await third.nextClient.stopJob(job.job_id);
  const stopped = await settled(third.nextClient, job.job_id);
  assert.equal(stopped.status, 'stopped');
});
