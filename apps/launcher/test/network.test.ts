import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tcpProxy } from '@agentq/client/test/tcp-proxy';
import { COORDINATOR_OPTIONS, controlServer, coordinator, launcher, script, settled } from './helpers.js';

test('a heartbeat whose connection goes silent is given up within one interval: the launcher does not go stale and its job keeps running', { timeout: 60_000 }, async (t) => {
  // heartbeat every 1 s, stale after 5 s of silence
  const { c, client } = await coordinator(t);
  const px = await tcpProxy(t, c.url);
  const control = await controlServer(t);
  await launcher(t, px.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'nat',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'survived' } }], control),
  });
  const running = await control.next();
  // a heartbeat went out on a connection that is kept alive for the next one; then a NAT forgets
  // every connection (the parked poll's too): they stay open but carry nothing. New ones work.
  await px.sentUp(/POST \/launcher\/heartbeat/);
  const before = px.accepted;
  px.freeze('drop');
  // heartbeats on new connections, over longer than the heartbeat timeout
  await px.sentUp(/POST \/launcher\/heartbeat/g, { from: before, times: COORDINATOR_OPTIONS.heartbeatTimeoutSeconds + 1 });
  assert.equal((await client.getJob(job.job_id)).status, 'running');
  running.release();
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'survived');
});

test('beats stay one interval apart when one is given up: a heartbeat timeout under two intervals holds on a connection that went silent', { timeout: 60_000 }, async (t) => {
  // heartbeat every 2 s, stale after 3.5 s: a beat given up after one interval and the next sent
  // an interval after that (4 s between two beats that arrive) would make the launcher stale
  const { c, client } = await coordinator(t, { heartbeatIntervalSeconds: 2, heartbeatTimeoutSeconds: 3.5 });
  const px = await tcpProxy(t, c.url);
  const control = await controlServer(t);
  await launcher(t, px.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'nat-tight',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'survived' } }], control),
  });
  const running = await control.next();
  await px.sentUp(/POST \/launcher\/heartbeat/);
  const before = px.accepted;
  px.freeze('drop');
  await px.sentUp(/POST \/launcher\/heartbeat/g, { from: before, times: 4 });
  assert.equal((await client.getJob(job.job_id)).status, 'running');
  running.release();
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
});
