import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { Job } from '@agentq/protocol';
import { AgentqApiError } from '@agentq/client';
import { Poller } from '../src/poller.js';
import { conform, MAX_ERROR_BYTES, NO_ERROR_MESSAGE } from '../src/report-bounds.js';
import type { Registration } from '../src/registration.js';
import type { Connectivity } from '../src/connectivity.js';
import { Supervisor } from '../src/supervisor.js';
import type { JobRunner } from '../src/job-runner.js';
import type { Reporter } from '../src/reporter.js';
import { SyncChannel } from '../src/sync-channel.js';
import { ManualClock } from '@agentq/coordinator';
import { captureLog, COORDINATOR_OPTIONS, controlServer, coordinator, gone, launcher, script, settled, testLog } from './helpers.js';
import { proxy } from './proxy.js';

/*
 * A report the coordinator refuses is not sent again (it would be refused again): the launcher
 * must not send reports it would refuse, and must not let one refusal leave a job `running`.
 */

test('what an executor says outside the report schema is left out or replaced: its jobs still end', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const [empty, long, huge] = await client.createJobs([
    // an error event with an empty message, then exit 0
    { type: 'start_session', session_name: 'empty-error', prompt: script([{ event: { type: 'error', message: '' } }]) },
    // a session id over 500 characters
    {
      type: 'start_session',
      session_name: 'long-id',
      prompt: script([{ event: { type: 'session', session_id: 'x'.repeat(600) } }, { event: { type: 'result', text: 'done' } }]),
    },
    // turn counts and durations past the schema's bounds
    {
      type: 'start_session',
      session_name: 'huge-numbers',
      prompt: script([{ event: { type: 'result', text: 'done', num_turns: 1e12, duration_api_ms: 1e15 } }]),
    },
  ]);
  const e = await settled(client, empty!.job_id);
  assert.equal(e.status, 'failed');
  assert.equal(e.error, NO_ERROR_MESSAGE);
  const l = await settled(client, long!.job_id);
  assert.equal(l.status, 'completed');
  assert.equal(l.result, 'done');
  assert.equal((await settled(client, huge!.job_id)).status, 'completed');
});

test("an executor's usage with more members than the four counts (more than a body's object may have) keeps the counts: the job completes", async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const extra = Object.fromEntries(Array.from({ length: 70 }, (_, i) => [`model_${i}_tokens`, i]));
  const usage = { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 0, cache_creation_input_tokens: 0, ...extra };
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'wide-usage',
    prompt: script([{ event: { type: 'result', text: 'done', usage } }]),
  });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'completed', `${ended.error_code}: ${ended.error}`);
  assert.equal(ended.result, 'done');
  assert.deepEqual(ended.usage, { input_tokens: 10, output_tokens: 20, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 });
});

test('a final report refused for its size ends the job failed, saying so and where the output is, instead of leaving it running', async (t) => {
  // a proxy in front of the coordinator with a smaller body limit than the coordinator's (which
  // the launcher cuts results to: large-results.test.ts) refuses the completed report
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url, (req) =>
    req.method === 'POST' && /^\/launcher\/jobs\/[^/]+\/completed$/.test(req.url ?? '')
      ? { status: 413, code: 'payload_too_large', message: 'body: is larger than the proxy accepts' }
      : false,
  );
  await launcher(t, px.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'huge-result',
    prompt: script([
      { event: { type: 'session', session_id: 'exec-session-1' } },
      { bigResult: 3_000_000, extra: { cost_usd: 2.5, num_turns: 7 } },
    ]),
  });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code, 'report_refused');
  assert.match(ended.error ?? '', /completed report \(payload_too_large\): body: is larger than the proxy accepts; its result \(3000000 bytes\) could not be kept/);
  assert.ok(ended.error!.endsWith(`GET /jobs/${job.job_id}/output (\`agentq output ${job.job_id}\`)`), ended.error!);
  // what the refused report knew besides the result still arrives: the session can be resumed,
  // and the tree's budget counts the cost
  assert.equal((await client.getSession('huge-result')).executor_session_id, 'exec-session-1');
  assert.equal(ended.cost_usd, 2.5);
  assert.equal(ended.num_turns, 7);
});

test('a coordinator older than max_report_bytes does not say its limit: a result over it is sent whole and refused, and the job fails as before', async (t) => {
  // a body limit of 1 MiB (the least there is): a 3 MB result does not fit in a completed report
  const { c, client } = await coordinator(t, { maxPromptBytes: 64 * 1024, outputMaxBytes: 64 * 1024 });
  const px = await proxy(
    t,
    c.url,
    () => false,
    (req) =>
      req.url === '/launcher/register'
        ? (body) => {
            const { max_report_bytes: _limit, ...older } = body as Record<string, unknown>;
            return older;
          }
        : undefined,
  );
  await launcher(t, px.url);
  const job = await client.createJob({ type: 'start_session', session_name: 'older', prompt: script([{ bigResult: 3_000_000 }]) });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code, 'report_refused');
  assert.match(ended.error ?? '', /completed report \(payload_too_large\).*; its result \(3000000 bytes\) could not be kept/s);
  // the launcher did not cut it: the report it sent carried the result whole
  const sent = px.bodies(`/launcher/jobs/${job.job_id}/completed`) as Array<{ result?: string }>;
  assert.deepEqual(sent.map((b) => b.result?.length), [3_000_000]);
});

test('an executor error larger than the coordinator takes in a body is cut to fit: the job fails with (the head of) its error, not report_refused', async (t) => {
  // a body limit of 1 MiB (the least there is): a 3 MB error does not fit in a failed report
  const { c, client } = await coordinator(t, { maxPromptBytes: 64 * 1024, outputMaxBytes: 64 * 1024 });
  await launcher(t, c.url);
  // 4-byte characters (two UTF-16 units each): the cut must not split one
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'huge-error',
    prompt: script([{ event: { type: 'session', session_id: 'exec-session-2' } }, { bigError: 750_000, char: '😀' }]),
  });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code ?? null, null);
  const error = ended.error ?? '';
  assert.ok(Buffer.byteLength(error) <= MAX_ERROR_BYTES, `${Buffer.byteLength(error)} bytes`);
  assert.ok(error.startsWith('😀'.repeat(10_000)), error.slice(0, 300));
  assert.ok(!error.includes('\uFFFD'), 'no character split by the cut');
  const note = /\n… \[(\d+) of the error's 3000000 bytes left out: a report carries at most 65536; the launcher's log has it whole/.exec(error);
  assert.ok(note, error.slice(-300));
  assert.equal(Buffer.byteLength(error.slice(0, note.index)) + Number(note[1]), 3_000_000);
  assert.equal((await client.getSession('huge-error')).executor_session_id, 'exec-session-2');
});

test("an executor error cut to fit keeps what the launcher adds after it: the executor's exit code", async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'huge-error-exit',
    prompt: script([{ bigError: 2 * MAX_ERROR_BYTES }, { exit: 3 }]),
  });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  const error = ended.error ?? '';
  assert.ok(Buffer.byteLength(error) <= MAX_ERROR_BYTES, `${Buffer.byteLength(error)} bytes`);
  assert.ok(error.endsWith(' (exit code 3)'), error.slice(-300));
  const note = /\n… \[(\d+) of the error's (\d+) bytes left out: a report carries at most 65536; the launcher's log has it whole \("executor reported an error"\)\] \(exit code 3\)$/.exec(error);
  assert.ok(note, error.slice(-300));
  // the head, what was left out and the exit code make the whole error
  assert.equal(Number(note[2]), 2 * MAX_ERROR_BYTES + Buffer.byteLength(' (exit code 3)'));
  assert.equal(Buffer.byteLength(error.slice(0, note.index)) + Number(note[1]) + Buffer.byteLength(' (exit code 3)'), Number(note[2]));
  assert.match(error, /^e+\n… \[/);
});

test('a stopped report\'s error is bounded as a failed one\'s is', () => {
  const { report, errorBytesCut } = conform({ kind: 'stopped', body: { signal: 'SIGTERM', error: 'x'.repeat(2 * MAX_ERROR_BYTES) } });
  assert.ok(errorBytesCut > MAX_ERROR_BYTES);
  assert.equal(report.kind, 'stopped');
  const error = (report.body as { error: string }).error;
  assert.ok(Buffer.byteLength(error) <= MAX_ERROR_BYTES);
  assert.match(error, /^x+\n… \[\d+ of the error's 131072 bytes left out/);
});

test('NUL characters in what a report carries (a stderr tail, say) arrive as U+FFFD: PostgreSQL refuses them', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(t, c.url);
  const job = await client.createJob({ type: 'start_session', session_name: 'nul', prompt: script([{ say: 'out\u0000put' }, { stderr: 'boom\u0000binary' }, { exit: 3 }]) });
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  assert.match(ended.error ?? '', /boom\uFFFDbinary/);
  assert.equal((await client.getOutput(job.job_id, { offset: 0 })).output, 'out\uFFFDput\n');
});

test('a sync refused as a whole (400) sends each of its reports again on its own: one bad report fails alone', async (t) => {
  const { client } = await coordinator(t);
  const reg = await client.register({ hostname: 'channel-test' });
  const [a, b] = await client.createJobs([
    { type: 'start_session', session_name: 'good', prompt: 'p' },
    { type: 'start_session', session_name: 'bad', prompt: 'p' },
  ]);
  const claimed = await client.poll(reg.launcher_id, { capacity: 2, batch: true, holdSeconds: 1 });
  assert.equal(claimed?.jobs?.length, 2);
  const channel = new SyncChannel({ client });
  const signal = new AbortController().signal;
  // queued in the same tick: one request, whose body the coordinator refuses for the second report
  const good = channel.deliver(a!.job_id, { kind: 'started', body: {} }, reg.launcher_id, signal);
  const bad = channel.deliver(b!.job_id, { kind: 'completed', body: { status: 'success', num_turns: 1e12 } }, reg.launcher_id, signal);
  await good;
  await assert.rejects(bad, (err: unknown) => err instanceof AgentqApiError && err.status === 400);
  assert.equal((await client.getJob(a!.job_id)).status, 'running');
});

test('a job the coordinator ended while it could not hear the launcher (stale) has its executor stopped at the next refused report', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await coordinator(t, { sweepIntervalMs: 600_000 }, { clock });
  const control = await controlServer(t);
  const { log, waitFor } = captureLog();
  let cut = false;
  let pollRefused!: () => void;
  const refused = new Promise<void>((resolve) => (pollRefused = resolve));
  const px = await proxy(t, c.url, (req) => {
    if (!cut) return false;
    // a sync is offered again as the requests it stands for: its poll among them (if it polls)
    if (req.url === '/launcher/sync') return false;
    if (req.url?.startsWith('/launcher/jobs?')) pollRefused();
    return true;
  });
  await launcher(t, px.url, {}, { log });
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'orphan',
    prompt: script([{ hello: true }, { await: true }, { say: 'still working' }, { await: true }], control),
  });
  const hello = await control.next();
  assert.equal((await client.waitJob(job.job_id, 0)).status, 'running');
  // the network between them fails: once its last poll has left the coordinator, and longer
  // than the heartbeat timeout by the coordinator's clock, the launcher is stale and the job ends
  // interrupted, while its executor still runs
  cut = true;
  await refused; // polls go one after another: the one before has ended
  while (c.core.parkedPolls > 0) await once(c.core.waiters, 'unparked');
  clock.advance(COORDINATOR_OPTIONS.heartbeatTimeoutSeconds * 1000 + 1);
  await c.core.sweep();
  assert.equal((await client.getJob(job.job_id)).status, 'interrupted');
  cut = false;
  // the agent prints more: that report is refused (the job is not the launcher's any more), and
  // the executor is stopped rather than left to work on, with no final report (it would be
  // refused too, or end a new run of the job had this launcher been handed it again)
  const ending = waitFor((l) => l['job_id'] === job.job_id && (l['msg'] === 'job disowned; no final report' || /^job (failed|stopped|completed)$/.test(String(l['msg']))));
  hello.release();
  await gone(hello.pid, 'the executor of a job the coordinator ended');
  assert.equal((await ending)['msg'], 'job disowned; no final report');
});

test('jobs handed out by a poll answered after the shutdown began are not started', () => {
  const accepted: string[] = [];
  const supervisor = { onChange: () => () => {}, accept: (job: Job) => accepted.push(job.job_id), stop: () => {}, freeSlots: 1 };
  const poller = new Poller({
    client: {} as never,
    registration: {} as Registration,
    supervisor: supervisor as unknown as Supervisor,
    connectivity: {} as Connectivity,
    log: testLog(),
    channel: {} as SyncChannel,
    exit: new AbortController().signal,
  });
  const job = (id: string) => ({ job_id: id }) as Job;
  poller.answered({ jobs: [job('before')] });
  poller.drain();
  poller.answered({ jobs: [job('after')] });
  assert.deepEqual(accepted, ['before']);
});

test('a job handed out again while the runner of its earlier claim is still here is run once that runner ends', { timeout: 10_000 }, async () => {
  const runs: string[] = [];
  let endFirst!: () => void;
  const supervisor = new Supervisor({
    maxJobs: 2,
    reporter: {} as Reporter,
    log: testLog(),
    runJob: (job) => {
      runs.push(job.job_id);
      // the first runner waits (for its `started`, which will be refused); the second just runs
      const done = runs.length === 1 ? new Promise<void>((resolve) => (endFirst = resolve)) : Promise.resolve();
      return { job, done } as unknown as JobRunner;
    },
  });
  const job = { job_id: 'job_again' } as Job;
  supervisor.accept(job);
  supervisor.accept(job); // the requeued claim, taken again in the answer that refuses the first `started`
  assert.deepEqual(runs, ['job_again'], 'not two runs at once');
  endFirst();
  await new Promise<void>((resolve) => supervisor.onChange(() => runs.length === 2 && resolve()));
  assert.deepEqual(runs, ['job_again', 'job_again'], 'the new claim runs');
});

test('a `started` refused for its body (400) ends the job failed, report_refused, instead of leaving it claimed to be handed out and refused again after each claim lease', async (t) => {
  const { c, client } = await coordinator(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'started-refused', prompt: script([{ event: { type: 'result', text: 'never' } }]) });
  // a proxy (or a coordinator of another version) that refuses every `started` of this job
  const px = await proxy(t, c.url, (req) =>
    req.url === `/launcher/jobs/${job.job_id}/started` ? { status: 400, code: 'validation_failed', message: 'body/working_dir: refused (test)' } : false,
  );
  const { log, lines, waitFor } = captureLog();
  await launcher(t, px.url, {}, { log });
  // the job is taken by a poll, and its `started` goes on the next one, which is refused as a whole
  const decided = await waitFor(
    (l) => l['job_id'] === job.job_id && /^the coordinator (did not accept|refused) `started`/.test(String(l['msg'])),
  );
  assert.equal(decided['msg'], 'the coordinator refused `started` for its body; reporting the job failed instead of running it');
  const ended = await settled(client, job.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code, 'report_refused');
  assert.equal(ended.error, "the coordinator refused the job's started report (validation_failed): body/working_dir: refused (test). The job was not run");
  assert.equal(ended.attempts, 1, 'claimed once: not handed out again');
  assert.equal(px.count((url) => url === `/launcher/jobs/${job.job_id}/started`), 1, '`started` sent once');
  // the poll that carried it is logged as refused with that report, not as a poll refused for itself
  const poll = lines.find((l) => l['job_id'] === job.job_id && String(l['msg']).startsWith('poll refused with the report it carried'));
  assert.ok(poll, JSON.stringify(lines.filter((l) => (l['level'] as number) >= 40)));
  assert.deepEqual([poll['level'], poll['status'], poll['code'], poll['reports']], [40, 400, 'validation_failed', ['started']]);
  assert.equal(lines.some((l) => l['msg'] === 'poll refused; retrying with backoff'), false);
  // and the launcher goes on taking jobs
  const next = await client.createJob({ type: 'start_session', session_name: 'after-refusal', prompt: script([{ event: { type: 'result', text: 'ok' } }]) });
  assert.equal((await settled(client, next.job_id)).status, 'completed');
});

test('a `started` refused with a code this launcher does not know (a newer coordinator\'s: a sync result says status 400 for it) is not taken for a body refused: the job is not run here, and not failed', async (t) => {
  const { c, client } = await coordinator(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'started-unknown-code', prompt: script([{ event: { type: 'result', text: 'never' } }]) });
  // the coordinator's answer to the sync that carries the job's `started`, as one newer than this
  // launcher may give it: refused with a code of its own (resultError reads it as 400)
  const px = await proxy(
    t,
    c.url,
    () => false,
    (req) =>
      req.url !== '/launcher/sync'
        ? undefined
        : (body) => {
            const answer = body as { results?: Array<{ job_id: string; kind: string; ok: boolean }> };
            answer.results = answer.results?.map((r) =>
              r.job_id === job.job_id && r.kind === 'started'
                ? { ...r, ok: false, error: { code: 'claim_superseded', message: 'this claim is no longer the job\'s (test)' } }
                : r,
            );
            return answer;
          },
  );
  const { log, waitFor } = captureLog();
  await launcher(t, px.url, {}, { log });
  const decided = await waitFor(
    (l) => l['job_id'] === job.job_id && /^the coordinator (did not accept|refused) `started`/.test(String(l['msg'])),
  );
  assert.equal(decided['msg'], 'the coordinator did not accept `started`; the job is not run here');
  assert.equal(decided['code'], 'claim_superseded');
  assert.equal(px.count((url) => url === `/launcher/jobs/${job.job_id}/failed`), 0, 'no `failed` report for it');
});
