import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSkip, launchBrowser, live, openDashboard } from './harness.js';

const skip = browserSkip();
let browser: Browser;
before(async () => {
  if (!skip) browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

test('an address with broken percent-encoding shows "nothing at", on load and on a hash change', { skip }, async (t) => {
  // openDashboard fails the test if the page throws (decodeURIComponent's URIError did)
  const { page } = await openDashboard(t, browser, { path: '#/jobs/%E0%A4%A' });
  const note = page.locator('main p.note', { hasText: 'Nothing at' });
  await note.waitFor();
  assert.match(await note.innerText(), /Nothing at \/jobs\/%E0%A4%A\b/);

  await page.evaluate(() => (location.hash = '#/jobs'));
  await live(page);
  await note.waitFor({ state: 'detached' });
  await page.evaluate(() => (location.hash = '#/jobs/%zz'));
  await note.waitFor();
  assert.match(await note.innerText(), /Nothing at \/jobs\/%zz\b/);
});
