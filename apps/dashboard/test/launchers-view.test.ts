import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '@agentq/coordinator';
import type { Page } from 'playwright-core';
import { fakeLauncher, fileBrowser, holdAnswers, live, openDashboard } from './harness.js';

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

test('a launcher that registers while the view reads the list again stays shown (the older answer does not hide it)', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/launchers' });
  // the view reads the list again every 10 s (heartbeat ages): the test moves the page's clock
  await page.clock.install();
  await page.reload();
  await live(page);
  const first = await fakeLauncher(client, { hostname: 'first' });
  await page.locator(`tr[data-launcher-id="${first.id}"]`).waitFor();

  // the next read's answer is taken before the second launcher registers, and reaches the page
  // after the page has shown it live
  type Launchers = { launchers: { launcher_id: string; hostname: string | null }[] };
  const { read: answerRead, release } = await holdAnswers<Launchers>(page, /\/launchers(\?.*)?$/, (body) => {
    for (const l of body.launchers) if (l.launcher_id === first.id) l.hostname = 'read again';
  });
  await page.clock.fastForward(10_000);
  await answerRead;
  const second = await fakeLauncher(client, { hostname: 'second' });
  const row = page.locator(`tr[data-launcher-id="${second.id}"]`);
  await row.waitFor();

  release();
  await page.locator(`tr[data-launcher-id="${first.id}"]`).filter({ hasText: 'read again' }).waitFor();
  assert.equal(await row.count(), 1, 'the launcher registered after the answer was read is still listed');
});

test('a launcher being deregistered that goes silent shows stale at once (its stale event has the same heartbeat)', { skip }, async (t) => {
  const clock = new ManualClock(Date.now());
  // the sweeper's timer never fires during the test: it sweeps when the test says
  const config = { heartbeatTimeoutSeconds: 120, sweepIntervalMs: 600_000 };
  const { page, client, app } = await openDashboard(t, browser(), { path: '#/launchers', config, deps: { clock } });
  const silent = await fakeLauncher(client, { hostname: 'silent' });
  await page.reload();
  await live(page);
  await page.locator(`tr[data-launcher-id="${silent.id}"]`).waitFor();
  // no read of the list is answered from now on: the row changes with the events only
  await page.route(/\/launchers(\?.*)?$/, () => {});

  // removed while it is silent: it never polls again to be told, so it stays deregistering
  assert.equal((await client.deleteLauncher(silent.id)).outcome, 'deregistering');
  await page.locator(`tr[data-launcher-id="${silent.id}"][data-status="deregistering"]`).waitFor();
  clock.advance(121_000);
  await app.core.sweep();
  const [listed] = (await client.listAllLaunchers()).filter((l) => l.launcher_id === silent.id);
  assert.equal(listed?.status, 'stale');
  await page.locator(`tr[data-launcher-id="${silent.id}"][data-status="stale"]`).waitFor();
});
