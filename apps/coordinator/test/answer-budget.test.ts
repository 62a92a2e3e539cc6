import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import { fitting } from '../src/core/answer-budget.js';
import { fakeLauncher, start, startTest } from './helpers.js';

// Large answers are bounded (MAX_ANSWER_BYTES): a page of 1,000 jobs with 1 MiB prompts was a
// 1 GiB answer, built in one turn of the event loop (4 such requests held it for 4.6 s and took
// the coordinator from 95 MB to 2 GB). Pages end early; a wait answer names what did not fit.

const BUDGET = 64 * 1024;
const big = (tag: string) => `${tag}:${'x'.repeat(20_000 - tag.length - 1)}`; // 20,000 characters

/** Follow next_cursor to the end; each page's items. */
async function pagesOf<T>(page: (cursor: string | undefined) => Promise<{ items: T[]; next_cursor: string | null }>): Promise<T[][]> {
  const out: T[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const p = await page(cursor);
    out.push(p.items);
    if (p.next_cursor === null) return out;
    cursor = p.next_cursor;
  }
}

const jobPages = (client: AgentqClient) =>
  pagesOf(async (cursor) => {
    const p = await client.listJobs({ limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.jobs.map((j) => j.session_name), next_cursor: p.next_cursor };
  });

test('fitting: rows until the budget is passed, and always the first', () => {
  const size = (n: number) => n;
  assert.equal(fitting([], 10, size), 0);
  assert.equal(fitting([50], 10, size), 1);
  assert.equal(fitting([4, 6, 1], 10, size), 2);
  assert.equal(fitting([4, 6], 10, size), 2);
  assert.equal(fitting([11, 1], 10, size), 1);
  // and at most `max` rows, asking the size of those only
  const asked: number[] = [];
  assert.equal(fitting([1, 1, 1], 10, (n, i) => (asked.push(i), n), 2), 2);
  assert.deepEqual(asked, [0, 1]);
});

test('GET /jobs: a page ends once its prompts, results and errors pass MAX_ANSWER_BYTES; the cursor goes on from there', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
  for (const n of names) await start(client, n, big(n));
  await start(client, 'huge', 'h'.repeat(3 * BUDGET)); // over the budget alone: a page of its own
  await start(client, 'small', 'tiny');

  const pages = await jobPages(client);
  // newest first: huge does not fit after small, but is sent alone (a page's first row always
  // fits); then 20,000 characters each, three a page
  assert.deepEqual(pages, [['small'], ['huge'], ['g', 'f', 'e'], ['d', 'c', 'b'], ['a']]);
  // the limit still applies inside the budget
  const two = await client.listJobs({ limit: 1 });
  assert.deepEqual(two.jobs.map((j) => j.session_name), ['small']);
  assert.notEqual(two.next_cursor, null);
});

test('GET /jobs: results and errors count as well as prompts', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const launcher = await fakeLauncher(client);
  for (const n of ['a', 'b', 'c']) {
    const job = await start(client, n, 'p');
    await launcher.take();
    await launcher.started(job.job_id);
    if (n === 'b') await launcher.failed(job.job_id, big('error'));
    else await launcher.completed(job.job_id, `${big('result')}${big('more')}`); // 40,000
  }
  assert.deepEqual(await jobPages(client), [['c', 'b'], ['a']]);
});

test('GET /sessions: a page ends once the last results it carries pass MAX_ANSWER_BYTES', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const launcher = await fakeLauncher(client);
  for (const n of ['a', 'b', 'c', 'd']) {
    const job = await start(client, n, 'p');
    await launcher.take();
    await launcher.started(job.job_id);
    await launcher.completed(job.job_id, big(n));
  }
  const pages = await pagesOf(async (cursor) => {
    const p = await client.listSessions({ limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.sessions.map((s) => s.session_name), next_cursor: p.next_cursor };
  });
  assert.deepEqual(pages, [['d', 'c', 'b'], ['a']]);
});

test('POST /jobs/wait: snapshots past MAX_ANSWER_BYTES are named in omitted, the ended ones sent first; done counts them all', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const launcher = await fakeLauncher(client);
  const pending = await start(client, 'p', big('p'));
  const ended = [];
  for (const n of ['e1', 'e2', 'e3']) {
    const job = await start(client, n, big(n));
    ended.push(job);
  }
  // ended before they ran: stopped while pending
  for (const job of ended) await client.stopJob(job.job_id);
  const ids = [pending.job_id, ...ended.map((j) => j.job_id)];

  // three snapshots fit; the ended ones are sent, in request order, and the pending one named
  const all = await client.waitJobs({ job_ids: ids, mode: 'all', timeout_ms: 0 });
  assert.deepEqual(all.jobs.map((j) => j.session_name), ['e1', 'e2', 'e3']);
  assert.deepEqual(all.omitted, [pending.job_id]);
  assert.equal(all.done, false, 'the omitted job is pending: not all have ended');

  const any = await client.waitJobs({ job_ids: ids, mode: 'any', timeout_ms: 0, include_terminal: true });
  assert.equal(any.done, true);
  assert.deepEqual(any.omitted, [pending.job_id]);

  // once it ends, all is done, and the answer still names it
  const job = await launcher.take();
  assert.equal(job.job_id, pending.job_id);
  await launcher.started(job.job_id);
  await launcher.completed(job.job_id, 'ok');
  const after = await client.waitJobs({ job_ids: ids, mode: 'all', timeout_ms: 0 });
  assert.equal(after.done, true);
  assert.deepEqual(after.jobs.map((j) => j.session_name), ['p', 'e1', 'e2']);
  assert.deepEqual(after.omitted, [ended[2]!.job_id]);

  // small jobs: nothing omitted
  const small = await start(client, 'small', 'tiny');
  const one = await client.waitJobs({ job_ids: [small.job_id, 'job_unknown'], timeout_ms: 0 });
  assert.deepEqual(one.jobs.map((j) => j.job_id), [small.job_id]);
  assert.deepEqual(one.omitted, []);
  assert.deepEqual(one.not_found, ['job_unknown']);
});
