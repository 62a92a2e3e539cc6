import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { CoordinatorConfig } from '@agentq/coordinator';
import type { CreateJobRequest } from '@agentq/protocol';
import { dropStream, fileBrowser, holdAnswers, live, openDashboard } from './harness.js';

// The sessions view with more sessions than one page (200): the trees are paged by their roots.
// Read newest first among all sessions, a tree with many children filled the first page with
// those children, each drawn as a root of its own, and the real roots were not shown at all.

const { skip, browser } = fileBrowser();

/** sessions read per page by the view (web/views/sessions.tsx) */
const PAGE_SIZE = 200;

const roots = (page: import('playwright-core').Page) =>
  page.locator('ul.tree > li.node').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-session')));

/** `n` sessions to start, named `<prefix>-000`, `<prefix>-001`, ... (in creation order), under `parent` when given */
const starts = (prefix: string, n: number, parent?: string): CreateJobRequest[] =>
  Array.from({ length: n }, (_, i) => ({
    type: 'start_session',
    session_name: `${prefix}-${String(i).padStart(3, '0')}`,
    prompt: 'p',
    ...(parent === undefined ? {} : { parent_session_name: parent }),
  }));

/**
 * The sessions view focused (`?focus=`) on "old-kid", a child of "old-boss", whose tree is on no
 * first page: newer roots fill the first page of roots and of all sessions.
 */
async function focusedBeyondFirstPage(t: TestContext, config: Partial<CoordinatorConfig> = {}) {
  const dashboard = await openDashboard(t, browser(), { path: '#/sessions', config });
  const { page, client } = dashboard;
  await client.createJob({ type: 'start_session', session_name: 'old-boss', prompt: 'p' });
  await client.createJob({ type: 'start_session', session_name: 'old-kid', prompt: 'p', parent_session_name: 'old-boss' });
  await client.createJobs(starts('newer', PAGE_SIZE + 10));
  await page.goto(`${new URL(page.url()).origin}/#/sessions?focus=old-kid`);
  await live(page);
  return dashboard;
}

test('with more sessions than a page, the tree shows the real roots, newest first, their children under them', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions' });
  await client.createJob({ type: 'start_session', session_name: 'old-root', prompt: 'p' });
  await client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
  const children: CreateJobRequest[] = Array.from({ length: PAGE_SIZE + 50 }, (_, i) => ({
    type: 'start_session',
    session_name: `child-${i}`,
    prompt: 'p',
    parent_session_name: 'boss',
  }));
  await client.createJobs(children);
  await page.reload();
  await live(page);

  await page.locator('ul.tree > li.node[data-session="boss"]').waitFor();
  assert.deepEqual(await roots(page), ['boss', 'old-root']);
  // the children read with the first page are under their parent (none of them among the roots),
  // and the 50 older ones are read from there
  await page.locator('[data-session="boss"] > ul.children > li.node').first().waitFor();
  const more = page.locator('[data-session="boss"] > ul.children').getByRole('button', { name: 'load 50 more child sessions' });
  await more.click();
  await more.waitFor({ state: 'detached' });
  await page.locator('[data-session="boss"] > ul.children > [data-session="child-0"]').waitFor();
  assert.equal(await page.locator('[data-session="boss"] > ul.children > li.node').count(), 100, 'the first 100 children are drawn');
  assert.match(await page.locator('[data-session="boss"] > ul.children').innerText(), /… 150 more children/);
  assert.deepEqual(await roots(page), ['boss', 'old-root']);

  // a new root goes on top, live; a new child goes under its parent, not among the roots
  await client.createJob({ type: 'start_session', session_name: 'new-root', prompt: 'p' });
  await client.createJob({ type: 'start_session', session_name: 'late-child', prompt: 'p', parent_session_name: 'old-root' });
  await page.locator('[data-session="old-root"] > ul.children > [data-session="late-child"]').waitFor();
  assert.deepEqual(await roots(page), ['new-root', 'boss', 'old-root']);
});

test('roots beyond the first page come with "load more sessions", older than those shown', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions' });
  const bodies = starts('root', PAGE_SIZE + 5);
  await client.createJobs(bodies);
  await page.reload();
  await live(page);
  const button = page.getByRole('button', { name: 'load more sessions' });
  await button.waitFor();
  assert.match(await page.locator('.view-head').innerText(), /200 trees/);
  await button.click();
  await button.waitFor({ state: 'detached' });
  assert.match(await page.locator('.view-head').innerText(), /205 trees/);
  // drawn 100 at a time, newest first: the last roots come last
  for (let shown = 100; shown < PAGE_SIZE + 5; shown += 100) await page.getByRole('button', { name: /^show \d+ more of/ }).click();
  const all = await roots(page);
  assert.equal(all.length, PAGE_SIZE + 5);
  assert.deepEqual(all.slice(-2), ['root-001', 'root-000']);
});

test('a session focused from a job page (#/sessions?focus=) is drawn in its tree, first, whatever page its tree is on', { skip }, async (t) => {
  const { page } = await focusedBeyondFirstPage(t);
  await page.locator('ul.tree > li.node[data-session="old-boss"] > ul.children > li.node.focus[data-session="old-kid"]').waitFor();
  assert.equal((await roots(page))[0], 'old-boss', 'the focused tree comes first');
});

// A session object names its newest MAX_SESSION_LIST_ITEMS children (1,000; 3 here) and counts
// the rest. The node drew only the children its parent named: the older ones a page of all
// sessions brought, and every page "load more" read, were loaded and never drawn.
test('a node draws every child the page read, not only those its parent names; "load more" reads and draws the rest', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions', config: { maxSessionListItems: 3 } });
  await client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
  const total = PAGE_SIZE + 50;
  const children = starts('child', total, 'boss');
  await client.createJobs(children);
  const boss = await client.getSession('boss');
  assert.deepEqual([boss.children.length, boss.children_count], [3, total], 'the parent names 3 of its children');
  await page.reload();
  await live(page);

  const list = page.locator('[data-session="boss"] > ul.children');
  const drawn = () => list.locator(':scope > li.node').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-session')!));
  // the first page of all sessions holds the newest 200 children: all of them are the tree's
  const load = list.getByRole('button', { name: 'load 50 more child sessions' });
  await load.waitFor();
  assert.match(await list.innerText(), /… 100 more children/);
  assert.equal((await drawn()).length, 100);
  await load.click();
  await load.waitFor({ state: 'detached' });
  await list.locator(':scope > [data-session="child-000"]').waitFor();
  // drawn 100 at a time: 100, 200, then the last 50
  await list.getByRole('button', { name: 'show 100 more', exact: true }).click();
  await list.getByRole('button', { name: 'show 50 more', exact: true }).click();
  const all = await drawn();
  assert.equal(all.length, total);
  assert.deepEqual(all, children.map((c) => c.session_name), 'every child once, oldest first');
  assert.equal(await list.getByRole('button', { name: /^show \d+ more$/ }).count(), 0);
  assert.deepEqual(await roots(page), ['boss']);
});

test('the focused tree, on no first page, stays drawn as it was while the trees are read again after a gap', { skip }, async (t) => {
  const { page, client, app } = await focusedBeyondFirstPage(t, { eventReplaySize: 3 });
  const boss = page.locator('ul.tree > li.node[data-session="old-boss"]');
  await boss.locator('> ul.children > li.node.focus[data-session="old-kid"]').waitFor();
  // the root's job list is opened by hand (the focused session's opens by itself)
  await boss.locator('> .node-row').getByRole('button', { name: 'jobs (1)' }).click();
  const bossJobs = boss.locator('> ul.session-jobs');
  await bossJobs.waitFor();

  // a gap (EVENT_REPLAY_SIZE 3), the pages of the trees held: the page reads the trees again
  const trees = await holdAnswers(page, /\/sessions\?/);
  t.after(() => trees.release());
  const stream = await dropStream(t, page, app);
  for (const n of ['a', 'b', 'c']) await client.createJob({ type: 'start_session', session_name: `other-${n}`, prompt: 'p' });
  await stream.reconnect();
  await trees.read;
  assert.equal(await bossJobs.count(), 1, 'the focused tree is drawn as it was while the trees are read');
  trees.release();
  await page.locator('[data-session="other-a"]').waitFor(); // the trees were read again
  assert.equal((await roots(page))[0], 'old-boss', 'the focused tree comes first');
  assert.equal(await bossJobs.count(), 1, "the root's job list is still open");
});

test("children a node reads while the trees are read again after a gap stay drawn once the trees' answers come", { skip }, async (t) => {
  const { page, client, app } = await openDashboard(t, browser(), { path: '#/sessions', config: { maxSessionListItems: 3, eventReplaySize: 3 } });
  await client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
  const total = PAGE_SIZE + 50;
  const children = starts('child', total, 'boss');
  await client.createJobs(children);
  await page.reload();
  await live(page);
  const list = page.locator('[data-session="boss"] > ul.children');
  const load = list.getByRole('button', { name: 'load 50 more child sessions' });
  await load.waitFor();

  // a gap (EVENT_REPLAY_SIZE 3), the pages of the trees held (not those of a node's children)
  const trees = await holdAnswers(page, /\/sessions\?limit=\d+(&root=true)?$/);
  t.after(() => trees.release());
  const stream = await dropStream(t, page, app);
  for (const n of ['a', 'b', 'c']) await client.createJob({ type: 'start_session', session_name: `other-${n}`, prompt: 'p' });
  await stream.reconnect();
  await trees.read;
  // the node's older children are read while the trees are
  await load.click();
  await load.waitFor({ state: 'detached' });
  trees.release();
  await page.locator('[data-session="other-a"]').waitFor(); // the trees were read again
  assert.equal(await list.getByTestId('unloaded-children').count(), 0, 'the children read meanwhile are still there');
  assert.match(await list.innerText(), /… 150 more children/);
});
