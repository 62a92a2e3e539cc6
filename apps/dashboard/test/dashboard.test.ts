import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, fileBrowser, live, openDashboard } from './harness.js';

const { skip, browser } = fileBrowser();

test('a job created over the API appears in the jobs list live, and its status changes live to completed', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  await live(page);
  // a reload would lose this
  await page.evaluate(() => Object.assign(window, { agentqMarker: 'same page' }));

  const createdAt = Date.now();
  const job = await client.createJob({ type: 'start_session', session_name: 'live-list', prompt: 'list me' });
  const row = page.locator(`tr[data-job-id="${job.job_id}"]`);
  await row.waitFor();
  t.diagnostic(`the new job was on the page ${Date.now() - createdAt} ms after POST /jobs answered`);
  assert.equal(await row.getAttribute('data-status'), 'pending');
  assert.match(await row.innerText(), /live-list/);

  const launcher = await fakeLauncher(client);
  await launcher.take();
  await launcher.started(job.job_id);
  await page.locator(`tr[data-job-id="${job.job_id}"][data-status="running"]`).waitFor();
  await launcher.completed(job.job_id, 'all done');
  await page.locator(`tr[data-job-id="${job.job_id}"][data-status="completed"]`).waitFor();

  assert.equal(await page.evaluate(() => (window as unknown as { agentqMarker?: string }).agentqMarker), 'same page');
});

test('the jobs list filters by status and pages through the API cursor, newest first', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/jobs?status=pending' });
  const ids: string[] = [];
  for (let i = 0; i < 55; i++) ids.push((await client.createJob({ type: 'start_session', session_name: `page-${i}`, prompt: 'p' })).job_id);
  const launcher = await fakeLauncher(client);
  const taken = await launcher.take(); // the oldest: no longer pending
  assert.equal(taken.job_id, ids[0]);
  await live(page);
  await page.reload(); // a fresh first page (50 rows) of the 54 pending jobs
  const rows = page.locator('tbody tr[data-job-id]');
  await page.locator(`tr[data-job-id="${ids[54]}"]`).waitFor();
  assert.equal(await rows.count(), 50);
  assert.equal(await rows.first().getAttribute('data-job-id'), ids[54]);
  await page.getByRole('button', { name: 'older →' }).click();
  await page.locator(`tr[data-job-id="${ids[1]}"]`).waitFor();
  assert.deepEqual(
    await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job-id'))),
    [ids[4], ids[3], ids[2], ids[1]],
  );
  assert.equal(await page.locator(`tr[data-job-id="${ids[0]}"]`).count(), 0, 'the claimed job is filtered out');
  await page.getByRole('button', { name: '← newer' }).click();
  await page.locator(`tr[data-job-id="${ids[54]}"]`).waitFor();
});

test('the session tree shows a child session under its parent, with its callback job marked', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/sessions' });
  await live(page);
  const launcher = await fakeLauncher(client);
  const parentJob = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan the work' });
  await launcher.take();
  await launcher.started(parentJob.job_id);
  await launcher.completed(parentJob.job_id, 'planned');
  const childJob = await client.createJob({
    type: 'start_session',
    session_name: 'helper',
    prompt: 'do a part',
    parent_session_name: 'lead',
  });
  const child = page.locator('[data-session="lead"] > ul.children > [data-session="helper"]');
  await child.waitFor();

  // the child's job ends: the coordinator resumes the parent with a callback job
  await launcher.take();
  await launcher.started(childJob.job_id);
  await launcher.completed(childJob.job_id, 'part done');
  const callback = await launcher.take();
  assert.deepEqual(callback.callback_of, [childJob.job_id]);
  await page.locator('[data-session="lead"] > .node-row').getByRole('button', { name: /^jobs/ }).click();
  const mark = page.locator(`[data-session="lead"] > .session-jobs [data-job-id="${callback.job_id}"] [data-callback="true"]`);
  await mark.waitFor();
  assert.match(await mark.innerText(), /callback/);
});

test('the stop button on a job page stops a running job, whose output shows live', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser());
  const launcher = await fakeLauncher(client);
  const job = await client.createJob({ type: 'start_session', session_name: 'stop-me', prompt: 'run until stopped' });
  await launcher.take();
  await launcher.started(job.job_id);
  await page.goto(`${page.url().split('#')[0]}#/jobs/${job.job_id}`);
  await page.locator('.job-view[data-status="running"]').waitFor();
  assert.equal(await page.getByTestId('prompt').innerText(), 'run until stopped');

  await launcher.output(job.job_id, 0, 'working on it\n');
  await page.getByTestId('output').getByText('working on it').waitFor();

  const asked = launcher.stopRequested(job.job_id);
  await page.getByTestId('stop').click();
  await page.locator('.job-view[data-status="stopping"]').waitFor();
  await asked;
  await launcher.stopped(job.job_id);
  await page.locator('.job-view[data-status="stopped"]').waitFor();
  assert.equal((await client.getJob(job.job_id)).status, 'stopped');
  // the timeline shows the way there
  const steps = await page.locator('[data-testid="timeline"] li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-type')));
  assert.deepEqual(steps, ['job.created', 'job.claimed', 'job.started', 'job.stopping', 'job.stopped']);
  await page.getByTestId('stop').waitFor({ state: 'detached' });
});

test('the start form creates a job and opens its page; a refused request shows the reason', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/start' });
  const form = page.getByTestId('start-form');
  await form.locator('input[name="session_name"]').fill('from-the-form');
  await form.locator('textarea[name="prompt"]').fill('Say hello from the dashboard');
  await form.locator('input[name="agent_name"]').fill('greeter');
  await form.locator('input[name="timeout"]').fill('5m');
  await form.getByRole('button', { name: 'Start session' }).click();
  await page.waitForURL(/#\/jobs\/job_[0-9a-f]{12}$/);
  const id = page.url().split('/').pop()!;
  await page.locator(`.job-view[data-job-id="${id}"]`).waitFor();

  const job = await client.getJob(id);
  assert.equal(job.session_name, 'from-the-form');
  assert.equal(job.prompt, 'Say hello from the dashboard');
  assert.equal(job.agent_name, 'greeter');
  assert.equal(job.timeout_ms, 300_000);

  // resuming a session that does not exist: the coordinator's reason is shown
  await page.goto(`${page.url().split('#')[0]}#/start?type=resume_session&session=nobody`);
  await form.locator('textarea[name="prompt"]').fill('hello?');
  await form.getByRole('button', { name: 'Resume session' }).click();
  assert.match(await page.getByTestId('form-error').innerText(), /session_not_found/);
});

test('the launchers view shows labels, project roots, running jobs and status live', { skip }, async (t) => {
  const { page, client } = await openDashboard(t, browser(), { path: '#/launchers' });
  await live(page);
  const launcher = await fakeLauncher(client, { hostname: 'gpu-box', labels: { gpu: 'a100' }, project_roots: ['/srv/repo'], max_jobs: 2 });
  const row = page.locator(`tr[data-launcher-id="${launcher.id}"]`);
  await row.waitFor();
  assert.equal(await row.getAttribute('data-status'), 'online');
  const text = await row.innerText();
  assert.match(text, /gpu-box/);
  // what the registry kept of the registration (the core decides which labels a launcher gets)
  const wire = (await client.listLaunchers()).launchers.find((l) => l.launcher_id === launcher.id)!;
  for (const [k, v] of Object.entries(wire.labels)) assert.ok(text.includes(`${k}=${v}`), `label ${k}=${v} in ${text}`);
  for (const root of wire.project_roots) assert.ok(text.includes(root), `project root ${root} in ${text}`);

  const job = await client.createJob({ type: 'start_session', session_name: 'on-gpu', prompt: 'train' });
  await launcher.take();
  await row.locator(`a[href$="${job.job_id}"]`).waitFor();
  await launcher.started(job.job_id);
  await launcher.completed(job.job_id, 'trained');
  await row.locator(`a[href$="${job.job_id}"]`).waitFor({ state: 'detached' });

  await client.deleteLauncher(launcher.id, { self: true });
  await row.waitFor({ state: 'detached' });
});

test('a pending job says why it is waiting (pending_reason) on its page and in the list', { skip }, async (t) => {
  const { page, client, url } = await openDashboard(t, browser());
  const job = await client.createJob({ type: 'start_session', session_name: 'waits', prompt: 'needs a gpu' });
  // The coordinator sets pending_reason once jobs are routed by labels; until then this test
  // amends the real answers to show how the page presents one (and keeps the event stream, whose
  // unamended snapshots would win, away).
  const reason = 'no online launcher has the labels gpu=a100';
  await page.route(/\/events$/, (route) => route.abort());
  await page.route(/\/jobs(\/job_[0-9a-f]{12})?(\?.*)?$/, async (route) => {
    const res = await route.fetch();
    const body = (await res.json()) as { job_id?: string; jobs?: { job_id: string }[] };
    const amend = <T extends { job_id?: string }>(j: T) => (j.job_id === job.job_id ? { ...j, pending_reason: reason } : j);
    await route.fulfill({ response: res, json: body.jobs ? { ...body, jobs: body.jobs.map(amend) } : amend(body) });
  });
  await page.reload();
  const hint = page.locator(`tr[data-job-id="${job.job_id}"] .hint`);
  await hint.waitFor();
  assert.equal(await hint.getAttribute('title'), reason);
  await page.goto(`${url}/#/jobs/${job.job_id}`);
  assert.equal(await page.getByTestId('pending-reason').innerText(), `Waiting: ${reason}`);
});
