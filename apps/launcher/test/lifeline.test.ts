import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { alive, captureLog, controlServer, coordinator, fixture, gone, launcher, script, tempDir } from './helpers.js';
import { proxy } from './proxy.js';
import { spawnLauncher } from './spawn-launcher.js';
import { bootId, startTimeOf } from '../src/lifeline/proc.js';
import { loadHostId } from '../src/state-dir.js';

const records = (stateDir: string) => readdirSync(join(stateDir, 'processes')).filter((n) => n.endsWith('.json'));
/** The one record in the state directory (undefined when there is none, or while it is rewritten). */
function recordOf(stateDir: string): { groups: unknown[]; launcher_ids?: string[] } | undefined {
  const [name, ...more] = records(stateDir);
  assert.equal(more.length, 0, 'one record');
  if (name === undefined) return undefined;
  try {
    return JSON.parse(readFileSync(join(stateDir, 'processes', name), 'utf8')) as { groups: unknown[]; launcher_ids?: string[] };
  } catch {
    return undefined;
  }
}

test('executors die with a launcher killed by SIGKILL (the lifeline), including one that ignores SIGTERM', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const stateDir = join(tempDir(t), 'state');
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--kill-grace', '0.3'], {
    AGENTQ_STATE_DIR: stateDir,
  });
  await l.logged(/launcher ready/);
  const steps = [
    [{ hello: true }, { await: true }],
    [{ hello: true }, { await: true }],
    [{ ignore: 'SIGTERM' }, { hello: true }, { await: true }],
    [{ hello: true }, { await: true }],
  ];
  for (const [i, s] of steps.entries()) {
    await client.createJob({ type: 'start_session', session_name: `lifeline-${i}`, prompt: script(s, control) });
  }
  const hellos = [await control.next(), await control.next(), await control.next(), await control.next()];
  assert.equal(records(stateDir).length, 1, 'the launcher keeps a record of its executors');

  l.child.kill('SIGKILL');
  await l.exited;
  for (const h of hellos) {
    await gone(h.pid, `executor of ${h.job_id}`);
    await gone(-h.pid, `process group of ${h.job_id}`);
  }
  // the reaper left the record, which names the launcher that is gone, for the next one
  assert.deepEqual(recordOf(stateDir)?.launcher_ids, [(await client.listLaunchers()).launchers[0]?.launcher_id]);
});

// The reaper's SIGKILL after the grace reached the executor's process group only: a process the
// executor runs in a session of its own (as claude runs its Bash commands) ran on, init's child.
test('the lifeline\'s SIGKILL takes the processes an executor ignoring SIGTERM started outside its group', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--kill-grace', '0.3'], {
    AGENTQ_STATE_DIR: join(tempDir(t), 'state'),
  });
  await l.logged(/launcher ready/);
  await client.createJob({
    type: 'start_session',
    session_name: 'escaped',
    prompt: script([{ ignore: 'SIGTERM' }, { daemon: true }, { hello: true }, { await: true }], control),
  });
  const hello = await control.next();
  assert.ok(hello.daemon_pid, 'the executor started its process');
  // a `sleep 600` the reaper failed to kill does not outlive the test
  t.after(() => {
    if (alive(hello.daemon_pid!)) process.kill(hello.daemon_pid!, 'SIGKILL');
  });
  l.child.kill('SIGKILL');
  await l.exited;
  await gone(hello.pid, 'the executor');
  await gone(hello.daemon_pid, 'the process it started outside its group');
});

test('a launcher restarted after a SIGKILL replaces its earlier life: its running job ends interrupted at once, not at the heartbeat timeout', async (t) => {
  const { c, client } = await coordinator(t, { heartbeatTimeoutSeconds: 600 });
  const control = await controlServer(t);
  const stateDir = join(tempDir(t), 'state');
  const args = ['--url', c.url, '--executor', fixture('executor.js'), '--kill-grace', '0.3'];
  const first = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  const oldId = String((await first.logged(/launcher ready/))['launcher_id']);
  const job = await client.createJob({ type: 'start_session', session_name: 'replaced', prompt: script([{ hello: true }, { await: true }], control) });
  const hello = await control.next();
  first.child.kill('SIGKILL');
  await first.exited;
  await gone(-hello.pid, 'the executor, ended by the reaper');

  const second = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  const registered = await second.logged(/^registered$/);
  assert.deepEqual(registered['replaced'], [oldId]);
  const ended = await client.getJob(job.job_id);
  assert.equal(ended.status, 'interrupted');
  assert.match(ended.error ?? '', /replaced by lnch_/);
  const launchers = (await client.listLaunchers()).launchers.map((l) => l.launcher_id);
  assert.deepEqual(launchers, [registered['launcher_id']], 'the old launcher is gone from the list');
  await second.logged(/launcher ready/);
  assert.deepEqual(recordOf(stateDir)?.launcher_ids, [registered['launcher_id']], "only the new launcher's record is left");
});

test('a launcher that could not deregister itself keeps its record: the next one replaces it at once, not at the heartbeat timeout', async (t) => {
  const { c, client } = await coordinator(t, { heartbeatTimeoutSeconds: 600 });
  // its self-deregistration is refused (the coordinator failing, or a proxy in front of it)
  const p = await proxy(t, c.url, (req) => (req.method === 'DELETE' ? { status: 500, code: 'internal_error' } : false));
  const stateDir = join(tempDir(t), 'state');
  const first = spawnLauncher(t, ['--url', p.url, '--executor', 'demo'], { AGENTQ_STATE_DIR: stateDir });
  const oldId = String((await first.logged(/launcher ready/))['launcher_id']);
  first.child.kill('SIGTERM');
  await first.logged(/could not deregister/);
  assert.deepEqual(await first.exited, { code: 0, signal: null });
  assert.equal((await client.listLaunchers()).launchers[0]?.launcher_id, oldId, 'the coordinator still lists it');

  const second = spawnLauncher(t, ['--url', c.url, '--executor', 'demo'], { AGENTQ_STATE_DIR: stateDir });
  const registered = await second.logged(/^registered$/);
  assert.deepEqual(registered['replaced'], [oldId]);
  const launchers = (await client.listLaunchers()).launchers.map((l) => l.launcher_id);
  assert.deepEqual(launchers, [registered['launcher_id']], 'the old launcher is gone from the list');
});

test('a launcher that deregistered itself leaves no record: the next one replaces nobody', async (t) => {
  const { c } = await coordinator(t);
  const stateDir = join(tempDir(t), 'state');
  const args = ['--url', c.url, '--executor', 'demo'];
  const first = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  await first.logged(/launcher ready/);
  first.child.kill('SIGTERM');
  assert.deepEqual(await first.exited, { code: 0, signal: null });
  assert.equal(records(stateDir).length, 0, 'the record is deleted');
  const second = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  const registered = await second.logged(/^registered$/);
  assert.equal(registered['replaced'], undefined);
});

test('a restarted launcher ends the executors its previous life left running (lifeline reaper gone too)', async (t) => {
  const { c, client } = await coordinator(t);
  const control = await controlServer(t);
  const stateDir = join(tempDir(t), 'state');
  const args = ['--url', c.url, '--executor', fixture('executor.js'), '--kill-grace', '0.3'];
  const first = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  const ready = await first.logged(/launcher ready/);
  const reaperPid = Number(ready['reaper_pid']);
  assert.ok(alive(reaperPid), 'the reaper runs beside the launcher');
  for (let i = 0; i < 2; i++) {
    await client.createJob({
      type: 'start_session',
      session_name: `leftover-${i}`,
      prompt: script([{ ignore: 'SIGTERM' }, { hello: true }, { await: true }], control),
    });
  }
  const hellos = [await control.next(), await control.next()];
  // a death the lifeline cannot cover: the reaper killed first (the launcher held still meanwhile
  // so that it cannot start a new one), then the launcher
  first.child.kill('SIGSTOP');
  process.kill(reaperPid, 'SIGKILL');
  await gone(reaperPid, 'the reaper');
  first.child.kill('SIGKILL');
  await first.exited;
  for (const h of hellos) assert.ok(alive(h.pid), 'the executor outlived its launcher');

  const second = spawnLauncher(t, args, { AGENTQ_STATE_DIR: stateDir });
  const ended = await second.logged(/ended executors left running by a launcher that is gone/);
  assert.deepEqual(
    (ended['groups'] as Array<{ pgid: number }>).map((g) => g.pgid).sort(),
    hellos.map((h) => h.pid).sort(),
  );
  for (const h of hellos) await gone(-h.pid, `process group of ${h.job_id}`);
  await second.logged(/launcher ready/);
  assert.equal(records(stateDir).length, 1, "only the new launcher's record is left");
});

test('the launchers a dead launcher had yet to replace are handed on: the next launcher replaces them too (another boot included)', async (t) => {
  const { client, c } = await coordinator(t, { heartbeatTimeoutSeconds: 600 });
  const stateDir = tempDir(t);
  const hostId = loadHostId(stateDir);
  const body = { hostname: 'box', executor_type: 'test', host_id: hostId };
  const [earlier, previous] = [await client.register(body), await client.register(body)];
  // the record of a launcher from before a reboot: registered as `previous`, it died before it
  // could tell the coordinator about `earlier`
  mkdirSync(join(stateDir, 'processes'), { recursive: true });
  writeFileSync(
    join(stateDir, 'processes', '4000000-deadbeef.json'),
    JSON.stringify({
      version: 1,
      boot_id: 'another-boot',
      launcher: { pid: 4_000_000, start_time: '1' },
      groups: [],
      launcher_ids: [previous.launcher_id],
      predecessors: [earlier.launcher_id],
    }),
  );
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js')], { AGENTQ_STATE_DIR: stateDir });
  const registered = await l.logged(/^registered$/);
  assert.deepEqual(registered['replaced'], [earlier.launcher_id, previous.launcher_id]);
  assert.deepEqual((await client.listLaunchers()).launchers.map((x) => x.launcher_id), [registered['launcher_id']]);
});

test('a record of another PID namespace (another container sharing the state directory) is left alone: neither replaced nor signalled', async (t) => {
  const { client, c } = await coordinator(t, { heartbeatTimeoutSeconds: 600 });
  const stateDir = tempDir(t);
  const hostId = loadHostId(stateDir);
  const body = { hostname: 'box', executor_type: 'test', host_id: hostId };
  const [other, beforeReboot] = [await client.register(body), await client.register(body)];
  // a group of our own, recorded by the other container under a pid that means nothing here
  const group = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  t.after(() => {
    group.kill('SIGKILL'); // our child: a no-op once it has exited, never another process's id
  });
  mkdirSync(join(stateDir, 'processes'), { recursive: true });
  const record = (name: string, bootIdOf: string, launcherId: string) =>
    writeFileSync(
      join(stateDir, 'processes', name),
      JSON.stringify({
        version: 1,
        boot_id: bootIdOf,
        pid_ns: 'pid:[1]',
        // pid 1 of its namespace: here, a process that runs with another start time
        launcher: { pid: 1, start_time: 'its-own' },
        groups: [{ pgid: group.pid, start_time: startTimeOf(group.pid!), job_id: 'job_00000000000c' }],
        launcher_ids: [launcherId],
      }),
    );
  record('1-aaaaaaaa.json', bootId(), other.launcher_id);
  // one of another boot is gone whatever its namespace: replaced (its groups are long gone)
  record('1-bbbbbbbb.json', 'another-boot', beforeReboot.launcher_id);
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js')], { AGENTQ_STATE_DIR: stateDir });
  const registered = await l.logged(/^registered$/);
  assert.deepEqual(registered['replaced'], [beforeReboot.launcher_id]);
  const listed = (await client.listLaunchers()).launchers.map((x) => x.launcher_id).sort();
  assert.deepEqual(listed, [other.launcher_id, registered['launcher_id']].sort());
  assert.ok(alive(group.pid!), 'the other container\'s executor is not signalled');
  assert.ok(existsSync(join(stateDir, 'processes', '1-aaaaaaaa.json')), 'its record stays');
  assert.equal(existsSync(join(stateDir, 'processes', '1-bbbbbbbb.json')), false);
});

test('leftovers are checked against their recorded start time: a reused process id is never signalled', async (t) => {
  const { c } = await coordinator(t);
  const stateDir = tempDir(t);
  // two process groups of their own, as executors run in
  const reused = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  const leftover = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  t.after(() => {
    for (const p of [reused, leftover]) p.kill('SIGKILL'); // our children: no-ops once they have exited
  });
  // the record of a launcher that is gone: one group recorded with another start time (its id was
  // given to an unrelated process since), one that is still the group it started
  mkdirSync(join(stateDir, 'processes'), { recursive: true });
  writeFileSync(
    join(stateDir, 'processes', '4000000-deadbeef.json'),
    JSON.stringify({
      version: 1,
      boot_id: bootId(),
      launcher: { pid: 4_000_000, start_time: '1' },
      groups: [
        { pgid: reused.pid, start_time: 'not-its-start-time', job_id: 'job_00000000000a' },
        { pgid: leftover.pid, start_time: startTimeOf(leftover.pid!), job_id: 'job_00000000000b' },
      ],
    }),
  );
  const { log, waitFor } = captureLog();
  await launcher(t, c.url, { stateDir }, { log });
  const ended = await waitFor((l) => /ended executors left running/.test(String(l['msg'])));
  assert.deepEqual(ended['groups'], [{ pgid: leftover.pid, job_id: 'job_00000000000b' }]);
  await gone(leftover.pid!, 'the leftover');
  assert.ok(alive(reused.pid!), 'the process that got a recorded id is untouched');
  assert.equal(existsSync(join(stateDir, 'processes', '4000000-deadbeef.json')), false, 'the stale record is gone');
});

test('a launcher that was killed but not yet reaped (a zombie) counts as gone: its leftovers are ended', async (t) => {
  const { c } = await coordinator(t);
  const stateDir = tempDir(t);
  // the dead launcher: a process whose parent does not reap it (sh execs into a sleep that never
  // waits for the child sh started), so it stays a zombie with its pid and start time
  const parent = spawn('sh', ['-c', 'sleep 0.01 & echo $!; exec sleep 600'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const leftover = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
  t.after(() => {
    for (const p of [parent, leftover]) p.kill('SIGKILL'); // our children: no-ops once they have exited
  });
  const zombie = Number((await new Promise<Buffer>((resolve) => parent.stdout!.once('data', resolve))).toString().trim());
  const zombieStart = startTimeOf(zombie);
  await gone(zombie, 'the dead launcher');
  assert.equal(startTimeOf(zombie), zombieStart, 'its pid still shows, with the same start time');
  mkdirSync(join(stateDir, 'processes'), { recursive: true });
  writeFileSync(
    join(stateDir, 'processes', `${zombie}-deadbeef.json`),
    JSON.stringify({
      version: 1,
      boot_id: bootId(),
      launcher: { pid: zombie, start_time: zombieStart },
      groups: [{ pgid: leftover.pid, start_time: startTimeOf(leftover.pid!), job_id: 'job_00000000000c' }],
    }),
  );
  const { log, lines } = captureLog();
  // leftovers are ended before the launcher registers
  await launcher(t, c.url, { stateDir, killGraceMs: 300 }, { log });
  const ended = lines.find((l) => /ended executors left running/.test(String(l['msg'])));
  assert.deepEqual(ended?.['groups'], [{ pgid: leftover.pid, job_id: 'job_00000000000c' }]);
  await gone(leftover.pid!, 'the leftover');
  assert.equal(existsSync(join(stateDir, 'processes', `${zombie}-deadbeef.json`)), false, 'the dead launcher\'s record is gone');
});
