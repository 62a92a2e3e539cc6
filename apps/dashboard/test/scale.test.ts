import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import type { Page } from 'playwright-core';
import { fileBrowser, live, openDashboard } from './harness.js';

const JOBS = 10_000;
/** rows per page of the jobs list (web/views/jobs.tsx) and root sessions drawn at first (sessions.tsx) */
const PAGE_SIZE = 50;
const ROOTS_SHOWN = 100;

const { skip, browser } = fileBrowser();

/** Create `n` jobs (each its own session) over HTTP, a few requests in flight at a time. */
async function createMany(client: AgentqClient, n: number): Promise<string[]> {
  const ids: string[] = new Array(n);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      ids[i] = (await client.createJob({ type: 'start_session', session_name: `bulk-${i}`, prompt: `job ${i}` })).job_id;
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  return ids;
}

/** Main-thread tasks over 50 ms, as the browser measures them (reported, not asserted: see bench/). */
async function watchLongTasks(page: Page): Promise<() => Promise<{ count: number; longest: number }>> {
  await page.evaluate(() => {
    const w = window as unknown as { longTasks: number[] };
    w.longTasks = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.longTasks.push(e.duration);
    }).observe({ type: 'longtask', buffered: true });
  });
  return () =>
    page.evaluate(() => {
      const tasks = (window as unknown as { longTasks: number[] }).longTasks;
      return { count: tasks.length, longest: Math.round(Math.max(0, ...tasks)) };
    });
}

test(`with ${JOBS} jobs in the system the page stays live and bounded: one page of rows, the newest on top`, { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  await live(page);
  let longTasks = await watchLongTasks(page);

  // every job.created and session.created event of the burst reaches the open page
  const ids = await createMany(client, JOBS);
  const newest = ids[JOBS - 1]!;
  await page.locator(`tbody tr[data-job-id="${newest}"]`).waitFor();
  await page.waitForFunction(
    (id) => document.querySelector('tbody tr[data-job-id]')?.getAttribute('data-job-id') === id,
    newest,
  );
  assert.equal(await page.locator('tbody tr[data-job-id]').count(), PAGE_SIZE);
  const during = await longTasks();
  t.diagnostic(`during the burst of ${JOBS} jobs: ${during.count} long tasks, the longest ${during.longest} ms`);

  // a fresh load with all of them in the system
  await page.reload();
  longTasks = await watchLongTasks(page);
  await live(page);
  await page.locator(`tbody tr[data-job-id="${newest}"]`).waitFor();
  assert.equal(await page.locator('tbody tr[data-job-id]').count(), PAGE_SIZE);

  // the sessions view draws a bounded number of trees, newest first, and stays live
  await page.goto(page.url().replace(/#.*$/, '#/sessions'));
  await page.locator(`[data-session="bulk-${JOBS - 1}"]`).waitFor();
  assert.ok((await page.locator('li.node').count()) <= ROOTS_SHOWN);
  await client.createJob({ type: 'start_session', session_name: 'after-the-burst', prompt: 'still live?' });
  await page.locator('[data-session="after-the-burst"]').waitFor();
  assert.equal(await page.locator('ul.tree > li.node').first().getAttribute('data-session'), 'after-the-burst');
  const after = await longTasks();
  t.diagnostic(`loading the jobs and sessions views with them: ${after.count} long tasks, the longest ${after.longest} ms`);
});
