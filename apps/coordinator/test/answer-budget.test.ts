import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { AnswersInFlight, fitting } from '../src/core/answer-budget.js';
import { called, fakeLauncher, rejectsWith, start, startTest } from './helpers.js';
import { metricValue } from './limits-helpers.js';

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
  assert.deepEqual(fitting([], 10, size), { count: 0, size: 0 });
  assert.deepEqual(fitting([50], 10, size), { count: 1, size: 50 });
  assert.deepEqual(fitting([4, 6, 1], 10, size), { count: 2, size: 10 });
  assert.deepEqual(fitting([4, 6], 10, size), { count: 2, size: 10 });
  assert.deepEqual(fitting([11, 1], 10, size), { count: 1, size: 11 });
  // and at most `max` rows, asking the size of those only
  const asked: number[] = [];
  assert.deepEqual(fitting([1, 1, 1], 10, (n, i) => (asked.push(i), n), 2), { count: 2, size: 2 });
  assert.deepEqual(asked, [0, 1]);
});

test('AnswersInFlight: an answer gets what the others in flight leave of the total, until it is released', () => {
  const answers = new AnswersInFlight(10, 25);
  const size = (n: number) => n;
  const releases: (() => void)[] = [];
  const hold = (release: () => void) => void releases.push(release);
  // MAX_ANSWER_BYTES first: 10 of 25
  assert.equal(answers.take([4, 4, 4, 4], size, hold), 2);
  assert.equal(answers.held, 8);
  assert.equal(answers.take([9, 9], size, hold), 1);
  assert.equal(answers.held, 17);
  // 8 left: the rows that fit in it
  assert.equal(answers.take([3, 3, 3], size, hold), 2);
  assert.equal(answers.held, 23);
  // 2 left: a first row of 5 does not fit while others hold the rest, and nothing is held for it
  assert.equal(answers.take([5], size, hold), null);
  assert.equal(answers.refused, 1);
  assert.equal(answers.held, 23);
  assert.equal(releases.length, 3);
  // nothing to send holds nothing
  assert.equal(answers.take([], size, hold), 0);
  assert.equal(releases.length, 3);
  // released (once, however often it is called), the room comes back
  releases[1]!();
  releases[1]!();
  assert.equal(answers.held, 14);
  assert.equal(answers.room(hold).take([5, 5, 5], size), 2);
  for (const release of releases) release();
  assert.equal(answers.held, 0);
  // with nothing else in flight the first row always fits, even past both limits
  assert.equal(answers.take([40, 1], size, hold), 1);
  assert.equal(answers.held, 40);
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

test('a list answer holds its room until its response is written: one after another, each gets the whole page', async (t) => {
  // room in flight for one and a half pages: a page that was never released would halve the next
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, maxAnswerBytesInFlight: 30_000 });
  for (const n of ['a', 'b', 'c', 'd']) await start(client, n, 'x'.repeat(5_000));
  for (let i = 0; i < 5; i++) {
    const page = await client.listJobs({ limit: 100 });
    assert.equal(page.jobs.length, 4, `read ${i}`);
    assert.equal(page.next_cursor, null);
    const sessions = await client.listSessions({ limit: 100 });
    assert.equal(sessions.sessions.length, 4);
  }
  assert.equal(c.core.answers.held, 0);
});

test('MAX_ANSWER_BYTES_IN_FLIGHT: a reader that does not read holds its answer; others get smaller pages, then 503, then all again once it is gone', async (t) => {
  // 10 prompts of two million characters: an answer with all of them is 20 MB, one with five
  // 10 MB, more than a connection's socket buffers take in: it stays in the coordinator until read
  const PROMPT = 2_000_000;
  const { c, client } = await startTest(t, {
    maxPromptBytes: PROMPT,
    maxAnswerBytes: 32 * 1024 * 1024,
    maxAnswerBytesInFlight: 31_000_000,
  });
  const jobs = [];
  for (let i = 0; i < 10; i++) jobs.push(await start(client, `big-${i}`, 'x'.repeat(PROMPT)));
  const { port } = new URL(c.url);
  /** a GET that is sent and never read: resolves once its answer is built */
  const unread = async (path: string) => {
    const built = called(c.core.answers, 'take');
    const socket = connect(Number(port), '127.0.0.1');
    t.after(() => socket.destroy());
    socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`);
    socket.pause();
    await built;
    return socket;
  };

  const first = await unread('/jobs?limit=100');
  assert.equal(c.core.answers.held, 10 * PROMPT);
  // 11 million characters left: five prompts, and the cursor goes on from there
  const page = await client.listJobs({ limit: 100 });
  assert.deepEqual(page.jobs.map((j) => j.session_name), ['big-9', 'big-8', 'big-7', 'big-6', 'big-5']);
  assert.notEqual(page.next_cursor, null);

  // a second reader that does not read takes those five: a million left, less than one prompt
  const second = await unread('/jobs?limit=100');
  assert.equal(c.core.answers.held, 15 * PROMPT);
  const once = new AgentqClient({ url: c.url, overloadRetries: 0 });
  t.after(() => once.close());
  // a page is 503 overloaded with a Retry-After
  const refused = await rejectsWith(once.listJobs({ limit: 100 }), 503, 'overloaded');
  assert.equal(refused.reason, 'answers_in_flight');
  // a wait answer names every job in omitted, to be read one by one
  const ids = jobs.slice(0, 2).map((j) => j.job_id);
  const waited = await once.waitJobs({ job_ids: ids, timeout_ms: 0, include_terminal: true });
  assert.deepEqual(waited.jobs, []);
  assert.deepEqual(waited.omitted, ids);
  assert.equal(await metricValue(c.url, 'agentq_requests_refused_total', { reason: 'answers_in_flight' }), 2);
  assert.equal(await metricValue(c.url, 'agentq_answer_bytes_in_flight'), 15 * PROMPT);
  assert.equal(await metricValue(c.url, 'agentq_max_answer_bytes_in_flight'), 31_000_000);
  // what carries little text still fits: sessions without results
  assert.equal((await once.listSessions({ limit: 100 })).sessions.length, 10);

  // the readers go away: their room comes back, and a reader told to retry (the client honours
  // Retry-After) gets the whole list
  first.destroy();
  second.destroy();
  const all = await client.listJobs({ limit: 100 });
  assert.equal(all.jobs.length, 10);
  assert.equal(all.next_cursor, null);
});
