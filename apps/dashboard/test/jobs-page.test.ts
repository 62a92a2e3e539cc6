import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from '@agentq/protocol';
import { parseDuration, parseLabels, span } from '../web/lib/format.js';
import { applyJob, filterFromQuery, filterToApi, isFresher, mergeJob, type JobFilter, type JobPage } from '../web/lib/jobs.js';

// The page logic of the jobs list, without a browser: which live event changes which row.

let seq = 0;
function job(over: Partial<Job> = {}): Job {
  seq++;
  const at = new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString();
  return {
    job_id: `job_${seq.toString(16).padStart(12, '0')}`,
    type: 'start_session',
    session_name: `s${seq}`,
    agent_name: null,
    prompt: 'p',
    project_dir: null,
    parent_session_name: null,
    status: 'pending',
    launcher_id: null,
    error: null,
    created_at: at,
    claimed_at: null,
    started_at: null,
    completed_at: null,
    terminal: false,
    result: null,
    updated_at: at,
    timeout_ms: null,
    stop_requested_at: null,
    stop_reason: null,
    executor_session_id: null,
    callback_of: null,
    attempts: 0,
    lost_claims: 0,
    output_bytes: 0,
    requires: null,
    pending_reason: null,
    error_code: null,
    created_by: null,
    stopped_by: null,
    message_ids: null,
    usage: null,
    cost_usd: null,
    num_turns: null,
    duration_api_ms: null,
    max_cost_usd: null,
    ...over,
  };
}
const later = (j: Job, over: Partial<Job>): Job => ({ ...j, updated_at: new Date(Date.parse(j.updated_at) + 500).toISOString(), ...over });
const any: JobFilter = { status: '', session: '', launcher: '' };
const page = (rows: Job[], o: Partial<JobPage> = {}): JobPage => ({ rows, next: null, first: true, shifted: false, ...o });
const ids = (p: JobPage) => p.rows.map((r) => r.job_id);

test('a new job goes on top of the first page, which keeps its size and marks its cursor stale', () => {
  const [a, b, c] = [job(), job(), job()];
  const p = applyJob(page([b, a], { next: 'cursor-1' }), c, false, any, 2);
  assert.deepEqual(ids(p), [c.job_id, b.job_id]);
  assert.equal(p.shifted, true);
});

test('a later page takes no new job, only updates of its rows', () => {
  const [a, b, c] = [job(), job(), job()];
  const p0 = page([b, a], { first: false, next: 'x' });
  assert.equal(applyJob(p0, c, false, any, 50), p0);
  const p1 = applyJob(p0, later(a, { status: 'claimed' }), false, any, 50);
  assert.equal(p1.rows[1]!.status, 'claimed');
});

test('a later page that a job comes into keeps its size and marks its cursor stale', () => {
  const [a, b, c, d] = [job(), job(), job({ status: 'running' }), job()];
  const finished: JobFilter = { ...any, status: 'finished' };
  const done = (j: Job) => later(j, { status: 'completed', terminal: true });
  const p = applyJob(page([done(d), done(b), done(a)], { first: false, next: 'x' }), done(c), false, finished, 3);
  assert.deepEqual(ids(p), [d.job_id, c.job_id, b.job_id]);
  assert.equal(p.shifted, true, 'the cursor points past the row pushed off');
});

test('the last page takes a job that now matches, however old', () => {
  const [a, b, c] = [job({ status: 'running' }), job(), job()];
  const finished: JobFilter = { ...any, status: 'finished' };
  const done = (j: Job) => later(j, { status: 'completed', terminal: true });
  const last = page([done(c), done(b)], { first: false, next: null });
  assert.deepEqual(ids(applyJob(last, done(a), false, finished, 50)), [c.job_id, b.job_id, a.job_id]);
  assert.equal(applyJob({ ...last, next: 'x' }, done(a), false, finished, 50).rows.length, 2, 'a page with more after it leaves it to them');
});

test('a row that stops matching the filter leaves; one that starts matching within the page range comes in', () => {
  const [a, b, c] = [job(), job(), job()];
  const pending: JobFilter = { ...any, status: 'pending' };
  const p = applyJob(page([c, b, a], { next: 'x' }), later(b, { status: 'claimed' }), false, pending, 50);
  assert.deepEqual(ids(p), [c.job_id, a.job_id]);
  const running: JobFilter = { ...any, status: 'running' };
  const back = applyJob(page([c, a], { first: false, next: 'x' }), later(b, { status: 'running' }), false, running, 50);
  assert.deepEqual(ids(back), [c.job_id, b.job_id, a.job_id]);
});

test('an older snapshot never moves a job backwards, and a terminal job never becomes active again', () => {
  const a = job();
  const done = later(a, { status: 'completed', terminal: true });
  const p = page([done]);
  assert.equal(applyJob(p, a, false, any, 50), p);
  assert.equal(isFresher(later(done, { status: 'running', terminal: false }), done), false);
});

test('an evicted job leaves the page', () => {
  const [a, b] = [job(), job()];
  assert.deepEqual(ids(applyJob(page([b, a]), a, true, any, 50)), [b.job_id]);
});

test('an event without a prompt keeps the prompt read from the API', () => {
  const a = job({ prompt: 'the real prompt' });
  assert.equal(mergeJob(a, later(a, { prompt: '', status: 'claimed' })).prompt, 'the real prompt');
});

test('an answer older than an event the page has still gives the job its prompt', () => {
  const a = job({ prompt: 'the real prompt' });
  const event = later(a, { prompt: '', status: 'claimed' });
  const merged = mergeJob(event, a);
  assert.equal(merged.status, 'claimed', 'the newer status stays');
  assert.equal(merged.prompt, 'the real prompt');
});

test('a version of another job is never merged into a job, whichever is newer', () => {
  const older = job({ prompt: '' });
  const newer = later(job({ prompt: 'prompt of the newer' }), { status: 'running' });
  assert.equal(mergeJob(newer, older), older);
  const newest = later(job({ prompt: '' }), { status: 'claimed' });
  assert.equal(mergeJob(newer, newest), newest);
});

test('filters map to the API query: active is terminal=false, a status is status=', () => {
  assert.deepEqual(filterToApi(filterFromQuery(new URLSearchParams('status=active&session=x'))), {
    status: undefined,
    terminal: 'false',
    session_name: 'x',
    launcher_id: undefined,
  });
  assert.equal(filterToApi(filterFromQuery(new URLSearchParams('status=timed_out'))).status, 'timed_out');
  assert.equal(filterFromQuery(new URLSearchParams('status=bogus')).status, '');
});

test('the start form reads durations and labels as the CLI does', () => {
  assert.equal(parseDuration('1h30m'), 5_400_000);
  assert.equal(parseDuration('500ms'), 500);
  assert.equal(parseDuration('2500'), 2500);
  assert.equal(parseDuration('5 minutes'), null);
  assert.deepEqual(parseLabels('os=linux, gpu=a100'), { os: 'linux', gpu: 'a100' });
  assert.equal(parseLabels('  '), null);
  assert.throws(() => parseLabels('gpu'), /"gpu" is not key=value/);
  assert.equal(span(3_723_000), '1 h 2 min');
});
