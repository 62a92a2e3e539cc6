import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FailedReport } from '@agentq/protocol';
import { captureLog, controlServer, coordinator, gone, launcher, script, settled } from './helpers.js';
import { proxy } from './proxy.js';

/**
 * The executor's pid, from the launcher's log (not from the executor itself: the watchdog may
 * end it before it could say anything, and the test must not wait on it then).
 */
async function executorPid(waitFor: ReturnType<typeof captureLog>['waitFor'], jobId: string): Promise<number> {
  const line = await waitFor((l) => l['msg'] === 'executor started' && l['job_id'] === jobId);
  return Number(line['executor_pid']);
}

/** Steps that never end by themselves. */
const FOREVER = { sleep: 600_000 };

test('an executor that goes silent is stopped after --idle-timeout and its job fails with executor_idle', async (t) => {
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url);
  const { log, waitFor } = captureLog();
  await launcher(t, px.url, { idleTimeoutMs: 300, killGraceMs: 200 }, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'silent',
    // prints, then waits for ever (ignoring SIGTERM: the group still gets SIGKILL)
    prompt: script([{ say: 'working' }, { ignore: 'SIGTERM' }, FOREVER]),
  });
  const pid = await executorPid(waitFor, job.job_id);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, 'the executor printed nothing for 0.3 s (--idle-timeout) and was stopped');
  const [failed] = px.bodies(`/launcher/jobs/${job.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.error_code, 'executor_idle');
  await gone(-pid, "the silent executor's process group");
});

test('output of any kind (stdout or stderr) counts as life: a chatty executor is not stopped', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url, { idleTimeoutMs: 3_000 });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'chatty',
    // four pauses of 800 ms: 3.2 s in all, longer than the idle timeout, but never silent for it
    prompt: script([
      { say: 'step 1' },
      { sleep: 800 },
      { stderr: 'step 2' },
      { sleep: 800 },
      { event: { type: 'output', text: 'step 3\n' } },
      { sleep: 800 },
      { event: { type: 'session', session_id: 'still-here' } },
      { sleep: 800 },
      { event: { type: 'result', text: 'done' } },
    ]),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'done');
});

test('an executor that never exits after its result is killed after --exit-grace; the job completes with the result', async (t) => {
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, { exitGraceMs: 200 }, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'lingers',
    prompt: script([{ event: { type: 'result', text: 'all done' } }, FOREVER]),
  });
  const pid = await executorPid(waitFor, job.job_id);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'all done');
  await gone(-pid, "the lingering executor's process group");
});

test('an executor that lingers past --exit-grace is sent SIGTERM before SIGKILL, and what it says then changes nothing', async (t) => {
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, { exitGraceMs: 200 }, { log });
  // on SIGTERM it says why it ends and exits 143: killed with SIGKILL at once, it could not (nor
  // could claude end the commands it runs outside its process group)
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'lingers-then-told',
    prompt: script([{ onTerm: { type: 'error', message: 'terminated by SIGTERM' } }, { event: { type: 'result', text: 'all done' } }, FOREVER]),
  });
  const exited = await waitFor((l) => l['msg'] === 'executor exited' && l['job_id'] === job.job_id);
  assert.deepEqual([exited['code'], exited['signal']], [143, null], 'it had the chance to end on SIGTERM');
  const done = await settled(client, job.job_id);
  assert.deepEqual([done.status, done.result, done.error], ['completed', 'all done', null]);
});

test('an executor that never exits after its error event is killed after --exit-grace; the job fails with the error', async (t) => {
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url);
  const { log, waitFor } = captureLog();
  await launcher(t, px.url, { exitGraceMs: 200 }, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'errs-and-lingers',
    prompt: script([{ event: { type: 'error', message: 'quota exceeded', code: 'quota_exceeded' } }, FOREVER]),
  });
  const pid = await executorPid(waitFor, job.job_id);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, 'quota exceeded');
  const [failed] = px.bodies(`/launcher/jobs/${job.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.error_code, 'quota_exceeded', "the error event's code is the job's error_code");
  await gone(-pid, "the lingering executor's process group");
});

// The exit code of an executor the launcher itself had sent SIGTERM (its exit grace ran out) was
// said with what usually sends SIGTERM: "asked to stop: by a user, a service manager or a
// shutdown", none of which had.
test('an executor that exits 143 on the SIGTERM the launcher sent after --exit-grace: the error says the launcher sent it', async (t) => {
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, { exitGraceMs: 200 }, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'errs-lingers-exits-143',
    prompt: script([
      { onTerm: { type: 'output', text: 'bye' } },
      { event: { type: 'error', message: 'quota exceeded' } },
      FOREVER,
    ]),
  });
  const exited = await waitFor((l) => l['msg'] === 'executor exited' && l['job_id'] === job.job_id);
  assert.deepEqual([exited['code'], exited['signal']], [143, null]);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, "quota exceeded (exit code 143, after the launcher's SIGTERM)");
});

test('a stop or a timeout that comes after the result, while the executor lingers, leaves the result to stand', async (t) => {
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, { exitGraceMs: 600_000 }, { log });
  const stopped = await client.createJob({
    type: 'start_session',
    session_name: 'answered-then-stopped',
    prompt: script([{ event: { type: 'result', text: 'the answer' } }, FOREVER]),
  });
  await waitFor((l) => l['msg'] === 'executor result' && l['job_id'] === stopped.job_id);
  await client.stopJob(stopped.job_id);
  const done = await settled(client, stopped.job_id);
  assert.deepEqual([done.status, done.result, done.error], ['completed', 'the answer', null]);
  // a timeout is a stop the coordinator asks for: the same
  const timed = await client.createJob({
    type: 'start_session',
    session_name: 'answered-then-timed-out',
    prompt: script([{ event: { type: 'result', text: 'in time' } }, FOREVER]),
    timeout_ms: 1_000,
  });
  const late = await settled(client, timed.job_id);
  assert.deepEqual([late.status, late.result], ['completed', 'in time']);
});

test('what an executor says once it is told to stop changes nothing: a stop ends stopped, a shutdown launcher_shutdown, an earlier result stands', async (t) => {
  const { c, client } = await coordinator(t);
  const { log, waitFor } = captureLog();
  const l = await launcher(t, c.url, { exitGraceMs: 600_000, shutdownGraceMs: 0 }, { log });
  const sayErrorOnTerm = { onTerm: { type: 'error', message: 'terminated by SIGTERM' } };
  const stopped = await client.createJob({ type: 'start_session', session_name: 'says-why', prompt: script([sayErrorOnTerm, { say: 'working' }, FOREVER]) });
  const working = (jobId: string) => waitFor((line) => line['msg'] === 'executor output' && line['job_id'] === jobId && line['output'] === 'working');
  await working(stopped.job_id); // its SIGTERM handler is in place
  await client.stopJob(stopped.job_id);
  assert.equal((await settled(client, stopped.job_id)).status, 'stopped');

  const answered = await client.createJob({
    type: 'start_session',
    session_name: 'answered-then-says-why',
    prompt: script([sayErrorOnTerm, { event: { type: 'result', text: 'the answer' } }, FOREVER]),
  });
  await waitFor((line) => line['msg'] === 'executor result' && line['job_id'] === answered.job_id);
  await client.stopJob(answered.job_id);
  const done = await settled(client, answered.job_id);
  assert.deepEqual([done.status, done.result], ['completed', 'the answer']);

  const cut = await client.createJob({ type: 'start_session', session_name: 'shut-down', prompt: script([sayErrorOnTerm, { say: 'working' }, FOREVER]) });
  await working(cut.job_id);
  await l.launcher.shutdown();
  const shut = await settled(client, cut.job_id);
  assert.deepEqual([shut.status, shut.error_code], ['failed', 'launcher_shutdown']);
});

test("the 'executor started' log line has one pid (the launcher's) and the executor's as executor_pid", async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const { log, raw, waitFor } = captureLog();
  await launcher(t, c.url, {}, { log });
  const job = await client.createJob({ type: 'start_session', session_name: 'pids', prompt: script([{ hello: true }], control) });
  const hello = await control.next();
  const line = await waitFor((l) => l['msg'] === 'executor started' && l['job_id'] === job.job_id);
  assert.equal(line['pid'], process.pid);
  assert.equal(line['executor_pid'], hello.pid);
  const text = raw.find((r) => r.includes('"executor started"') && r.includes(job.job_id))!;
  assert.equal(text.match(/"pid":/g)?.length, 1, text);
  assert.equal((await settled(client, job.job_id)).status, 'completed');
});
