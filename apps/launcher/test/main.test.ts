import assert from 'node:assert/strict';
import { test } from 'node:test';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { controlServer, coordinator, fixture, gone, script, settled, tempDir } from './helpers.js';
import { spawnLauncher } from './spawn-launcher.js';

test('SIGTERM with a running job: no new jobs, the running one may finish within the grace period, exit 0', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--shutdown-grace', '60']);
  const ready = await l.logged(/launcher ready/);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'draining',
    prompt: script([{ hello: true }, { await: true }, { event: { type: 'result', text: 'finished in time' } }], control),
  });
  const hello = await control.next();
  l.child.kill('SIGTERM');
  await l.logged(/signal received/);
  hello.release();
  assert.deepEqual(await l.exited, { code: 0, signal: null });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'finished in time');
  const launchers = await client.listLaunchers();
  assert.equal(launchers.launchers.find((x) => x.launcher_id === ready['launcher_id'])?.status ?? 'gone', 'gone');
});

test('SIGTERM when the grace period runs out: the job is killed and reported failed, then exit 0', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const l = spawnLauncher(t, [
    '--url',
    c.url,
    '--executor',
    fixture('executor.js'),
    '--shutdown-grace',
    '0',
    '--kill-grace',
    '0.2',
  ]);
  await l.logged(/launcher ready/);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'cut-off',
    prompt: script([{ ignore: 'SIGTERM' }, { hello: true }, { await: true }], control),
  });
  const hello = await control.next();
  l.child.kill('SIGTERM');
  assert.deepEqual(await l.exited, { code: 0, signal: null });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /launcher shutting down: the job was interrupted \(executor ended by SIGKILL\)/);
  assert.equal(done.error_code, 'launcher_shutdown', 'for programs: not an agent failure');
  await hello.closed;
});

test('a second signal forces exit at once and kills the executors\' process groups', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--shutdown-grace', '600']);
  await l.logged(/launcher ready/);
  await client.createJob({
    type: 'start_session',
    session_name: 'forced',
    prompt: script([{ ignore: 'SIGTERM' }, { hello: true }, { await: true }], control),
  });
  const hello = await control.next();
  l.child.kill('SIGINT');
  await l.logged(/signal received/);
  l.child.kill('SIGINT');
  assert.deepEqual(await l.exited, { code: 1, signal: null });
  await hello.closed;
  // its socket closes as it dies, a moment before it is gone
  await gone(hello.pid, 'the executor');
  await gone(-hello.pid, "the executor's process group");
});

test('SIGTERM while the coordinator is unreachable: the launcher stops retrying and exits 0', async (t) => {
  const { c } = await coordinator(t);
  await c.close(); // a port nobody listens on any more
  const l = spawnLauncher(t, ['--url', c.url, '--executor', 'demo']);
  await l.logged(/coordinator unreachable/);
  l.child.kill('SIGTERM');
  assert.deepEqual(await l.exited, { code: 0, signal: null });
});

test('a bad option exits 2 with a message naming it', async (t) => {
  const l = spawnLauncher(t, ['--max-jobs', 'zero']);
  assert.deepEqual(await l.exited, { code: 2, signal: null });
  assert.match(l.stderr(), /--max-jobs: expected an integer from 1 to 1000, got "zero"/);
});

test('a bad environment variable exits 2 naming the variable', async (t) => {
  const l = spawnLauncher(t, [], { AGENTQ_EXECUTOR: 'no-such-executor' });
  assert.deepEqual(await l.exited, { code: 2, signal: null });
  assert.match(l.stderr(), /AGENTQ_EXECUTOR: unknown executor "no-such-executor"/);
});

test('a state directory that cannot be used (a file where it should be, a broken host-id) exits 2 naming --state-dir, with no stack trace', async (t) => {
  const { c } = await coordinator(t);
  const dir = tempDir(t);
  const file = join(dir, 'not-a-dir');
  writeFileSync(file, 'x');
  const broken = join(dir, 'broken');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(broken);
  writeFileSync(join(broken, 'host-id'), 'no good\n');
  for (const stateDir of [file, broken]) {
    const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js')], { AGENTQ_STATE_DIR: stateDir });
    assert.deepEqual(await l.exited, { code: 2, signal: null }, l.stderr());
    assert.match(l.stderr(), new RegExp(`^agentq-launcher: --state-dir / AGENTQ_STATE_DIR: ${stateDir} cannot be used as the launcher's state directory: `, 'm'));
    assert.doesNotMatch(l.stderr(), /\n\s+at /, 'no stack trace');
  }
});

test('SIGTERM after whatever reads its log went away (stdout a broken pipe): the launcher still exits', async (t) => {
  const { c } = await coordinator(t);
  await c.close(); // a port nobody listens on any more
  const l = spawnLauncher(t, ['--url', c.url, '--executor', 'demo']);
  await l.logged(/coordinator unreachable/);
  // `agentq-launcher | head`, or a log shipper that died: every later write fails with EPIPE
  l.child.stdout!.destroy();
  l.child.kill('SIGTERM');
  assert.deepEqual(await l.exited, { code: 0, signal: null });
});
