import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { FailedReport, RegisterLauncherRequest, StartedReport } from '@agentq/protocol';
import { loadConfig, resolveExecutor, type LauncherConfig } from '../src/index.js';
import { controlServer, coordinator, fixture, launcher, script, settled, tempDir } from './helpers.js';
import { proxy } from './proxy.js';

/** The configuration `agentq-launcher ARGS` would run with (real option parsing and path resolution). */
function configFrom(argv: string[], env: Record<string, string> = {}): LauncherConfig {
  const loaded = loadConfig(argv, env);
  if (loaded.help) throw new Error('unexpected help');
  return loaded.config;
}

test('registration carries labels, the resolved project roots, the host identity and portable_sessions', async (t) => {
  const { c } = await coordinator(t);
  const px = await proxy(t, c.url);
  const base = realpathSync(tempDir(t));
  mkdirSync(join(base, 'repos', 'app'), { recursive: true });
  mkdirSync(join(base, 'other'));
  symlinkSync(join(base, 'repos'), join(base, 'repos-link'));
  const config = configFrom([
    '--url', px.url,
    '--executor', 'demo',
    '--hostname', 'box-1',
    // through a symlink, and with `..`: registered as real paths
    '--project-dir', join(base, 'repos-link', 'app'),
    '--project-dir', join(base, 'other', '..', 'other'),
    '--label', 'zone=a',
    '--state-dir', join(base, 'state'),
  ], { AGENTQ_LABELS: 'gpu=a100,zone=ignored-the-flag-wins' });
  const { launcher: l } = await launcher(t, px.url, config);

  const [body] = px.bodies('/launcher/register') as RegisterLauncherRequest[];
  assert.deepEqual(body!.labels, {
    hostname: 'box-1',
    executor: 'demo',
    os: process.platform,
    arch: process.arch,
    zone: 'a',
  });
  assert.deepEqual(body!.project_roots, [join(base, 'repos', 'app'), join(base, 'other')]);
  assert.equal(body!.project_dir, join(base, 'repos', 'app'), 'the first root is still sent as project_dir');
  assert.equal(body!.executor_type, 'demo');
  assert.equal(body!.portable_sessions, true, "the demo executor's sessions are portable");
  assert.match(body!.host_id ?? '', /^[A-Za-z0-9_-]{8,128}$/);
  assert.equal(body!.host_id, l.hostId);
  assert.equal(readFileSync(join(base, 'state', 'host-id'), 'utf8').trim(), body!.host_id);
});

test('the environment sets labels and roots (comma-separated) when no flag does', (t) => {
  const a = realpathSync(tempDir(t));
  const config = configFrom([], { AGENTQ_LABELS: 'gpu=a100, zone=b', AGENTQ_PROJECT_DIR: `${a},${a}/..` });
  assert.deepEqual(config.labels, { gpu: 'a100', zone: 'b' });
  assert.deepEqual(config.projectRoots, [a, realpathSync(join(a, '..'))]);
});

test('portable_sessions: claude-code and programs say no, --portable-sessions says yes', async (t) => {
  const { c } = await coordinator(t);
  const px = await proxy(t, c.url);
  await launcher(t, px.url, { executor: resolveExecutor('claude-code', process.cwd()) });
  await launcher(t, px.url, { executor: resolveExecutor(fixture('executor.js'), process.cwd()) });
  const flagged = configFrom(['--executor', fixture('executor.js'), '--portable-sessions']);
  await launcher(t, px.url, { executor: flagged.executor, portableSessions: flagged.portableSessions });
  const sent = (px.bodies('/launcher/register') as RegisterLauncherRequest[]).map((b) => b.portable_sessions);
  assert.deepEqual(sent, [false, false, true]);
});

test('launchers sharing a state directory share the host identity, also after a restart; another directory is another host', async (t) => {
  const { c } = await coordinator(t);
  const px = await proxy(t, c.url);
  const stateDir = tempDir(t);
  const first = await launcher(t, px.url, { stateDir });
  const second = await launcher(t, px.url, { stateDir, executor: resolveExecutor('demo', process.cwd()) });
  assert.equal(await first.launcher.shutdown(), 'shutdown');
  const restarted = await launcher(t, px.url, { stateDir });
  const elsewhere = await launcher(t, px.url);

  const ids = (px.bodies('/launcher/register') as RegisterLauncherRequest[]).map((b) => b.host_id);
  assert.equal(ids.length, 4);
  assert.equal(ids[0], first.launcher.hostId);
  assert.equal(ids[1], ids[0], 'two launchers on one state directory');
  assert.equal(ids[2], ids[0], 'the restarted launcher');
  assert.notEqual(ids[3], ids[0], 'a launcher with its own state directory');
  assert.equal(second.launcher.hostId, ids[0]);
  assert.equal(restarted.launcher.hostId, ids[0]);
  assert.equal(elsewhere.launcher.hostId, ids[3]);
});

test('a job outside the project roots is never offered; one that escapes through a symlink is refused by the launcher', async (t) => {
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url);
  const control = await controlServer(t);
  const base = realpathSync(tempDir(t));
  const root = join(base, 'served');
  const outside = join(base, 'private');
  mkdirSync(root);
  mkdirSync(outside);
  symlinkSync(outside, join(root, 'escape')); // a symlink inside the root that leads out of it
  await launcher(t, px.url, { projectRoots: [root] });

  // outside every root by its path: the coordinator never offers it, and says why
  for (const [i, dir] of [outside, join(root, '..', 'private'), '/nonexistent/elsewhere'].entries()) {
    const job = await client.createJob({
      type: 'start_session',
      session_name: `outside-${i}`,
      project_dir: dir,
      prompt: script([{ hello: true }], control),
    });
    const pending = await client.getJob(job.job_id);
    assert.equal(pending.status, 'pending', dir);
    assert.match(pending.pending_reason ?? '', /no online launcher serves /, dir);
  }

  // inside a root by its path, outside once the symlink is resolved: the launcher's own check
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'escape',
    project_dir: join(root, 'escape'),
    prompt: script([{ hello: true }], control),
  });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error_code, 'outside_project_roots');
  assert.match(done.error ?? '', /is outside this launcher's project roots/);
  assert.match(done.error ?? '', new RegExp(`it serves ${root}$`));
  const [failed] = px.bodies(`/launcher/jobs/${job.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.error_code, 'outside_project_roots');
  assert.equal(px.count((url) => url === `/launcher/jobs/${job.job_id}/started`), 0, 'never reported started');
  assert.equal(control.maxConnected, 0, 'no executor ever ran');
});

test('a job inside a root runs in its real directory, reported as working_dir in `started`', async (t) => {
  const { c, client } = await coordinator(t);
  const px = await proxy(t, c.url);
  const control = await controlServer(t);
  const root = realpathSync(tempDir(t));
  mkdirSync(join(root, 'app', 'src'), { recursive: true });
  symlinkSync(join(root, 'app'), join(root, 'app-link'));
  await launcher(t, px.url, { projectRoots: [root] });

  const cases: Array<[string | undefined, string]> = [
    [join(root, 'app-link', 'src'), join(root, 'app', 'src')], // a symlink inside the root
    ['app', join(root, 'app')], // relative: to the first root
    [undefined, root], // none: the first root
  ];
  for (const [i, [projectDir, expected]] of cases.entries()) {
    const job = await client.createJob({
      type: 'start_session',
      session_name: `inside-${i}`,
      ...(projectDir === undefined ? {} : { project_dir: projectDir }),
      prompt: script([{ hello: true }], control),
    });
    const hello = await control.next();
    assert.equal(hello.cwd, expected);
    assert.equal(hello.env['AGENTQ_PROJECT_DIR'], expected);
    assert.equal((await settled(client, job.job_id)).status, 'completed');
    const [started] = px.bodies(`/launcher/jobs/${job.job_id}/started`) as StartedReport[];
    assert.equal(started!.working_dir, expected);
  }
});
