import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ManualClock } from '@agentq/coordinator';
import { READ_TIMEOUT_MS } from '../web/lib/timeout.js';
import { dropStream, fakeLauncher, fileBrowser, holdAnswers, live, openDashboard } from './harness.js';

// The sessions view while history retention deletes sessions: what the page shows must match
// what the API has.

const { skip, browser } = fileBrowser();

const RETENTION_MS = 1000;
/** retention that the test drives (the sweeper's timer never fires during a test) */
const retention = { jobRetentionMs: RETENTION_MS, sweepIntervalMs: 600_000 };

test('a session deleted by retention leaves the open page, and a page opened later does not show it', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, app } = await openDashboard(t, browser(), { path: '#/sessions', config: retention, deps: { clock } });
  await live(page);
  const launcher = await fakeLauncher(client);
  const job = await client.createJob({ type: 'start_session', session_name: 'gone', prompt: 'p' });
  await launcher.take();
  await launcher.completed(job.job_id, 'done');
  const node = page.locator('[data-session="gone"]');
  await node.waitFor();

  clock.advance(RETENTION_MS);
  await app.core.sweep(); // its job goes
  await app.core.sweep(); // then the session, with nothing left
  await assert.rejects(client.getSession('gone'), { code: 'session_not_found' });
  await node.waitFor({ state: 'detached' });

  // a fresh page replays the session's whole life, its deletion last
  await page.reload();
  await live(page);
  await client.createJob({ type: 'start_session', session_name: 'after', prompt: 'p' });
  await page.locator('[data-session="after"]').waitFor(); // every event before it is in
  assert.equal(await node.count(), 0);
});

test('a session that replayed events name is shown only if the API still has it', { skip }, async (t) => {
  const { page, client } = await sessionGoneWithoutEvent(t);
  await assert.rejects(client.getSession('silent'), { code: 'session_not_found' });
  await client.createJob({ type: 'start_session', session_name: 'kept', prompt: 'p' });

  // a fresh page reads the sessions before its event stream connects; a session created in
  // between is in the replayed events only
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(/\/events$/, async (route) => {
    await released;
    await route.continue();
  });
  await page.reload();
  await page.locator('[data-session="kept"]').waitFor();
  await client.createJob({ type: 'start_session', session_name: 'late', prompt: 'p' });
  release();
  await live(page);
  // the API confirms it: shown (after the API was asked about "silent", named earlier)
  await page.locator('[data-session="late"]').waitFor();
  assert.equal(await page.locator('[data-session="silent"]').count(), 0);
});

test('a failed check of a session that replayed events name is shown apart, under "No sessions yet" of a list read whole, and can be made again', { skip }, async (t) => {
  const { page, client } = await sessionGoneWithoutEvent(t);
  assert.deepEqual((await client.listSessions()).sessions, [], 'no session left');

  // a fresh page: the replayed events name "silent", and its check fails once
  let checks = 0;
  await page.route(/\/sessions\/silent$/, async (route) => {
    if (++checks > 1) return route.continue();
    await route.fulfill({ status: 500, json: { error: { code: 'internal_error', message: 'the store failed' } } });
  });
  await page.reload();
  await live(page);
  const failed = page.getByTestId('unchecked-sessions').getByRole('alert');
  await failed.getByText('Session silent, named by an event from before the page read the sessions, could not be checked: internal_error: the store failed').waitFor();
  await page.getByText('No sessions yet.').waitFor();
  assert.equal(await page.getByRole('alert').count(), 1, 'the only error shown is the check\'s');

  // checked again: the API has no such session (404), so there is nothing to show but the list
  await failed.getByRole('button', { name: 'check again' }).click();
  await failed.waitFor({ state: 'detached' });
  assert.equal(checks, 2);
  assert.equal(await page.getByText('No sessions yet.').count(), 1);
  assert.equal(await page.locator('[data-session="silent"]').count(), 0);
});

test("a session's job list drops evicted jobs and keeps the newest, in creation order", { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, app } = await openDashboard(t, browser(), { path: '#/sessions', config: retention, deps: { clock } });
  await live(page);
  const launcher = await fakeLauncher(client);
  // twelve turns of one session: eleven end, the last one runs on
  const ids: string[] = [];
  for (let turn = 0; turn < 12; turn++) {
    const type = turn === 0 ? 'start_session' : 'resume_session';
    const job = await client.createJob({ type, session_name: 'work', prompt: `turn ${turn}` });
    ids.push(job.job_id);
    await launcher.take();
    await launcher.started(job.job_id);
    if (turn < 11) await client.reportCompleted(job.job_id, { launcher_id: launcher.id, executor_session_id: 'conversation-1' });
    clock.advance(1000);
  }
  await page.locator('[data-session="work"] > .node-row').getByRole('button', { name: /^jobs/ }).click();
  const listed = page.locator('[data-session="work"] > .session-jobs li[data-job-id]');
  const listedIds = () => listed.evaluateAll((lis) => lis.map((li) => li.getAttribute('data-job-id')));
  await listed.first().waitFor();
  assert.deepEqual(await listedIds(), ids.slice(2).reverse(), 'the newest ten');

  clock.advance(RETENTION_MS);
  await app.core.sweep(); // the eleven ended jobs go; the session, busy, stays
  assert.deepEqual((await client.listJobs({ session_name: 'work' })).jobs.map((j) => j.job_id), [ids[11]]);
  const next = await client.createJob({ type: 'resume_session', session_name: 'work', prompt: 'turn 12' });
  await page.locator(`[data-session="work"] > .session-jobs li[data-job-id="${next.job_id}"]`).waitFor(); // every event before it is in
  assert.deepEqual(await listedIds(), [next.job_id, ids[11]]);
});

test('a session holding outcomes and messages after a stop says they are held, not waiting for it to be idle; a closed session offers a new start, not a resume', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions' });
  await live(page);
  const launcher = await fakeLauncher(client, { max_jobs: 10 });
  const root = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'p' });
  await launcher.take();
  await launcher.started(root.job_id);
  const kid = await client.createJob({ type: 'start_session', session_name: 'helper', parent_session_name: 'lead', prompt: 'p' });
  await launcher.take();
  await launcher.started(kid.job_id);
  await launcher.completed(kid.job_id, 'found it');
  await client.sendMessage('lead', { text: 'also this' });
  const note = page.locator('[data-session="lead"] > [data-testid="pending"]');
  await note.getByText("1 child result and 1 message waiting for this session's current job to end").waitFor();

  // stopped: what it holds waits for its next input (docs/sessions.md), while it is idle
  await client.stopJob(root.job_id);
  await launcher.stopRequested(root.job_id);
  await launcher.stopped(root.job_id);
  const lead = await client.getSession('lead');
  assert.deepEqual([lead.status, lead.pending_callbacks.length, lead.pending_messages.length], ['idle', 1, 1]);
  await note.getByText("1 child result and 1 message held until this session's next input").waitFor();

  // a start stopped before it ran closes its session: no resume, a new start under its parent
  const never = await client.createJob({ type: 'start_session', session_name: 'never-ran', parent_session_name: 'lead', prompt: 'p' });
  await client.stopJob(never.job_id);
  assert.equal((await client.getSession('never-ran')).accepts_input, false);
  const closed = page.locator('[data-session="never-ran"] > .node-row');
  await closed.locator('[data-closed="true"]').waitFor();
  assert.equal(await closed.getByRole('link', { name: 'resume' }).count(), 0);
  assert.equal(await closed.getByRole('link', { name: 'start again' }).getAttribute('href'), '#/start?type=start_session&session=never-ran&parent=lead');
});

// a session object names the newest MAX_SESSION_LIST_ITEMS of its jobs and children, and counts them all
test('a parent with more children and jobs than a session object names: every child the page has is drawn, every job counted', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions', config: { maxSessionListItems: 3 } });
  await live(page);
  await client.createJob({ type: 'start_session', session_name: 'hub', prompt: 'p' });
  // four turns queued behind the first: five jobs
  for (let i = 0; i < 4; i++) await client.createJob({ type: 'resume_session', session_name: 'hub', prompt: `more ${i}` });
  for (let i = 0; i < 5; i++) await client.createJob({ type: 'start_session', session_name: `spoke-${i}`, prompt: 'p', parent_session_name: 'hub' });

  const hub = page.locator('[data-session="hub"]');
  // the hub names spoke-2..4; the page has the two older ones too (from the event stream)
  await hub.locator('ul.children > li.node[data-session="spoke-0"]').waitFor();
  await hub.locator('ul.children > li.node[data-session="spoke-4"]').waitFor();
  const drawn = await hub.locator('ul.children > li.node').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-session')));
  assert.deepEqual(drawn, ['spoke-0', 'spoke-1', 'spoke-2', 'spoke-3', 'spoke-4']);
  assert.equal(await hub.locator('[data-testid="unloaded-children"]').count(), 0, 'none counted as not loaded');
  assert.equal(await hub.getByRole('button', { name: 'jobs (5)' }).count(), 1, 'every job counted, not the 3 named');
});

/**
 * The sessions view (EVENT_REPLAY_SIZE 3: a short drop of the stream is a gap) with session
 * "watched", its one job pending and its job list open: the job, and its row in that list.
 */
async function watchedJobList(t: TestContext) {
  const dashboard = await openDashboard(t, browser(), { config: { eventReplaySize: 3 } });
  const { page, client, url } = dashboard;
  const job = await client.createJob({ type: 'start_session', session_name: 'watched', prompt: 'p' });
  await page.goto(`${url}/#/sessions`);
  await live(page);
  await page.locator('[data-session="watched"]').getByRole('button', { name: 'jobs (1)' }).click();
  const row = page.locator(`[data-session="watched"] li[data-job-id="${job.job_id}"]`);
  await row.and(page.locator('[data-status="pending"]')).waitFor();
  return { ...dashboard, job, row };
}

test("an open list of a session's jobs is read again when the stream lost events (a gap), as the tree is", { skip }, async (t) => {
  const { page, client, app, job, row } = await watchedJobList(t);

  // the stream drops, and reconnects only once the job's stop has left the replay window
  // (EVENT_REPLAY_SIZE 3): the page is told of a gap
  const stream = await dropStream(t, page, app);
  await client.stopJob(job.job_id);
  // (events of no session: the tree is read again around the node, which stays open)
  for (const hostname of ['a', 'b', 'c']) await fakeLauncher(client, { hostname });
  await stream.reconnect();
  await page.locator('[data-session="watched"] [data-closed="true"]').waitFor(); // the tree was read again
  await row.and(page.locator('[data-status="stopped"]')).waitFor();
});

test('a node keeps its open job list when the tree is read again after a gap with sessions that came meanwhile', { skip }, async (t) => {
  const { page, client, app, job, row } = await watchedJobList(t);

  // a gap, and the events replayed after it (of sessions created meanwhile) come before the
  // tree's answers (held): the page used to empty the tree until they came, and drew every node
  // anew then, closed
  const tree = await holdAnswers(page, /\/sessions(\?.*)?$/);
  t.after(() => tree.release());
  const stream = await dropStream(t, page, app);
  await client.stopJob(job.job_id);
  for (const n of ['a', 'b', 'c']) await client.createJob({ type: 'start_session', session_name: `other-${n}`, prompt: 'p' });
  await stream.reconnect();
  await page.locator('[data-session="other-c"]').waitFor(); // a replayed event drew it
  assert.equal(await row.count(), 1, 'the open job list is still drawn while the tree is read again');
  tree.release();
  await page.locator('[data-session="other-a"]').waitFor(); // the tree was read again
  await row.and(page.locator('[data-status="stopped"]')).waitFor();
});

test("a session's job list that failed to read shows its jobs once it is read again after a gap", { skip }, async (t) => {
  const { page, client, app, url } = await openDashboard(t, browser(), { config: { eventReplaySize: 3 } });
  const job = await client.createJob({ type: 'start_session', session_name: 'watched', prompt: 'p' });
  // the first read of the session's jobs fails; the ones after it are answered
  let reads = 0;
  await page.route(/\/jobs\?(.*&)?session_name=watched(&.*)?$/, async (route) => {
    if (++reads > 1) return route.continue();
    await route.fulfill({ status: 500, json: { error: { code: 'internal_error', message: 'the store failed' } } });
  });
  await page.goto(`${url}/#/sessions`);
  await live(page);
  await page.locator('[data-session="watched"]').getByRole('button', { name: 'jobs (1)' }).click();
  await page.locator('[data-session="watched"]').getByText('the store failed').waitFor();

  // a gap (EVENT_REPLAY_SIZE 3): the list is read again, and answered
  const stream = await dropStream(t, page, app);
  for (const hostname of ['a', 'b', 'c', 'd']) await fakeLauncher(client, { hostname });
  await stream.reconnect();
  await page.locator(`[data-session="watched"] li[data-job-id="${job.job_id}"]`).waitFor();
  assert.equal(reads, 2);
  assert.equal(await page.locator('[data-session="watched"]').getByText('the store failed').count(), 0, 'the error is gone');
});

/**
 * The sessions view with session "watched" (its one job pending), on a page whose clock the test
 * moves, whose reads of that session's jobs are answered but for those `held` picks (numbered
 * from 1), which never are: `asked(n)` resolves once the nth read has been made.
 */
async function sessionJobsReads(t: TestContext, held: (n: number) => boolean) {
  let reads = 0;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let abandon!: () => void;
  const abandoned = new Promise<void>((resolve) => (abandon = resolve));
  t.after(() => abandon());
  const dashboard = await openDashboard(t, browser(), {
    path: '#/sessions',
    config: { eventReplaySize: 3 },
    beforeLoad: async (page) => {
      await page.clock.install();
      await page.route(/\/jobs\?(.*&)?session_name=watched(&.*)?$/, async (route) => {
        const n = ++reads;
        for (const w of waiters.filter((w) => w.n <= n)) w.resolve();
        if (!held(n)) return route.continue();
        await abandoned;
        await route.abort().catch(() => undefined);
      });
    },
  });
  const { page, client } = dashboard;
  const job = await client.createJob({ type: 'start_session', session_name: 'watched', prompt: 'p' });
  await live(page);
  const node = page.locator('[data-session="watched"]');
  await node.getByRole('button', { name: 'jobs (1)' }).click();
  return {
    ...dashboard,
    job,
    node,
    row: node.locator(`li[data-job-id="${job.job_id}"]`),
    reads: () => reads,
    asked: (n: number) => new Promise<void>((resolve) => (n <= reads ? resolve() : waiters.push({ n, resolve }))),
    /** an event after every one made so far has reached the page (the stream keeps their order) */
    eventsArrived: async (marker: string) => {
      await client.createJob({ type: 'start_session', session_name: marker, prompt: 'p' });
      await page.locator(`[data-session="${marker}"]`).waitFor();
    },
  };
}

test("a session's job list whose read never answers shows an error after READ_TIMEOUT_MS instead of loading for ever, and can be read again", { skip }, async (t) => {
  const { page, client, job, node, row, reads, asked, eventsArrived } = await sessionJobsReads(t, (n) => n === 1);
  await asked(1);
  await node.getByText('loading jobs…').waitFor();
  // the job is stopped while the list waits for its answer: its event is buffered
  await client.stopJob(job.job_id);
  await eventsArrived('marker-1');
  await page.clock.fastForward(READ_TIMEOUT_MS);
  await node.getByRole('alert').getByText(`GET /jobs?session_name=watched did not answer in ${READ_TIMEOUT_MS} ms`).waitFor();
  assert.equal(await node.getByText('loading jobs…').count(), 0, 'no longer loading');
  await node.getByRole('button', { name: 'read again' }).click();
  await row.and(page.locator('[data-status="stopped"]')).waitFor();
  assert.equal(reads(), 2);
  assert.equal(await node.getByRole('alert').count(), 0, 'the error is gone');
});

test("the events buffered while a session's job list is read again after a gap are not lost when that read is given up: the list shown gets them", { skip }, async (t) => {
  const { page, client, app, job, node, row, asked, eventsArrived } = await sessionJobsReads(t, (n) => n === 2);
  await row.and(page.locator('[data-status="pending"]')).waitFor();
  // a gap (EVENT_REPLAY_SIZE 3): the list is read again, and that read never answers
  const stream = await dropStream(t, page, app);
  for (const hostname of ['a', 'b', 'c', 'd']) await fakeLauncher(client, { hostname });
  await stream.reconnect();
  await asked(2);
  // the job is stopped meanwhile: its event waits for the read's answer
  await client.stopJob(job.job_id);
  await eventsArrived('marker-2');
  assert.equal(await row.getAttribute('data-status'), 'pending', 'held for the answer');
  await page.clock.fastForward(READ_TIMEOUT_MS);
  await node.getByRole('alert').getByText(/did not answer/).waitFor();
  // the list read before the gap is still shown, with the event that came during the read
  await row.and(page.locator('[data-status="stopped"]')).waitFor();
});

/**
 * The sessions page open on a coordinator where session `silent` ran a job, and then the job
 * (swept past its retention) and the session went without an event, as a coordinator from before
 * session.evicted removed them: replayed events still name it.
 */
async function sessionGoneWithoutEvent(t: TestContext): Promise<Awaited<ReturnType<typeof openDashboard>>> {
  const clock = new ManualClock(Date.now());
  const opened = await openDashboard(t, browser(), { path: '#/sessions', config: retention, deps: { clock } });
  const { client, app } = opened;
  const launcher = await fakeLauncher(client);
  const job = await client.createJob({ type: 'start_session', session_name: 'silent', prompt: 'p' });
  await launcher.take();
  await launcher.completed(job.job_id, 'done');
  clock.advance(RETENTION_MS);
  await app.core.sweep(); // its job goes
  await app.core.store.transaction(async (tx) => tx.deleteSession('silent'));
  return opened;
}
