import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, fileBrowser, holdAnswers, live, openDashboard } from './harness.js';

const { skip, browser } = fileBrowser();

test('an address with broken percent-encoding shows "nothing at", on load and on a hash change', { skip }, async (t) => {
  // openDashboard fails the test if the page throws (decodeURIComponent's URIError did)
  const { page } = await openDashboard(t, browser(), { path: '#/jobs/%E0%A4%A' });
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

test("going from one job's page to another shows the second job's prompt, even when an event of it comes first", { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  const launcher = await fakeLauncher(client);
  const a = await client.createJob({ type: 'start_session', session_name: 'first', prompt: 'prompt of the first job' });
  await launcher.take();
  await launcher.started(a.job_id);
  const b = await client.createJob({ type: 'start_session', session_name: 'second', prompt: 'prompt of the second job' });
  await live(page);
  await page.evaluate((id) => (location.hash = `#/jobs/${id}`), a.job_id);
  await page.locator(`.job-view[data-job-id="${a.job_id}"]`).waitFor();
  assert.equal(await page.getByTestId('prompt').innerText(), 'prompt of the first job');

  // the second job's GET answer (still pending) is held until an event of it, newer, is shown
  const { read: answerRead, release } = await holdAnswers(page, new RegExp(`/jobs/${b.job_id}$`));
  await page.evaluate((id) => (location.hash = `#/jobs/${id}`), b.job_id);
  await answerRead; // the view asked for it: it is mounted and follows events
  assert.equal((await launcher.take()).job_id, b.job_id); // job.claimed
  await page.locator(`.job-view[data-job-id="${b.job_id}"][data-status="claimed"]`).waitFor();
  assert.equal(await page.getByTestId('prompt').innerText(), '(not loaded)', "events carry no prompt; never the first job's");

  release();
  await page.getByTestId('prompt').filter({ hasText: 'prompt of the second job' }).waitFor();
  assert.equal(await page.locator('.job-view').getAttribute('data-status'), 'claimed', 'the older answer does not move it back');
});

test('an address changed right after the page loaded, before the app listened for hash changes, is followed', { skip }, async (t) => {
  const { page } = await openDashboard(t, browser());
  // on the next load, the hash changes as soon as the app has rendered its first view (module
  // scripts run before DOMContentLoaded), as a quick click or a script may do: the hashchange
  // event comes before the app's effects have run
  await page.addInitScript(() => {
    document.addEventListener('DOMContentLoaded', () => (location.hash = '#/launchers'), { once: true });
  });
  await page.reload();
  await page.locator('.launchers-view').waitFor();
  assert.equal(await page.locator('.jobs-view').count(), 0);
  assert.equal(await page.locator('nav.tabs a[aria-current="page"]').innerText(), 'Launchers');
});
