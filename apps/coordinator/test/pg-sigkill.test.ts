import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SseMessage } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { clientOf, cluster, shellExecutor, spawnLauncher, tempDir, watch } from './cluster-helpers.js';
import type { CoordinatorProcess } from './coordinator-process.js';
import { eventJob } from './helpers.js';

/*
 * Losing a coordinator loses nothing (issue 15): three real coordinator processes on one
 * PostgreSQL database, eight real launcher processes that each know all three URLs, 2,000 jobs;
 * one coordinator is SIGKILLed a third of the way through. AGENTQ_TEST_PROGRESS=1 prints progress.
 */

test('SIGKILL of one of three coordinators during 2,000 jobs: each runs and ends exactly once', { timeout: 600_000 }, async (t) => {
  const nodes = await cluster(t, 3, { JOB_CLAIM_LEASE: '10' });
  if (!nodes) return;
  if (process.env.AGENTQ_TEST_PROGRESS) process.stderr.write(`${new Date().toISOString()} started\n`);
  const [A, B, C] = nodes as [CoordinatorProcess, CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const runs = join(dir, 'runs.txt');
  writeFileSync(runs, '');
  const exec = shellExecutor(dir, 'exec.sh', `echo "$AGENTQ_JOB_ID" >> ${runs}\necho '{"type":"result","text":"ok"}'`);
  const TOTAL = 2000;

  // watch from C, which survives: one global order of every coordinator's events
  const events = await watch(t, C.url);
  const coordinators = [A, B, C];
  const batches = await Promise.all(
    Array.from({ length: TOTAL / 100 }, async (_, i) => {
      const jobs = Array.from({ length: 100 }, (_, k) => ({ type: 'start_session', session_name: `s-${i * 100 + k}`, prompt: 'run' }));
      const res = await fetch(`${coordinators[i % 3]!.url}/jobs/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jobs }),
      });
      assert.equal(res.status, 201);
      return ((await res.json()) as { jobs: Job[] }).jobs.map((j) => j.job_id);
    }),
  );
  const ids = batches.flat();
  if (process.env.AGENTQ_TEST_PROGRESS) process.stderr.write(`${new Date().toISOString()} created ${ids.length}\n`);
  // eight launchers, each with all three URLs in its own order: four of them start on A
  const orders = [[A, B, C], [B, C, A], [C, A, B], [A, C, B], [A, B, C], [B, A, C], [C, B, A], [A, C, B]];
  await Promise.all(
    orders.map((o, i) => spawnLauncher(t, dir, `l${i}`, ['--url', o.map((x) => x.url).join(','), '--executor', exec, '--max-jobs', '1'])),
  );

  const completed = new Map<string, number>();
  const started = new Map<string, number>();
  const count = (map: Map<string, number>, m: SseMessage) => map.set(eventJob(m).job_id, (map.get(eventJob(m).job_id) ?? 0) + 1);
  let third!: () => void;
  let all!: () => void;
  const aThird = new Promise<void>((resolve) => (third = resolve));
  const allDone = new Promise<void>((resolve) => (all = resolve));
  events.onMessage((m) => {
    if (m.event === 'job.started') count(started, m);
    if (m.event !== 'job.completed') return;
    count(completed, m);
    if (process.env.AGENTQ_TEST_PROGRESS && completed.size % 100 === 0) process.stderr.write(`${new Date().toISOString()} completed ${completed.size}\n`);
    if (completed.size >= TOTAL / 3) third();
    if (completed.size >= TOTAL) all();
  });
  await aThird;
  await A.kill(); // mid-run: its parked polls, answers in flight and open transactions die with it
  if (process.env.AGENTQ_TEST_PROGRESS) process.stderr.write(`${new Date().toISOString()} killed A\n`);
  await allDone;

  assert.deepEqual([...completed.keys()].sort(), [...ids].sort(), 'every job completed');
  assert.ok([...completed.values()].every((n) => n === 1), 'each job.completed once');
  assert.ok([...started.values()].every((n) => n === 1), 'each job.started once');
  const ran = readFileSync(runs, 'utf8').trim().split('\n');
  assert.equal(ran.length, TOTAL, 'no executor ran twice');
  assert.deepEqual([...new Set(ran)].sort(), [...ids].sort(), 'every job ran, each once');
  const b = clientOf(t, B.url);
  let cursor: string | undefined;
  let terminal = 0;
  do {
    const page = await b.listJobs({ limit: 500, ...(cursor ? { cursor } : {}) });
    for (const j of page.jobs) {
      assert.equal(j.status, 'completed');
      terminal++;
    }
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  assert.equal(terminal, TOTAL);
});
