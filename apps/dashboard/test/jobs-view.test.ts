import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ManualClock } from '@agentq/coordinator';
import type { Page, Route } from 'playwright-core';
import { LAUNCHERS_READ_TIMEOUT_MS } from '../web/lib/launchers.js';
import { READ_TIMEOUT_MS } from '../web/lib/timeout.js';
import { fakeLauncher, fileBrowser, holdAnswers, live, openDashboard, startServer } from './harness.js';

// The jobs list while jobs change under it: what the page shows must match what the API has.

const { skip, browser } = fileBrowser();

/**
 * The dashboard with the first read matching `url` never answered (aborted when the test ends);
 * the reads after it go to `answer` (through to the coordinator by default). Resolves once that
 * first read was asked; `requests()` counts the reads.
 */
async function firstReadUnanswered(t: TestContext, url: RegExp, answer = (route: Route) => route.continue()) {
  let requests = 0;
  let abandon!: () => void;
  const abandoned = new Promise<void>((resolve) => (abandon = resolve));
  t.after(() => abandon());
  let firstAsked!: () => void;
  const asked = new Promise<void>((resolve) => (firstAsked = resolve));
  const dashboard = await openDashboard(t, browser(), {
    beforeLoad: async (page) => {
      await page.clock.install();
      await page.route(url, async (route) => {
        if (++requests === 1) {
          firstAsked();
          await abandoned;
          return route.abort().catch(() => undefined);
        }
        await answer(route);
      });
    },
  });
  await asked;
  return { ...dashboard, requests: () => requests };
}

const RETENTION_MS = 1000;
/** retention that the test drives (the sweeper's timer never fires during a test) */
const retention = { jobRetentionMs: RETENTION_MS, sweepIntervalMs: 600_000 };

const rowIds = (page: Page) => page.locator('tbody tr[data-job-id]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job-id')));

test('a job evicted before the page opened does not come back from the replayed events', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, app } = await openDashboard(t, browser(), { config: retention, deps: { clock } });
  const launcher = await fakeLauncher(client);
  const gone = await client.createJob({ type: 'start_session', session_name: 'evicted', prompt: 'p' });
  await launcher.take();
  await launcher.completed(gone.job_id, 'done');
  clock.advance(RETENTION_MS);
  await app.core.sweep();
  await assert.rejects(client.getJob(gone.job_id), { code: 'job_not_found' });
  const kept = await client.createJob({ type: 'start_session', session_name: 'kept', prompt: 'p' });

  // a fresh page: its list answer (without the evicted job) comes after the replayed events
  // (with the evicted job's whole life, its eviction last)
  const { release } = await holdAnswers(page, /\/jobs\?/);
  await page.reload();
  await live(page);
  await page.locator(`tr[data-job-id="${kept.job_id}"]`).waitFor(); // the replay is in
  release();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.deepEqual(await rowIds(page), [kept.job_id]);
});

test('paging a filtered list skips no job when one enters a later page and pushes its last row off', { skip }, async (t) => {
  // distinct creation times for three groups (a batch is created at one instant)
  const clock = new ManualClock(Date.now());
  const { page, client } = await openDashboard(t, browser(), { path: '#/jobs?status=finished', deps: { clock } });
  const batch = async (prefix: string, n: number) => {
    const jobs = await client.createJobs(
      Array.from({ length: n }, (_, i) => ({ type: 'start_session' as const, session_name: `${prefix}-${i}`, prompt: 'p' })),
    );
    clock.advance(1000);
    return jobs.map((j) => j.job_id);
  };
  const oldest = await batch('a', 2);
  const [late] = await batch('r', 1);
  const newest = await batch('b', 99);
  const launcher = await client.register({ hostname: 'test-host', executor_type: 'test', max_jobs: 1000 });
  const taken = await client.poll(launcher.launcher_id, { batch: true, capacity: 1000, holdSeconds: launcher.poll_timeout_seconds });
  assert.equal(taken?.jobs?.length, 102);
  // every job ends but one (in the second page's range): pages of 50 are b98..b49, b48..b0 a1, a0
  const reports = [...oldest, ...newest].flatMap((job_id) => [
    { job_id, kind: 'started' as const },
    { job_id, kind: 'completed' as const, status: 'success' as const, result: 'ok' },
  ]);
  await client.sync({ launcher_id: launcher.launcher_id, capacity: 0, reports });
  await live(page);
  await page.reload();
  await page.locator(`tr[data-job-id="${newest[98]}"]`).waitFor();
  await page.getByRole('button', { name: 'older →' }).click();
  await page.locator(`tr[data-job-id="${oldest[1]}"]`).waitFor();
  assert.deepEqual(await rowIds(page), [...newest.slice(0, 49).reverse(), oldest[1]]);

  // the job in this page's range ends: it comes in, and the page's last row goes (50 rows a page)
  const ends = [
    { job_id: late!, kind: 'started' as const },
    { job_id: late!, kind: 'completed' as const, status: 'success' as const, result: 'ok' },
  ];
  await client.sync({ launcher_id: launcher.launcher_id, capacity: 0, reports: ends });
  await page.locator(`tr[data-job-id="${late}"]`).waitFor();
  assert.equal(await page.locator(`tr[data-job-id="${oldest[1]}"]`).count(), 0);

  // the next page starts with that row: none is on no page
  await page.getByRole('button', { name: 'older →' }).click();
  await page.locator('.pager', { hasText: 'page 3' }).waitFor();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.deepEqual(await rowIds(page), [oldest[1], oldest[0]]);
});

test('paging skips no job either when jobs created at the same instant come into a later page', { skip }, async (t) => {
  // one instant for every job (a batch): a page cannot tell by creation time which page a job
  // that comes to match belongs on, and takes one that belongs on the page before
  const clock = new ManualClock(Date.now());
  const { page, client } = await openDashboard(t, browser(), { path: '#/jobs?status=finished', deps: { clock } });
  const bodies = Array.from({ length: 110 }, (_, i) => ({ type: 'start_session' as const, session_name: `same-${i}`, prompt: 'p' }));
  const ids = (await client.createJobs(bodies)).map((j) => j.job_id);
  const launcher = await client.register({ hostname: 'test-host', executor_type: 'test', max_jobs: 1000 });
  const taken = await client.poll(launcher.launcher_id, { batch: true, capacity: 1000, holdSeconds: launcher.poll_timeout_seconds });
  assert.equal(taken?.jobs?.length, 110);
  const end = (jobIds: string[]) =>
    client.sync({
      launcher_id: launcher.launcher_id,
      capacity: 0,
      reports: jobIds.flatMap((job_id) => [
        { job_id, kind: 'started' as const },
        { job_id, kind: 'completed' as const, status: 'success' as const, result: 'ok' },
      ]),
    });
  // all end but two; newest first, pages are 109..81 79..59, then 58..56 54..8, then 7..0
  await end(ids.filter((_, i) => i !== 80 && i !== 55));
  const range = (from: number, to: number) => ids.slice(to, from + 1).reverse();
  await live(page);
  await page.reload();
  await page.locator(`tr[data-job-id="${ids[109]}"]`).waitFor();
  await page.getByRole('button', { name: 'older →' }).click();
  await page.locator(`tr[data-job-id="${ids[8]}"]`).waitFor();
  assert.deepEqual(await rowIds(page), [...range(58, 56), ...range(54, 8)]);

  // a job of the first page's range ends: this page takes it, and its last row goes
  await end([ids[80]!]);
  await page.locator(`tr[data-job-id="${ids[80]}"]`).waitFor();
  assert.equal(await page.locator(`tr[data-job-id="${ids[8]}"]`).count(), 0);

  // paging on first shows the second page as it is now (with that row), then the third
  const pushedOff = page.locator(`tr[data-job-id="${ids[8]}"]`);
  await page.getByRole('button', { name: 'older →' }).click();
  await pushedOff.or(page.locator('.pager', { hasText: 'page 3' })).waitFor();
  assert.equal(await pushedOff.count(), 1, 'the row pushed off is shown before paging on');
  assert.deepEqual(await rowIds(page), [...range(58, 56), ...range(54, 8)]);
  await page.getByRole('button', { name: 'older →' }).click();
  await page.locator(`tr[data-job-id="${ids[0]}"]`).waitFor();
  assert.deepEqual(await rowIds(page), range(7, 0));
});

test('after a restart of an in-memory coordinator that has already passed the page\'s last event id, the list shows the new jobs only', { skip }, async (t) => {
  const first = await startServer();
  const port = new URL(first.url).port;
  const context = await browser().newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  const old = await first.client.createJobs(['old-a', 'old-b'].map((session_name) => ({ type: 'start_session' as const, session_name, prompt: 'p' })));
  await page.goto(`${first.url}/#/jobs`);
  await live(page);
  await page.locator(`tr[data-job-id="${old[1]!.job_id}"]`).waitFor();

  // the page reconnects only once the new process has numbered more events than the old one did
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(/\/events$/, async (route) => {
    await released;
    await route.continue();
  });
  await first.close();
  await page.locator('[data-stream-state="retrying"]').waitFor();
  const second = await startServer({ config: { port: Number(port) } });
  t.after(() => second.close());
  const fresh = await second.client.createJobs(['new-a', 'new-b', 'new-c'].map((session_name) => ({ type: 'start_session' as const, session_name, prompt: 'p' })));
  release();
  await live(page);
  await page.locator(`tr[data-job-id="${fresh[0]!.job_id}"]`).waitFor();
  assert.deepEqual((await rowIds(page)).sort(), fresh.map((j) => j.job_id).sort());
});

test('a launcher that registers after the page opened is named by its hostname in the list and offered in the launcher filter', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  await live(page);
  const job = await client.createJob({ type: 'start_session', session_name: 'late-launcher', prompt: 'p' });
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
  const launcher = await fakeLauncher(client, { hostname: 'late-host' });
  await launcher.take();
  await launcher.started(job.job_id);
  const row = page.locator(`tr[data-job-id="${job.job_id}"][data-status="running"]`);
  await row.waitFor();
  assert.equal(await row.locator('td').nth(4).innerText(), 'late-host');
  assert.equal(await page.locator(`select[name="launcher"] option[value="${launcher.id}"]`).innerText(), `late-host (${launcher.id})`);
});

test('the page of a job that history retention deletes says so instead of showing it', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, app, url } = await openDashboard(t, browser(), { config: retention, deps: { clock } });
  const launcher = await fakeLauncher(client);
  const job = await client.createJob({ type: 'start_session', session_name: 'soon-gone', prompt: 'p' });
  await launcher.take();
  await launcher.completed(job.job_id, 'done');
  await page.goto(`${url}/#/jobs/${job.job_id}`);
  await page.locator('.job-view[data-status="completed"]').waitFor();
  clock.advance(RETENTION_MS);
  await app.core.sweep();
  await page.getByText(`Job ${job.job_id} was deleted by history retention`).waitFor();
  assert.equal(await page.locator('.job-view').count(), 0);
});

test("the page of a job of a closed session offers to start it again, not a resume the coordinator would refuse", { skip }, async (t) => {
  const { page, client, url } = await openDashboard(t, browser());
  const job = await client.createJob({ type: 'start_session', session_name: 'never-ran', prompt: 'p' });
  await client.stopJob(job.job_id); // stopped while pending: the session is closed
  assert.equal((await client.getSession('never-ran')).accepts_input, false);
  await page.goto(`${url}/#/jobs/${job.job_id}`);
  await page.locator('.job-view[data-status="stopped"]').waitFor();
  const again = page.getByRole('link', { name: 'Start session again' });
  await again.waitFor();
  assert.match((await again.getAttribute('href')) ?? '', /type=start_session/);
  assert.equal(await page.getByRole('link', { name: 'Resume session' }).count(), 0);
});

test('a launcher that registers while the jobs view reads the launchers is offered by the launcher filter', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  const first = await fakeLauncher(client, { hostname: 'first' });
  // the launchers' answer is taken before the second launcher registers, and reaches the page
  // after the page has added it live
  type Launchers = { launchers: { launcher_id: string; hostname: string | null }[] };
  const { read: answerRead, release } = await holdAnswers<Launchers>(page, /\/launchers(\?.*)?$/, (body) => {
    for (const l of body.launchers) if (l.launcher_id === first.id) l.hostname = 'read';
  });
  await page.reload();
  await live(page);
  await answerRead;
  const second = await fakeLauncher(client, { hostname: 'second' });
  const option = page.locator(`select[name="launcher"] option[value="${second.id}"]`);
  await option.waitFor({ state: 'attached' });

  release();
  await page.locator(`select[name="launcher"] option[value="${first.id}"]`).filter({ hasText: 'read' }).waitFor({ state: 'attached' });
  assert.equal(await option.count(), 1, 'the launcher registered after the answer was read is still offered');
});

test('a read of the launchers that never answers is given up and read again: the launcher filter gets its answer', { skip }, async (t) => {
  // the first read of the launchers is never answered; the ones after it are, with a mark
  const { page, client, requests } = await firstReadUnanswered(t, /\/launchers(\?.*)?$/, async (route) => {
    const answer = await route.fetch();
    const body = (await answer.json()) as { launchers: { launcher_id: string; hostname: string | null }[] };
    for (const l of body.launchers) l.hostname = 'read again';
    await route.fulfill({ response: answer, json: body });
  });
  await live(page);
  const launcher = await fakeLauncher(client, { hostname: 'registered' });
  const option = page.locator(`select[name="launcher"] option[value="${launcher.id}"]`);
  await option.filter({ hasText: 'registered' }).waitFor({ state: 'attached' });

  // the page gives the read up after LAUNCHERS_READ_TIMEOUT_MS and reads again
  await page.clock.fastForward(LAUNCHERS_READ_TIMEOUT_MS);
  await option.filter({ hasText: 'read again' }).waitFor({ state: 'attached' });
  assert.equal(requests(), 2, 'the read given up was made once more');
});

test('a read of a page of jobs that never answers is given up and read again: the list gets its answer', { skip }, async (t) => {
  // the first read of the jobs is never answered; the ones after it are
  const { page, requests } = await firstReadUnanswered(t, /\/jobs(\?.*)?$/);
  await live(page);
  const list = page.locator('table.jobs-table');
  assert.equal(await list.getAttribute('aria-busy'), 'true', 'the list waits for its page');
  await page.clock.fastForward(READ_TIMEOUT_MS);
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.equal(requests(), 2, 'the read given up was made once more');
});

test('a page of jobs given up after the jobs view was left is not read again', { skip }, async (t) => {
  // the first read of the jobs is never answered; the ones after it are
  const { page, requests } = await firstReadUnanswered(t, /\/jobs(\?.*)?$/);
  await live(page);
  // the view is left while its read is in flight, and the read's time runs out after that
  await page.locator('nav.tabs a', { hasText: 'Sessions' }).click();
  await page.locator('section.sessions-view').waitFor();
  await page.clock.fastForward(READ_TIMEOUT_MS);
  // back to the jobs: its own read is the second one, the first was not read again meanwhile
  await page.locator('nav.tabs a', { hasText: 'Jobs' }).click();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.equal(requests(), 2, 'only the new view read the jobs again');
});

test('"older →" whose read of the page again never answers shows the error after READ_TIMEOUT_MS, keeps the page live, and reads again on request', { skip }, async (t) => {
  // the reads of the jobs go through, but for one the test picks, which is never answered
  let holdNext = false;
  let asked!: () => void;
  const held = new Promise<void>((resolve) => (asked = resolve));
  let abandon!: () => void;
  const abandoned = new Promise<void>((resolve) => (abandon = resolve));
  t.after(() => abandon());
  const { page, client } = await openDashboard(t, browser(), {
    beforeLoad: async (page) => {
      await page.clock.install();
      await page.route(/\/jobs(\?.*)?$/, async (route) => {
        if (!holdNext) return route.continue();
        holdNext = false;
        asked();
        await abandoned;
        await route.abort().catch(() => undefined);
      });
    },
  });
  await live(page);
  const bodies = (prefix: string, n: number) =>
    Array.from({ length: n }, (_, i) => ({ type: 'start_session' as const, session_name: `${prefix}-${i}`, prompt: 'p' }));
  const first = (await client.createJobs(bodies('first', 50))).map((j) => j.job_id);
  await page.locator(`tr[data-job-id="${first[0]}"]`).waitFor();
  // a job created live pushes the oldest row off the first page: "older →" reads the page again first
  const [pushing] = await client.createJobs(bodies('pushing', 1));
  await page.locator(`tr[data-job-id="${first[0]}"]`).waitFor({ state: 'detached' });

  holdNext = true;
  await page.getByRole('button', { name: 'older →' }).click();
  await held;
  // the page stays live while that read hangs
  const [during] = await client.createJobs(bodies('during', 1));
  await page.locator(`tr[data-job-id="${during!.job_id}"]`).waitFor();
  await page.clock.fastForward(READ_TIMEOUT_MS);
  const alert = page.getByRole('alert');
  await alert.getByText(`GET /jobs did not answer in ${READ_TIMEOUT_MS} ms`).waitFor();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.equal(await page.locator('.pager').getByText('page 1').count(), 1, 'still on the first page');
  assert.deepEqual((await rowIds(page)).slice(0, 2), [during!.job_id, pushing!.job_id], 'nothing that came meanwhile is lost');

  await alert.getByRole('button', { name: 'read again' }).click();
  await page.locator('.pager', { hasText: 'page 2' }).waitFor();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.deepEqual(await rowIds(page), [first[1], first[0]], 'the two rows pushed off, none skipped or repeated');
  assert.equal(await alert.count(), 0, 'the error is gone');
});
