import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { browserSkip, fakeLauncher, launchBrowser, live, openDashboard, type App } from './harness.js';

/*
 * The coordinator's token check stands in here as a small onRequest hook with the same contract:
 * `Authorization: Bearer <token>`; 401 `unauthorized` without a known token, 403 `forbidden`
 * when the token's role may not do it (a reader may only read); `/` and its assets are public.
 */
const TOKENS: Record<string, 'reader' | 'client'> = { 'reader-secret': 'reader', 'client-secret': 'client' };

function requireTokens(app: App): void {
  app.addHook('onRequest', async (req, reply) => {
    const path = req.url.split('?')[0]!;
    if (path === '/' || path.startsWith('/assets/') || path.startsWith('/launcher')) return;
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const role = token === undefined ? undefined : TOKENS[token];
    if (role === undefined) {
      return reply.code(401).send({ error: { code: 'unauthorized', message: 'a valid bearer token is required' } });
    }
    if (req.method !== 'GET' && role !== 'client') {
      return reply.code(403).send({ error: { code: 'forbidden', message: `a ${role} token may not ${req.method} ${path}` } });
    }
  });
}

const skip = browserSkip();
let browser: Browser;
before(async () => {
  if (!skip) browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

test('with auth on, the page asks for a token once; a reader token shows, a client token may also act', { skip }, async (t) => {
  const { page, url, client } = await openDashboard(t, browser, { hooks: requireTokens });
  const job = (await (
    await fetch(`${url}/jobs`, {
      method: 'POST',
      headers: { authorization: 'Bearer client-secret', 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'start_session', session_name: 'guarded', prompt: 'behind a token' }),
    })
  ).json()) as { job_id: string };

  // no token: a clear prompt, and the stream waits for one
  const prompt = page.getByTestId('token-prompt');
  await prompt.waitFor();
  assert.match(await prompt.innerText(), /needs a token/);
  await page.locator('[data-stream-state="needs-token"]').waitFor();

  // a reader token: the jobs show, live
  await prompt.locator('input[name="token"]').fill('reader-secret');
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await prompt.waitFor({ state: 'detached' });
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentq.token')), 'reader-secret');

  // kept for the tab: a reload does not ask again
  await page.reload();
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
  assert.equal(await page.getByTestId('token-prompt').count(), 0);

  // a reader may not stop a job: the page says why
  const launcher = await fakeLauncher(client);
  await launcher.take();
  await launcher.started(job.job_id);
  await page.goto(`${url}/#/jobs/${job.job_id}`);
  await page.locator('.job-view[data-status="running"]').waitFor();
  await page.getByTestId('stop').click();
  await page.getByText(/forbidden: a reader token may not POST/).waitFor();

  // a client token may
  await page.getByTestId('token-button').click();
  await prompt.locator('input[name="token"]').fill('client-secret');
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await page.locator('.job-view[data-status="running"]').waitFor();
  await page.getByTestId('stop').click();
  await page.locator('.job-view[data-status="stopping"]').waitFor();
});
