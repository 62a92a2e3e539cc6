import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { AgentqClient, AgentqConnectionError, type SseMessage } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { clientOf, cluster, watch } from './cluster-helpers.js';
import type { CoordinatorProcess } from './coordinator-process.js';
import { eventJob } from './helpers.js';

/*
 * Losing a coordinator loses nothing (issue 15): three real coordinator processes on one
 * PostgreSQL database, 2,000 jobs, eight launchers that each know all three URLs (in their own
 * order) and one of the coordinators SIGKILLed a third of the way through. The launchers are
 * played here with the project's client, so the test sees every job each of them was handed
 * and started. A job may be handed out again only when its claim lease ran out before any
 * launcher started it (an answer lost with the coordinator, or a launcher too slow to start it):
 * then the first launcher's `started` is refused and it does not run the job, exactly as the
 * real launcher does. So every job is started once and completes once, whatever happens. (A
 * real launcher process failing over is in pg-cluster.test.ts.) AGENTQ_TEST_PROGRESS=1 prints
 * progress.
 */

const progress = (what: string) => {
  if (process.env.AGENTQ_TEST_PROGRESS) process.stderr.write(`${new Date().toISOString()} ${what}\n`);
};

/** Retry while no coordinator can be reached (the one it used was killed): what a launcher does. */
async function persist<T>(call: () => Promise<T>, signal: AbortSignal): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof AgentqConnectionError) || signal.aborted) throw err;
      await sleep(20);
    }
  }
}

test('SIGKILL of one of three coordinators during 2,000 jobs: every job runs and ends exactly once, none lost', { timeout: 300_000 }, async (t) => {
  const nodes = await cluster(t, 3, { JOB_CLAIM_LEASE: '15' });
  if (!nodes) return;
  const [A, B, C] = nodes as [CoordinatorProcess, CoordinatorProcess, CoordinatorProcess];
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
  progress(`created ${ids.length}`);

  const completed = new Map<string, number>();
  const count = (map: Map<string, number>, id: string) => map.set(id, (map.get(id) ?? 0) + 1);
  let third!: () => void;
  let all!: () => void;
  const aThird = new Promise<void>((resolve) => (third = resolve));
  const allDone = new Promise<void>((resolve) => (all = resolve));
  events.onMessage((m: SseMessage) => {
    if (m.event !== 'job.completed') return;
    count(completed, eventJob(m).job_id);
    if (completed.size % 200 === 0) progress(`completed ${completed.size}`);
    if (completed.size >= TOTAL / 3) third();
    if (completed.size >= TOTAL) all();
  });

  // eight launchers, each with all three URLs in its own order: four of them start on A
  const orders = [[A, B, C], [B, C, A], [C, A, B], [A, C, B], [A, B, C], [B, A, C], [C, B, A], [A, C, B]];
  const handed = new Map<string, string[]>();
  /** jobs whose `started` the coordinators accepted, and from whom */
  const ran = new Map<string, string[]>();
  const stop = new AbortController();
  t.after(() => stop.abort());
  const launchers = orders.map(async (order, i) => {
    const client = new AgentqClient({ url: order.map((x) => x.url).join(',') });
    t.after(() => client.destroy());
    const { launcher_id } = await persist(() => client.register({ hostname: `l${i}` }), stop.signal);
    while (!stop.signal.aborted) {
      let answer;
      try {
        answer = await persist(() => client.poll(launcher_id, { capacity: 4, holdSeconds: 600, signal: stop.signal }), stop.signal);
      } catch (err) {
        if (stop.signal.aborted) return;
        throw err;
      }
      const jobs = answer?.jobs ?? [];
      // like a launcher: every job it was handed starts at once, then each reports its end
      const running: Job[] = [];
      for (const job of jobs) {
        handed.set(job.job_id, [...(handed.get(job.job_id) ?? []), launcher_id]);
        try {
          await persist(() => client.reportStarted(job.job_id, { launcher_id }), stop.signal);
        } catch (err) {
          // its lease ran out and another launcher has it: not run here (the real launcher's way)
          if ((err as { code?: string }).code === 'job_owned_by_other_launcher') continue;
          throw err;
        }
        ran.set(job.job_id, [...(ran.get(job.job_id) ?? []), launcher_id]);
        running.push(job);
      }
      for (const job of running) {
        await persist(() => client.reportCompleted(job.job_id, { launcher_id, status: 'success', result: 'ok' }), stop.signal);
      }
    }
  });
  const failed = Promise.all(launchers).then(
    () => undefined,
    (err: unknown) => err,
  );

  await Promise.race([aThird, failed]);
  await A.kill(); // mid-run: its parked polls, answers in flight and open transactions die with it
  progress('killed A');
  const error = await Promise.race([allDone, failed]);
  assert.equal(error, undefined, `a launcher failed: ${String(error)}`);
  stop.abort();

  assert.deepEqual([...completed.keys()].sort(), [...ids].sort(), 'every job completed, none lost');
  assert.ok([...completed.values()].every((n) => n === 1), 'each job.completed once');
  assert.equal(ran.size, TOTAL);
  const twice = [...ran].filter(([, by]) => by.length > 1);
  assert.deepEqual(twice, [], 'no job started by two launchers (or twice by one)');
  assert.equal(handed.size, TOTAL);
  // handed out again only after a lease ran out: at most the answers lost with A, and slow starts
  progress(`handed out more than once: ${[...handed.values()].filter((to) => to.length > 1).length}`);
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
