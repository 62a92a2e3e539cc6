import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '@agentq/coordinator';
import type { Browser, Page } from 'playwright-core';
import { browserSkip, fakeLauncher, launchBrowser, live, openDashboard } from './harness.js';

// The jobs list while jobs change under it: what the page shows must match what the API has.

const skip = browserSkip();
let browser: Browser;
before(async () => {
  if (!skip) browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

const RETENTION_MS = 1000;
/** retention that the test drives (the sweeper's timer never fires during a test) */
const retention = { jobRetentionMs: RETENTION_MS, sweepIntervalMs: 600_000 };

const rowIds = (page: Page) => page.locator('tbody tr[data-job-id]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job-id')));

/** Hold the answers of requests matching `url` until release() (each one is read at once). */
async function holdAnswers(page: Page, url: RegExp) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(url, async (route) => {
    const answer = await route.fetch();
    await released;
    await route.fulfill({ response: answer });
  });
  return release;
}

test('a job evicted before the page opened does not come back from the replayed events', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  const { page, client, app } = await openDashboard(t, browser, { config: retention, deps: { clock } });
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
  const release = await holdAnswers(page, /\/jobs\?/);
  await page.reload();
  await live(page);
  await page.locator(`tr[data-job-id="${kept.job_id}"]`).waitFor(); // the replay is in
  release();
  await page.locator('table.jobs-table[aria-busy="false"]').waitFor();
  assert.deepEqual(await rowIds(page), [kept.job_id]);
});
