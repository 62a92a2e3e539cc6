import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import { fileBrowser, live, openDashboard } from './harness.js';

// GET /launchers is paged: the launchers view and the jobs view's launcher filter read every
// page (500 launchers each, web/lib/launchers.ts) rather than the whole registry in one answer.

const { skip, browser } = fileBrowser();

/** The query of every GET /launchers the page sends. */
function launcherReads(page: Page): URLSearchParams[] {
  const reads: URLSearchParams[] = [];
  page.on('request', (req) => {
    const url = new URL(req.url());
    if (url.pathname === '/launchers') reads.push(url.searchParams);
  });
  return reads;
}

test('the launchers view and the jobs filter list every launcher, read 500 a page', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/launchers' });
  const ids: string[] = [];
  for (let i = 0; i < 501; i++) ids.push((await client.register({ hostname: `host-${i}`, executor_type: 'test' })).launcher_id);
  const reads = launcherReads(page);
  await page.reload();
  await live(page);

  // the last registered is on the second page
  await page.locator(`tr[data-launcher-id="${ids.at(-1)}"]`).waitFor();
  const rows = await page.locator('tr[data-launcher-id]').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-launcher-id')!));
  assert.equal(rows.length, 501);
  assert.deepEqual([...rows].sort(), [...ids].sort());
  assert.ok(reads.length >= 2, `two pages at least (${reads.length} reads)`);
  assert.ok(reads.every((q) => q.get('limit') === '500'), 'every read asks for a page');
  assert.ok(reads.some((q) => q.has('cursor')), 'the second page from the first one\'s cursor');

  await page.goto(`${new URL(page.url()).origin}/#/jobs`);
  await live(page);
  const options = page.locator('select[name="launcher"] option');
  await page.locator(`select[name="launcher"] option[value="${ids.at(-1)}"]`).waitFor({ state: 'attached' });
  assert.equal(await options.count(), 502, 'any, and every launcher');
});
