import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@agentq/coordinator';
import type { Page } from 'playwright-core';
import { fileBrowser, live, openDashboard } from './harness.js';

// Rows created at the same instant (a batch): equal created_at and updated_at. The API pages them
// by creation order (its cursor is the row's seq); the page must show them in that order, live
// and read, and page on over them without skipping or repeating one.

const { skip, browser } = fileBrowser();

const rowIds = (page: Page) => page.locator('tbody tr[data-job-id]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job-id')));
const rootNames = (page: Page) =>
  page.locator('[data-testid="session-tree"] > li.node').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-session')));
const starts = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ type: 'start_session' as const, session_name: `${prefix}-${i}`, prompt: 'p' }));

test('roots created at one instant while the page is open are drawn in the order the API pages them, as after a reload', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions', deps: { clock } });
  await live(page);
  await client.createJobs(starts('r', 3));
  await page.locator('[data-session="r-2"]').waitFor();
  await page.locator('[data-session="r-0"]').waitFor();
  const api = (await client.listSessions({ root: 'true' })).sessions.map((s) => s.session_name);
  assert.deepEqual(api, ['r-2', 'r-1', 'r-0']);
  assert.deepEqual(await rootNames(page), api, 'live');
  await page.reload();
  await page.locator('[data-session="r-0"]').waitFor();
  assert.deepEqual(await rootNames(page), api, 'read');
});

test('jobs created at one instant that finish in another order are listed in the order the API pages them', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client } = await openDashboard(t, browser(), { path: '#/jobs?status=finished', deps: { clock } });
  await live(page);
  const ids = (await client.createJobs(starts('j', 3))).map((j) => j.job_id);
  const launcher = await client.register({ hostname: 'test-host', executor_type: 'test', max_jobs: 10 });
  await client.poll(launcher.launcher_id, { batch: true, capacity: 10, holdSeconds: launcher.poll_timeout_seconds });
  for (const i of [1, 0, 2]) {
    const job_id = ids[i]!;
    await client.sync({
      launcher_id: launcher.launcher_id,
      capacity: 0,
      reports: [
        { job_id, kind: 'started' as const },
        { job_id, kind: 'completed' as const, status: 'success' as const, result: 'ok' },
      ],
    });
    await page.locator(`tr[data-job-id="${job_id}"]`).waitFor();
  }
  const api = (await client.listJobs({ status: 'completed' })).jobs.map((j) => j.job_id);
  assert.deepEqual(api, [ids[2], ids[1], ids[0]]);
  assert.deepEqual(await rowIds(page), api, 'live');
  await page.reload();
  await page.locator(`tr[data-job-id="${ids[0]}"]`).waitFor();
  assert.deepEqual(await rowIds(page), api, 'read');
});

test('"load more sessions" over roots created at one instant draws each once, in the API\'s order, and a focused tree from the page not read yet stays first', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, url } = await openDashboard(t, browser(), { path: '#/jobs', deps: { clock } });
  await client.createJobs(starts('r', 250));
  const api: string[] = [];
  for (let cursor: string | null | undefined; cursor !== null; ) {
    const list = await client.listSessions({ root: 'true', limit: 200, ...(cursor ? { cursor } : {}) });
    api.push(...list.sessions.map((s) => s.session_name));
    cursor = list.next_cursor;
  }
  assert.equal(api.length, 250);
  // r-10 is on the second page of roots (200 a page): its tree is read with it and drawn first
  await page.goto(`${url}/#/sessions?focus=r-10`);
  await page.locator('[data-session="r-249"]').waitFor();
  const drawn = async () => {
    for (;;) {
      const more = page.getByRole('button', { name: /^show \d+ more of/ });
      if ((await more.count()) === 0) return rootNames(page);
      await more.click();
    }
  };
  assert.deepEqual(await drawn(), ['r-10', ...api.slice(0, 200)], 'the first page, the focused tree first');
  await page.getByRole('button', { name: 'load more sessions' }).click();
  await page.locator('[data-session="r-0"]').waitFor();
  assert.deepEqual(await drawn(), ['r-10', ...api.filter((n) => n !== 'r-10')], 'every root once, in the API\'s order');
});
