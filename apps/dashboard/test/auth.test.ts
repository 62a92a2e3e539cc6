import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { fileBrowser, holdAnswers, live, openDashboard } from './harness.js';

/*
 * Authentication as the coordinator does it: a real AUTH_TOKENS_FILE (`NAME ROLE SHA256HEX`
 * lines) with a reader, a client and a launcher token. The page must ask for a token, show
 * everything with a reader token, and act with a client token; `/` and its assets are public.
 */
const SECRETS = { reader: randomBytes(24).toString('base64url'), client: randomBytes(24).toString('base64url'), launcher: randomBytes(24).toString('base64url') };

function tokenFile(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-dashboard-auth-'));
  t.after(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5 }));
  const file = join(dir, 'tokens');
  const line = (role: keyof typeof SECRETS) => `${role}-token ${role} ${createHash('sha256').update(SECRETS[role]).digest('hex')}`;
  writeFileSync(file, ['# dashboard test', line('reader'), line('client'), line('launcher'), ''].join('\n'));
  return file;
}

const { skip, browser } = fileBrowser();

test('with auth on, the page asks for a token once; a reader token shows, a client token may also act', { skip }, async (t) => {
  const { page, url } = await openDashboard(t, browser(), { config: { authTokensFile: tokenFile(t) } });
  const asClient = new AgentqClient({ url, token: SECRETS.client });
  t.after(() => asClient.close());
  const job = await asClient.createJob({ type: 'start_session', session_name: 'guarded', prompt: 'behind a token' });

  // no token: a clear prompt, and the stream waits for one
  const prompt = page.getByTestId('token-prompt');
  await prompt.waitFor();
  assert.match(await prompt.innerText(), /needs a token/);
  await page.locator('[data-stream-state="needs-token"]').waitFor();

  // a reader token: the jobs show, live
  await prompt.locator('input[name="token"]').fill(SECRETS.reader);
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await prompt.waitFor({ state: 'detached' });
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentq.token')), SECRETS.reader);

  // kept for the tab: a reload does not ask again
  await page.reload();
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
  assert.equal(await page.getByTestId('token-prompt').count(), 0);

  // a reader may not stop a job: the page says why
  // a launcher registers with its role's token and then works with its own credential
  const registrar = new AgentqClient({ url, token: SECRETS.launcher });
  t.after(() => registrar.close());
  const reg = await registrar.register({ hostname: 'test-host', executor_type: 'test' });
  assert.ok(reg.launcher_token, 'a launcher credential comes with the registration');
  const launcher = new AgentqClient({ url, token: reg.launcher_token });
  t.after(() => launcher.close());
  assert.equal((await launcher.poll(reg.launcher_id, { holdSeconds: 5 }))?.job?.job_id, job.job_id);
  await launcher.reportStarted(job.job_id, { launcher_id: reg.launcher_id });
  await page.goto(`${url}/#/jobs/${job.job_id}`);
  await page.locator('.job-view[data-status="running"]').waitFor();
  await page.getByTestId('stop').click();
  await page.getByText(/forbidden: a reader token may not call POST/).waitFor();

  // a client token may
  await page.getByTestId('token-button').click();
  await prompt.locator('input[name="token"]').fill(SECRETS.client);
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await page.locator('.job-view[data-status="running"]').waitFor();
  await page.getByTestId('stop').click();
  await page.locator('.job-view[data-status="stopping"]').waitFor();
});

test('with auth on and no token yet, the jobs and sessions views show the refusal, not "No jobs yet" or "No sessions yet"', { skip }, async (t) => {
  const { page, url } = await openDashboard(t, browser(), { config: { authTokensFile: tokenFile(t) } });
  await page.getByTestId('token-prompt').waitFor();
  for (const view of ['jobs', 'sessions'] as const) {
    await page.goto(`${url}/#/${view}`);
    // the error and the empty state are drawn from one state change: once the error shows, an empty state would too
    await page.locator(`.${view}-view [role="alert"]`).getByText(/unauthorized/).waitFor();
    assert.equal(await page.locator(`.${view}-view .empty`).count(), 0, `${view}: ${await page.locator(`.${view}-view`).innerText()}`);
  }
});

for (const [view, empty] of [['jobs', /No jobs yet/], ['sessions', /No sessions yet/]] as const) {
  test(`with auth on and no ${view}: the refusal hides the empty state, and once a token is given it shows, the refusal gone`, { skip }, async (t) => {
    const { page } = await openDashboard(t, browser(), { config: { authTokensFile: tokenFile(t) }, path: `#/${view}` });
    const prompt = page.getByTestId('token-prompt');
    await prompt.waitFor();
    await page.locator(`.${view}-view [role="alert"]`).getByText(/unauthorized/).waitFor();
    await prompt.locator('input[name="token"]').fill(SECRETS.reader);
    await prompt.getByRole('button', { name: 'Use token' }).click();
    await prompt.waitFor({ state: 'detached' });
    await live(page);
    // the view, still shown, reads again with the token: zero rows is "none yet", and the refusal is over
    await page.locator(`.${view}-view .empty`).getByText(empty).waitFor();
    assert.equal(await page.locator(`.${view}-view [role="alert"]`).count(), 0);
  });
}

test('a token pasted with a character no header can carry is refused in the prompt, saying which; the page does not call the coordinator unreachable', { skip }, async (t) => {
  const { page, url } = await openDashboard(t, browser(), { config: { authTokensFile: tokenFile(t) } });
  const asClient = new AgentqClient({ url, token: SECRETS.client });
  t.after(() => asClient.close());
  const job = await asClient.createJob({ type: 'start_session', session_name: 'pasted', prompt: 'p' });

  // copied from a chat message: a zero-width space came along
  const prompt = page.getByTestId('token-prompt');
  await prompt.locator('input[name="token"]').fill(`${SECRETS.reader}\u200b`);
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await page.getByTestId('token-error').getByText(`U+200B at character ${SECRETS.reader.length + 1}`).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('agentq.token')), null);

  await prompt.locator('input[name="token"]').fill(SECRETS.reader);
  await prompt.getByRole('button', { name: 'Use token' }).click();
  await prompt.waitFor({ state: 'detached' });
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
});

test('a 401 on the event stream answered before the page listens for auth problems still asks for a token', { skip }, async (t) => {
  // The page opens the stream first, then renders; its components subscribe in effects, which
  // run after the first paint: the page's clock is paused, so they wait until the test resumes it.
  // The jobs view's own reads (which would ask for a token themselves) are held meanwhile: the
  // stream's 401 is the only one the page has.
  let reads!: { release: () => void };
  let streamAnswered!: Promise<unknown>;
  const { page } = await openDashboard(t, browser(), {
    config: { authTokensFile: tokenFile(t) },
    beforeLoad: async (page) => {
      await page.clock.install();
      await page.clock.pauseAt(Date.now() + 60_000);
      reads = await holdAnswers(page, /\/(jobs|launchers)(\?.*)?$/);
      streamAnswered = page.waitForEvent('requestfinished', (r) => new URL(r.url()).pathname === '/events');
    },
  });
  t.after(() => reads.release());
  // the stream's 401 has come, and the page has read it: a few tasks after its body (the clock's
  // fake timers cannot measure that; a message between ports is not faked)
  await streamAnswered;
  await page.evaluate(async () => {
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve) => {
        const channel = new MessageChannel();
        channel.port1.onmessage = () => resolve();
        channel.port2.postMessage(null);
      });
    }
  });
  assert.equal(await page.getByTestId('token-prompt').count(), 0, 'no component listened yet');

  await page.clock.resume();
  // the indicator takes the stream's state in the same effects as the page subscribes: both
  // show in one render
  await page.locator('[data-stream-state="needs-token"]').waitFor();
  const prompt = page.getByTestId('token-prompt');
  assert.equal(await prompt.count(), 1, "the stream's 401 asks for a token");
  assert.match(await prompt.innerText(), /needs a token/);
});
