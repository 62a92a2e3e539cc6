import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { CompletedReport, FailedReport } from '@agentq/protocol';
import { alive, gone, settled } from './helpers.js';
import { FAKE_USAGE, setup, stoppedTurn } from './claude.js';
import { olderThanOutputWindow } from './proxy.js';

/** How a turn of the claude-code executor ends when claude does not end it as it should. */

// A claude that ended without a result by a signal, or with the code a shell gives a process
// ended by one (128 + its number), failed the job with "exit 143": nothing said what ended it.
test('claude-code executor: a claude ended by a signal (or exiting 128 + a signal number) fails the job saying which signal and what sends it', async (t) => {
  const { client } = await setup(t);
  const terminated = await settled(client, (await client.createJob({ type: 'start_session', session_name: 'terminated', prompt: 'TERMINATED' })).job_id);
  assert.equal(terminated.status, 'failed');
  assert.match(terminated.error ?? '', /^claude exited with code 143 \(128 \+ 15: SIGTERM, asked to stop: by a user, a service manager or a shutdown\) without a result/);
  const killed = await settled(client, (await client.createJob({ type: 'start_session', session_name: 'oom-killed', prompt: 'OOM_KILLED' })).job_id);
  assert.equal(killed.status, 'failed');
  assert.match(killed.error ?? '', /^claude was killed by SIGKILL \(which cannot be caught: the kernel's OOM killer when memory ran out, or kill -9\)/);
});

// claude's result without usage, or with `{}`, was reported as four zero counts: a turn that
// cost nothing, when nothing was known.
test('claude-code executor: a result without usage, or with an empty one, reports no usage rather than zeros', async (t) => {
  const { client, px } = await setup(t);
  for (const prompt of ['NO_USAGE', 'EMPTY_USAGE']) {
    const job = await client.createJob({ type: 'start_session', session_name: prompt.toLowerCase(), prompt });
    const done = await settled(client, job.job_id);
    assert.equal(done.status, 'completed', done.error ?? '');
    const [completed] = px.bodies(`/launcher/jobs/${job.job_id}/completed`) as CompletedReport[];
    assert.equal(completed!.usage, undefined, `${prompt}: no usage in the report`);
    assert.equal(completed!.cost_usd, 0.0123, `${prompt}: the cost claude gave is reported`);
    assert.equal(done.usage, null, `${prompt}: the job's usage is unknown`);
  }
});

// A second `result` (and lines after the first) changed the turn's outcome: the second one's
// error failed a turn whose first result was a success, and the session id of the lines after it
// replaced the session's.
test('claude-code executor: the first result is the turn\'s; a second one, and the session ids of the lines after it, change nothing', async (t) => {
  const { client, px, claude } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'two-results', prompt: 'TWO_RESULTS' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'Answer to: TWO_RESULTS');
  assert.equal(px.bodies(`/launcher/jobs/${job.job_id}/completed`).length, 1, 'reported once');
  assert.equal(px.bodies(`/launcher/jobs/${job.job_id}/failed`).length, 0);
  const [completed] = px.bodies(`/launcher/jobs/${job.job_id}/completed`) as CompletedReport[];
  assert.deepEqual(completed!.usage, FAKE_USAGE);
  assert.equal(completed!.cost_usd, 0.0123);
  // the session claude started, named by the init line and the first result
  const [call] = claude.calls();
  assert.equal(completed!.executor_session_id, call!.session_id);
});

// The launcher's SIGKILL after --kill-grace reached the executor's process group only: a Bash
// command claude runs in a session of its own, which claude ends on SIGTERM, ran on when claude
// did not get to end it.
test('claude-code executor: a stopped claude that has to be SIGKILLed takes the Bash commands it runs outside the process group with it', async (t) => {
  const { claude } = await stoppedTurn(t, 'stuck', 'BASH_TOOL STUCK', 300);
  const [call] = claude.calls();
  assert.ok(call!.tool_pid, 'claude was running a command');
  // a `sleep 600` the launcher failed to kill does not outlive the test
  t.after(() => {
    if (alive(call!.tool_pid!)) process.kill(call!.tool_pid!, 'SIGKILL');
  });
  await gone(call!.pid, 'claude');
  await gone(call!.tool_pid, 'the command claude was running');
});

// An answer longer than an event line may be failed the job with "an event line longer than
// 16777216 bytes ... a result that large cannot be reported": no word of where the answer is,
// and the turn's usage and cost were lost with the line.
test('claude-code executor: an answer over the 16 MiB event line fails the job saying the limit and where the answer is; its accounting is kept', async (t) => {
  const { client, px } = await setup(t, {}, {}, undefined, { coordinator: { outputMaxBytes: 256 * 1024 } });
  const job = await client.createJob({ type: 'start_session', session_name: 'huge-result', prompt: 'HUGE_RESULT' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error_code, 'executor_event_too_large');
  assert.match(done.error ?? '', /over the 16 MiB an executor event may carry/);
  assert.ok(done.error!.includes(`GET /jobs/${job.job_id}/output`), done.error!);
  assert.ok(done.error!.includes(`agentq output ${job.job_id}`), done.error!);
  // how much of the answer's output the coordinator keeps: the figure it gave, not "1 MiB by default"
  assert.ok(done.error!.includes("(the coordinator keeps the newest 262144 bytes of a job's output (JOB_OUTPUT_MAX_BYTES));"), done.error!);
  const [failed] = px.bodies(`/launcher/jobs/${job.job_id}/failed`) as FailedReport[];
  assert.deepEqual(failed!.usage, FAKE_USAGE);
  assert.equal(failed!.cost_usd, 0.0123);
  assert.ok(failed!.executor_session_id, 'the session can be resumed');
});

test('claude-code executor: an answer over the 16 MiB event line, from a coordinator that does not say how much output it keeps: the error names the setting and its default', async (t) => {
  const { client } = await setup(t, {}, {}, undefined, { answer: olderThanOutputWindow });
  const job = await client.createJob({ type: 'start_session', session_name: 'huge-result-older', prompt: 'HUGE_RESULT' });
  const done = await settled(client, job.job_id);
  assert.equal(done.error_code, 'executor_event_too_large');
  assert.ok(done.error!.includes("(the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES of a job's output, 1 MiB by default);"), done.error!);
});
