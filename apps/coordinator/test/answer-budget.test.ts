import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { AnswersInFlight, fitting } from '../src/core/answer-budget.js';
import type { ListJobsFilter, ListSessionsFilter, Store } from '../src/core/store/store.js';
import { called, fakeLauncher, rejectsWith, start, startTest, tempDir, watching } from './helpers.js';
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

const jobPages = (client: AgentqClient, status?: string) =>
  pagesOf(async (cursor) => {
    const p = await client.listJobs({ limit: 100, ...(status !== undefined ? { status } : {}), ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.jobs.map((j) => j.session_name), next_cursor: p.next_cursor };
  });

/** A fresh SQLite file for one test, removed after it. */
function sqliteUrl(t: TestContext): string {
  const dir = tempDir(t, 'agentq-answer-budget-');
  return `sqlite:${join(dir, 'agentq.db')}`;
}

/**
 * A store that reads rows from a file or a server: SQLite in the default run (the memory store
 * has every row in memory already), else the store under test (AGENTQ_TEST_STORE).
 */
const storeOnFile = (t: TestContext) => (process.env.AGENTQ_TEST_STORE ? {} : { databaseUrl: sqliteUrl(t) });

/** The ids of whole jobs read from `store` from now on (the store is the real one; only its getJob is watched). */
function wholeReads(t: TestContext, store: Store): string[] {
  const getJob = store.getJob.bind(store);
  const read: string[] = [];
  store.getJob = (id) => {
    read.push(id);
    return getJob(id);
  };
  t.after(() => (store.getJob = getJob));
  return read;
}

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
  assert.equal(answers.full, true);
  // a list asks before it reads: no room, counted as a refusal
  assert.equal(answers.noRoom(), true);
  assert.equal(answers.refused, 2);
  for (const release of releases) release();
  assert.equal(answers.noRoom(), false);
  assert.equal(answers.refused, 2);
  // with a little in flight, a first row over MAX_ANSWER_BYTES still fits in what is left of the total
  const roomy = new AnswersInFlight(10, 1000);
  assert.equal(roomy.take([1], size, hold), 1);
  assert.equal(roomy.full, false);
  assert.equal(roomy.take([40, 1], size, hold), 1);
  assert.equal(roomy.held, 41);
  assert.equal(roomy.refused, 0);
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

test('GET /jobs on a store read from a file or a server: the rows past the budget are not read', async (t) => {
  const onFile = storeOnFile(t);
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, ...onFile });
  for (const n of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) await start(client, n, big(n));
  const names = async (f: ListJobsFilter) => {
    const page = await c.core.store.listJobs(f);
    return { names: page.rows.map((j) => j.sessionName), cut: page.cut };
  };
  // three rows fit; the store says it left out the rest
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET }), { names: ['g', 'f', 'e'], cut: true });
  assert.deepEqual(await names({ limit: 8 }), { names: ['g', 'f', 'e', 'd', 'c', 'b', 'a'], cut: false }, 'without a budget, every row');
  assert.deepEqual(await names({ limit: 3, maxBytes: BUDGET }), { names: ['g', 'f', 'e'], cut: false }, 'the limit, not the budget');
  // the oldest page fits: nothing left out
  const b = (await c.core.store.listJobs({ limit: 8 })).rows.find((j) => j.sessionName === 'b')!;
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET, before: b.seq }), { names: ['a'], cut: false });
  // a first row over the budget: alone
  await start(client, 'huge', 'h'.repeat(3 * BUDGET));
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET }), { names: ['huge'], cut: true });
  // and the answers over HTTP page through all of them, as with every store
  assert.deepEqual(await jobPages(client), [['huge'], ['g', 'f', 'e'], ['d', 'c', 'b'], ['a']]);
});

test('GET /jobs with a status filter over live and ended jobs: a page cut by the budget loses no row', async (t) => {
  // on SQLite the live jobs come from memory and the ended ones from the file, merged
  const onFile = storeOnFile(t);
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, ...onFile });
  const launcher = await fakeLauncher(client);
  // z runs (live, the oldest); a to d complete (ended, 20,000 characters each)
  const z = await start(client, 'z', 'p');
  await launcher.take();
  await launcher.started(z.job_id);
  for (const n of ['a', 'b', 'c', 'd']) await start(client, n, big(n));
  for (let i = 0; i < 4; i++) {
    const job = await launcher.take();
    await launcher.started(job.job_id);
    await launcher.completed(job.job_id, 'ok');
  }
  const page = await c.core.store.listJobs({ limit: 8, maxBytes: BUDGET, statuses: new Set(['running', 'completed']) });
  // three fit; z, older than what was left out (a), is not next either
  assert.deepEqual(page.rows.map((j) => j.sessionName), ['d', 'c', 'b']);
  assert.equal(page.cut, true);
  assert.deepEqual(await jobPages(client, 'running,completed'), [['d', 'c', 'b'], ['a', 'z']]);
});

test('GET /jobs paged under a budget over mixed sizes, astral characters, live and ended jobs: every row once', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const launcher = await fakeLauncher(client);
  let seed = 7;
  const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  // UTF-16 units, UTF-8 bytes and characters all differ: emoji, accents, ASCII
  const text = (n: number) => Array.from({ length: n }, (_, i) => ['\u{1F600}', 'é', 'x'][i % 3]).join('');
  const all: string[] = [];
  for (let i = 0; i < 24; i++) {
    all.push((await start(client, `s${i}`, `${i}:${text(2_000 + random(14_000))}`)).job_id);
    if (random(3) === 0) continue;
    const job = await launcher.take();
    await launcher.started(job.job_id);
    await launcher.completed(job.job_id, text(random(12_000)));
  }
  for (const q of [{}, { status: 'pending,completed' }, { limit: 5 }, { status: 'pending,completed', limit: 3 }]) {
    const seen = (
      await pagesOf(async (cursor) => {
        const p = await client.listJobs({ ...q, ...(cursor !== undefined ? { cursor } : {}) });
        return { items: p.jobs.map((j) => j.job_id), next_cursor: p.next_cursor };
      })
    ).flat();
    assert.deepEqual(seen, [...all].reverse(), `every job once, newest first: ${JSON.stringify(q)}`);
  }
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

test('GET /sessions: the child outcomes and messages a session holds count as well as its last result', async (t) => {
  const { client } = await startTest(t, { maxAnswerBytes: BUDGET, ...storeOnFile(t) });
  const launcher = await fakeLauncher(client);
  for (const n of ['a', 'b', 'c', 'd']) {
    const own = await start(client, n, 'p');
    await launcher.take();
    await launcher.started(own.job_id);
    // busy: what comes for it waits on the session, whole
    if (n === 'a' || n === 'c') {
      const kid = await start(client, `${n}-kid`, 'p', { parent_session_name: n });
      await launcher.take();
      await launcher.completed(kid.job_id, big(n));
    } else {
      await client.sendMessage(n, { text: big(n) });
    }
  }
  // the busy ones: the parents, each holding 20,000 characters
  const pages = await pagesOf(async (cursor) => {
    const p = await client.listSessions({ limit: 100, status: 'busy', ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.sessions.map((s) => s.session_name), next_cursor: p.next_cursor };
  });
  assert.deepEqual(pages, [['d', 'c', 'b'], ['a']]);
});

test('GET /sessions on a store read from a file or a server: the rows past the budget are not read', async (t) => {
  const onFile = storeOnFile(t);
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, ...onFile });
  const launcher = await fakeLauncher(client);
  for (const n of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) {
    const job = await start(client, n, 'p');
    await launcher.take();
    await launcher.started(job.job_id);
    await launcher.completed(job.job_id, big(n));
  }
  const names = async (f: ListSessionsFilter) => {
    const page = await c.core.store.listSessions(f);
    return { names: page.rows.map((s) => s.name), cut: page.cut };
  };
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET }), { names: ['g', 'f', 'e'], cut: true });
  assert.deepEqual(await names({ limit: 8 }), { names: ['g', 'f', 'e', 'd', 'c', 'b', 'a'], cut: false }, 'without a budget, every row');
  assert.deepEqual(await names({ limit: 2, maxBytes: BUDGET }), { names: ['g', 'f'], cut: false }, 'the limit, not the budget');
  // a busy session between them: idle ones are counted without it
  await start(client, 'busy', 'p');
  await launcher.take();
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET, status: 'idle' }), { names: ['g', 'f', 'e'], cut: true });
  assert.deepEqual(await names({ limit: 8, maxBytes: BUDGET }), { names: ['busy', 'g', 'f', 'e'], cut: true });
  const pages = await pagesOf(async (cursor) => {
    const p = await client.listSessions({ limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.sessions.map((s) => s.session_name), next_cursor: p.next_cursor };
  });
  assert.deepEqual(pages, [['busy', 'g', 'f', 'e'], ['d', 'c', 'b'], ['a']]);
});

test('POST /jobs/wait reads statuses while it waits, and whole jobs only as far as they fit in its answer', async (t) => {
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET });
  const launcher = await fakeLauncher(client);
  const jobs = [];
  for (const n of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) jobs.push(await start(client, n, big(n)));
  const ids = jobs.map((j) => j.job_id);
  const read = wholeReads(t, c.core.store);
  // a wait for any of them to end, checked again on each end: the first ends after it parked
  const isWaiting = watching(c.core, ids[0]!);
  const waiting = client.waitJobs({ job_ids: ids, mode: 'any', timeout_ms: 60_000 });
  await isWaiting;
  const taken = await launcher.take();
  await launcher.started(taken.job_id);
  await launcher.completed(taken.job_id, 'ok');
  const answer = await waiting;
  assert.equal(answer.done, true);
  assert.deepEqual(answer.jobs.map((j) => j.session_name), ['a', 'b', 'c'], 'the ended one first, then request order');
  assert.deepEqual(answer.omitted, ids.slice(3));
  // only the three sent were read whole (once each), not the seven on every check
  assert.deepEqual(read.filter((id) => ids.includes(id)).sort(), ids.slice(0, 3).sort());
});

test('POST /jobs/wait on ended jobs read back from the SQLite file: sizes from the file, whole rows only for the answer', async (t) => {
  // hotJobs 0: no ended job is kept in memory, every one is read from the file
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, databaseUrl: sqliteUrl(t), hotJobs: 0 });
  const launcher = await fakeLauncher(client);
  const ids: string[] = [];
  for (const n of ['a', 'b', 'c', 'd', 'e']) {
    ids.push((await start(client, n, big(n))).job_id);
    const job = await launcher.take();
    await launcher.started(job.job_id);
    await launcher.completed(job.job_id, 'ok');
  }
  await c.core.sweep(); // the sweep trims the ended jobs out of memory
  const read = wholeReads(t, c.core.store);
  const answer = await client.waitJobs({ job_ids: [...ids, 'job_unknown'], mode: 'all', timeout_ms: 0 });
  assert.equal(answer.done, true);
  assert.deepEqual(answer.jobs.map((j) => j.session_name), ['a', 'b', 'c']);
  assert.deepEqual(answer.omitted, ids.slice(3));
  assert.deepEqual(answer.not_found, ['job_unknown']);
  assert.deepEqual(read.sort(), ids.slice(0, 3).sort());
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

test('MAX_ANSWER_BYTES_IN_FLIGHT: while answers hold most of it, pages get shorter, then a page is 503 and a wait omits every job', async (t) => {
  const PROMPT = 10_000;
  const { c, client } = await startTest(t, { maxAnswerBytes: 1024 * 1024, maxAnswerBytesInFlight: 105_000 });
  const jobs = [];
  for (let i = 0; i < 10; i++) jobs.push(await start(client, `j-${i}`, 'x'.repeat(PROMPT)));
  // answers in flight, as routes hold them until their responses close
  const releases: (() => void)[] = [];
  const inFlight = (release: () => void) => void releases.push(release);

  // one answer takes all ten (100,000 characters): 5,000 left
  assert.equal((await c.core.listJobs({ limit: 100 }, inFlight)).jobs.length, 10);
  releases.pop()!();
  // one takes six: 45,000 left, four prompts, and the cursor goes on
  assert.equal((await c.core.listJobs({ limit: 6 }, inFlight)).jobs.length, 6);
  const page = await client.listJobs({ limit: 100 });
  assert.deepEqual(page.jobs.map((j) => j.session_name), ['j-9', 'j-8', 'j-7', 'j-6']);
  assert.notEqual(page.next_cursor, null);
  // another takes four: 5,000 left, less than one prompt
  assert.equal((await c.core.listJobs({ limit: 4 }, inFlight)).jobs.length, 4);
  assert.equal(c.core.answers.held, 10 * PROMPT);
  const once = new AgentqClient({ url: c.url, overloadRetries: 0 });
  t.after(() => once.close());
  const res = await request(`${c.url}/jobs?limit=100`);
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers['retry-after'], '1');
  const refused = await rejectsWith(once.listJobs({ limit: 100 }), 503, 'overloaded');
  assert.equal(refused.reason, 'answers_in_flight');
  const ids = jobs.slice(0, 2).map((j) => j.job_id);
  const waited = await once.waitJobs({ job_ids: ids, timeout_ms: 0, include_terminal: true });
  assert.deepEqual(waited.jobs, []);
  assert.deepEqual(waited.omitted, ids);
  // what carries little text still fits: sessions without results
  assert.equal((await once.listSessions({ limit: 100 })).sessions.length, 10);
  assert.equal(await metricValue(c.url, 'agentq_requests_refused_total', { reason: 'answers_in_flight' }), 3);
  assert.equal(await metricValue(c.url, 'agentq_answer_bytes_in_flight'), 10 * PROMPT);
  assert.equal(await metricValue(c.url, 'agentq_max_answer_bytes_in_flight'), 105_000);

  // those answers go out: the room comes back
  for (const release of releases) release();
  assert.equal(c.core.answers.held, 0);
  const all = await client.listJobs({ limit: 100 });
  assert.equal(all.jobs.length, 10);
  assert.equal(all.next_cursor, null);
});

test('MAX_ANSWER_BYTES_IN_FLIGHT over HTTP: a reader that does not read holds its answer until its connection goes; a client told to retry then gets the page', async (t) => {
  // 10 prompts of two million characters: the answer is 20 MB, several times what a connection's
  // socket buffers take in (4 MiB at most by Linux's defaults): it stays in the coordinator
  const PROMPT = 2_000_000;
  const { c, client } = await startTest(t, {
    maxPromptBytes: PROMPT,
    maxAnswerBytes: 32 * 1024 * 1024,
    maxAnswerBytesInFlight: 21_000_000,
  });
  for (let i = 0; i < 10; i++) await start(client, `big-${i}`, 'x'.repeat(PROMPT));
  const built = called(c.core.answers, 'take');
  const unread = connect(c.port, '127.0.0.1');
  t.after(() => unread.destroy());
  unread.write('GET /jobs?limit=100 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  unread.pause();
  await built;
  assert.equal(c.core.answers.held, 10 * PROMPT);
  // a million characters left, less than one prompt: the client is told to come back in 1 s, and
  // by then the reader has gone
  const refusedOnce = new Promise<void>((resolve) => {
    const original = c.core.answers.take.bind(c.core.answers);
    c.core.answers.take = ((...args: Parameters<typeof original>) => {
      const n = original(...args);
      if (n === null) {
        c.core.answers.take = original;
        resolve();
      }
      return n;
    }) as typeof original;
  });
  const page = client.listJobs({ limit: 100 });
  await refusedOnce;
  unread.destroy();
  const all = await page;
  assert.equal(all.jobs.length, 10);
  assert.equal(all.next_cursor, null);
});

test('a reader that goes before its answer is built holds nothing', async (t) => {
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, maxAnswerBytesInFlight: 100_000 });
  const job = await start(client, 'pending', 'x'.repeat(50_000));
  /** the core's call for the next request, to await its end on the server */
  const nextCall = (method: 'waitJobs' | 'listJobs') =>
    new Promise<Promise<unknown>>((resolve) => {
      const original = c.core[method].bind(c.core) as (...args: unknown[]) => Promise<unknown>;
      (c.core as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
        delete (c.core as unknown as Record<string, unknown>)[method];
        const out = original(...args);
        resolve(out.catch(() => undefined));
        return out;
      };
    });

  // a wait whose client goes away while it waits
  const waitCall = nextCall('waitJobs');
  const waiting = watching(c.core, job.job_id);
  const waiter = connect(c.port, '127.0.0.1');
  t.after(() => waiter.destroy());
  const body = JSON.stringify({ job_ids: [job.job_id], timeout_ms: 60_000 });
  waiter.write(`POST /jobs/wait HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  await waiting;
  waiter.destroy();
  await (await waitCall);
  assert.equal(c.core.answers.held, 0);

  // a list whose client goes away while the store reads its page
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const read = c.core.store.listJobs.bind(c.core.store);
  const reading = new Promise<void>((resolve) => {
    c.core.store.listJobs = async (filter) => {
      resolve();
      await gate;
      return read(filter);
    };
  });
  const serverSide = once(c.app.server, 'connection') as Promise<[Socket]>;
  const listCall = nextCall('listJobs');
  const lister = connect(c.port, '127.0.0.1');
  t.after(() => lister.destroy());
  lister.write('GET /jobs?limit=100 HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  const [socket] = await serverSide;
  await reading;
  const gone = once(socket, 'close');
  lister.destroy();
  await gone;
  open();
  await (await listCall);
  assert.equal(c.core.answers.held, 0);
  // and the room is all there
  assert.equal((await client.listJobs({ limit: 100 })).jobs.length, 1);
});

test('GET /launchers: a page ends once its launchers\' labels and project roots pass MAX_ANSWER_BYTES; without limit the list stays whole', async (t) => {
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET });
  // five project roots of 3,300 characters, the first also its project_dir: about 20,000
  // characters of text a launcher
  const roots = (tag: string) => Array.from({ length: 5 }, (_, i) => `/${tag}/${i}/${'r'.repeat(3_300 - tag.length - 4)}`);
  const ids: string[] = [];
  for (const tag of ['a', 'b', 'c', 'd']) ids.push((await client.register({ hostname: tag, project_roots: roots(tag) })).launcher_id);
  // over the budget alone (20 roots): a page of its own
  ids.push((await client.register({ hostname: 'huge', project_roots: Array.from({ length: 20 }, (_, i) => `/huge/${i}/${'h'.repeat(4_000)}`) })).launcher_id);
  ids.push((await client.register({ hostname: 'small' })).launcher_id);
  const hostnames = new Map(ids.map((id, i) => [id, ['a', 'b', 'c', 'd', 'huge', 'small'][i]!]));

  const pages = await pagesOf(async (cursor) => {
    const p = await client.listLaunchers({ limit: 100, ...(cursor !== undefined ? { cursor } : {}) });
    return { items: p.launchers.map((l) => hostnames.get(l.launcher_id)!), next_cursor: p.next_cursor ?? null };
  });
  // registration order: three of 20,000 characters a page, then huge alone (a page's first
  // launcher always fits), then small
  assert.deepEqual(pages, [['a', 'b', 'c'], ['d'], ['huge'], ['small']]);
  // the limit still applies inside the budget
  const one = await client.listLaunchers({ limit: 1 });
  assert.deepEqual([one.launchers.length, typeof one.next_cursor], [1, 'string']);
  // a client that does not page gets every launcher in one answer, as before paging
  const whole = await client.listLaunchers();
  assert.deepEqual([whole.launchers.length, whole.next_cursor], [6, null]);
  assert.equal(c.core.answers.held, 0, 'every answer released its room');
});

test('GET /launchers?limit: a page gets what the answers in flight leave, else 503; the unpaged list is answered whole', async (t) => {
  const { c, client } = await startTest(t, { maxAnswerBytes: BUDGET, maxAnswerBytesInFlight: 50_000 });
  // about 20,000 characters a launcher (four project roots of 4,000, the first also its project_dir)
  for (const tag of ['a', 'b', 'c']) await client.register({ hostname: tag, project_roots: Array.from({ length: 4 }, (_, i) => `/${tag}/${i}/${'r'.repeat(4_000)}`) });
  const releases: (() => void)[] = [];
  const inFlight = (release: () => void) => void releases.push(release);
  // an answer in flight takes two (about 40,000 of 50,000): less than one launcher is left
  assert.equal((await c.core.listLaunchers({ limit: 100 }, inFlight)).launchers.length, 2);
  const once = new AgentqClient({ url: c.url, overloadRetries: 0 });
  t.after(() => once.close());
  const refused = await rejectsWith(once.listLaunchers({ limit: 100 }), 503, 'overloaded');
  assert.equal(refused.reason, 'answers_in_flight');
  assert.equal((await once.listLaunchers()).launchers.length, 3, 'without limit: whole, as before paging');
  for (const release of releases) release();
  assert.equal(c.core.answers.held, 0);
  assert.deepEqual((await once.listAllLaunchers()).map((l) => l.hostname), ['a', 'b', 'c']);
});
