import assert from 'node:assert/strict';
import { mkdirSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { ManualClock } from '@agentq/coordinator';
import { coordinator, launcher, script, settled, tempDir } from './helpers.js';

/*
 * Routing over real HTTP with real launchers (docs/routing.md): labels and `requires`, project
 * roots, session affinity (also across a launcher restart with the same state directory), the
 * schedule timeout and pending_reason.
 */

const ok = (text = 'ok') => script([{ event: { type: 'result', text } }]);

async function run(client: AgentqClient, body: Parameters<AgentqClient['createJob']>[0]): Promise<Job> {
  const job = await client.createJob(body);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', `${job.job_id}: ${done.error ?? ''}`);
  return done;
}

test('a job with `requires` only ever goes to a launcher with every required label', async (t) => {
  const { c, client } = await coordinator(t);
  const root = realpathSync(tempDir(t));
  const plain = await launcher(t, c.url, { projectRoots: [root], labels: { zone: 'a' } });
  const gpu = await launcher(t, c.url, { projectRoots: [root], labels: { zone: 'a', gpu: 'a100' } });

  const listed = (await client.listLaunchers()).launchers.find((l) => l.launcher_id === gpu.id)!;
  assert.equal(listed.labels.gpu, 'a100');
  assert.equal(listed.labels.executor, listed.executor_type);
  assert.ok(listed.labels.hostname && listed.labels.os && listed.labels.arch, 'built-in labels');
  assert.deepEqual(listed.project_roots, [root]);

  const jobs = await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      client.createJob({ type: 'start_session', session_name: `gpu-${i}`, prompt: ok(), requires: { gpu: 'a100', zone: 'a' } }),
    ),
  );
  const free = await Promise.all(
    Array.from({ length: 8 }, (_, i) => client.createJob({ type: 'start_session', session_name: `any-${i}`, prompt: ok() })),
  );
  for (const job of jobs) {
    const done = await settled(client, job.job_id);
    assert.equal(done.launcher_id, gpu.id, `${job.job_id} ran on the gpu launcher`);
    assert.deepEqual(done.requires, { gpu: 'a100', zone: 'a' });
  }
  for (const job of free) assert.equal((await settled(client, job.job_id)).status, 'completed');

  // no launcher has it: the job waits, and says why
  const h100 = await client.createJob({ type: 'start_session', session_name: 'h100', prompt: ok(), requires: { gpu: 'h100' } });
  assert.equal((await client.getJob(h100.job_id)).pending_reason, 'no online launcher has gpu=h100');
  assert.ok(plain.id);
});

test('resumes and callback resumes go back to the host that ran the session, also after its launcher restarts with the same state directory', async (t) => {
  const { c, client } = await coordinator(t);
  const root = realpathSync(tempDir(t));
  const stateA = join(tempDir(t), 'a');
  const stateB = join(tempDir(t), 'b');
  mkdirSync(stateA);
  mkdirSync(stateB);
  let a = await launcher(t, c.url, { projectRoots: [root], stateDir: stateA, hostname: 'host-a' });
  const b = await launcher(t, c.url, { projectRoots: [root], stateDir: stateB, hostname: 'host-b' });
  const hostOf = new Map<string, string>();
  for (const l of (await client.listLaunchers()).launchers) hostOf.set(l.launcher_id, l.host_id!);
  assert.notEqual(hostOf.get(a.id), hostOf.get(b.id), 'two state directories, two hosts');

  // the first job goes where it goes; from then on the session lives there
  const first = await run(client, { type: 'start_session', session_name: 'parent', prompt: ok('started') });
  const home = hostOf.get(first.launcher_id!)!;
  const session = await client.getSession('parent');
  assert.equal(session.affinity?.host_id, home);
  assert.equal(session.affinity?.working_dir, root);
  for (let i = 0; i < 6; i++) {
    const again = await run(client, { type: 'resume_session', session_name: 'parent', prompt: ok(`turn ${i}`) });
    assert.equal(hostOf.get(again.launcher_id!), home, `resume ${i} ran on the session's host`);
  }
  // a child anywhere; its callback resume of the parent goes to the parent's host
  await run(client, { type: 'start_session', session_name: 'child', prompt: ok('child done'), parent_session_name: 'parent' });
  // the child's completion created the callback job in the same commit: it exists now
  const callbackId = await lastCallback(client);
  assert.ok(callbackId, 'a callback resume was queued for the parent');
  const callback = await settled(client, callbackId);
  assert.deepEqual(callback.callback_of?.length, 1);
  assert.equal(hostOf.get(callback.launcher_id!), home, 'the callback resume ran on the parent\u2019s host');

  // the home launcher goes away: the resume waits (the other host cannot take it) and says why
  const homeLauncher = first.launcher_id === a.id ? a : b;
  await homeLauncher.launcher.shutdown();
  const waiting = await client.createJob({ type: 'resume_session', session_name: 'parent', prompt: ok('after restart') });
  const pending = await client.getJob(waiting.job_id);
  assert.equal(pending.status, 'pending');
  assert.match(pending.pending_reason ?? '', /^session lives on host host-[ab], which is offline$/);
  // ...and a new launcher with the same state directory (same host identity) takes it
  const again = await launcher(t, c.url, {
    projectRoots: [root],
    stateDir: homeLauncher === a ? stateA : stateB,
    hostname: homeLauncher === a ? 'host-a' : 'host-b',
  });
  if (homeLauncher === a) a = again;
  const done = await settled(client, waiting.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.launcher_id, again.id);
  assert.notEqual(again.id, homeLauncher.id, 'a new launcher id, the same host');
});

test('a job for a directory outside every root is never claimed, says why, and fails after JOB_SCHEDULE_TIMEOUT with no_matching_launcher', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await coordinator(t, { scheduleTimeoutSeconds: 600, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const root = realpathSync(tempDir(t));
  await launcher(t, c.url, { projectRoots: [root] });
  const outside = join(realpathSync(tempDir(t)), 'elsewhere');
  const job = await client.createJob({ type: 'start_session', session_name: 'nowhere', prompt: ok(), project_dir: outside });
  const inside = await run(client, { type: 'start_session', session_name: 'somewhere', prompt: ok(), project_dir: join(root, '.') });
  assert.equal(inside.status, 'completed', 'the launcher is working');

  await c.core.sweep(); // the sweeper sees the route unserved from now on
  const pending = await client.getJob(job.job_id);
  assert.equal(pending.status, 'pending');
  assert.equal(pending.pending_reason, `no online launcher serves ${outside}`);
  clock.advance(599_000);
  await c.core.sweep();
  assert.equal((await client.getJob(job.job_id)).status, 'pending', 'not before the timeout');
  clock.advance(1_000);
  await c.core.sweep();
  const failed = await client.getJob(job.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error_code, 'no_matching_launcher');
  assert.match(failed.error ?? '', /no launcher could take it within 600 s: no online launcher serves /);
  assert.equal(failed.launcher_id, null, 'never claimed');
});

/** The newest callback job of the parent (once the callback has been created and maybe already run). */
async function lastCallback(client: AgentqClient): Promise<string | null> {
  const { jobs } = await client.listJobs({ session_name: 'parent', limit: 5 });
  return jobs.find((j) => j.callback_of !== null)?.job_id ?? null;
}
