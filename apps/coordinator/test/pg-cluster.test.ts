import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient, type SseMessage } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { spawnCoordinatorProcess, type CoordinatorProcess } from './coordinator-process.js';
import { eventJob, fakeLauncher, openEvents } from './helpers.js';
import { freshDatabaseUrl } from './pg-server.js';

/*
 * Several real coordinator processes on one PostgreSQL database (issue 15). Polls are held for
 * ten minutes and heartbeats are rare, so a job or a stop that reaches a launcher parked on
 * another coordinator within the test can only have been carried by the commit notification.
 */

const LAUNCHER_MAIN = fileURLToPath(new URL('../../../launcher/dist/src/main.js', import.meta.url));
const SLOW = { LAUNCHER_POLL_TIMEOUT: '600', LAUNCHER_HEARTBEAT_INTERVAL: '300', LAUNCHER_HEARTBEAT_TIMEOUT: '900' };

/** `n` coordinators started at the same time on a fresh database (they migrate one at a time). */
async function cluster(t: TestContext, n: number, env: Record<string, string> = {}): Promise<CoordinatorProcess[] | null> {
  const url = await freshDatabaseUrl(t);
  if (url === null) return null;
  return Promise.all(Array.from({ length: n }, () => spawnCoordinatorProcess(t, { DATABASE_URL: url, ...SLOW, ...env })));
}

function clientOf(t: TestContext, url: string): AgentqClient {
  const client = new AgentqClient({ url });
  t.after(() => client.destroy());
  return client;
}

function tempDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-cluster-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** An executor program (the contract: invocation on stdin, JSON events on stdout) in sh. */
function shellExecutor(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\ncat > /dev/null\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** The real launcher program; resolves with its id once registered. Killed when the test ends. */
async function spawnLauncher(t: TestContext, dir: string, name: string, args: string[]): Promise<string> {
  const state = mkdtempSync(join(dir, `state-${name}-`));
  const child = spawn(process.execPath, [LAUNCHER_MAIN, '--hostname', name, '--project-dir', dir, '--state-dir', state, ...args], {
    env: { PATH: process.env.PATH ?? '', AGENTQ_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += String(d)));
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (text) => {
      try {
        const line = JSON.parse(text) as { msg?: string; launcher_id?: string };
        if (line.msg === 'registered' || (line.launcher_id && /regist/.test(line.msg ?? ''))) resolve(line.launcher_id!);
      } catch {
        // not a log line
      }
    });
    child.once('exit', (code) => reject(new Error(`launcher ${name} exited (${code}): ${stderr}`)));
  });
}

/**
 * An SSE stream read in the background: `opened` resolves once the coordinator accepted it
 * (every event from then on comes); `until` resolves with the first message, from the start,
 * that `match` accepts; `onMessage` sees each as it arrives.
 */
async function watch(t: TestContext, url: string) {
  const events = openEvents(t, url);
  const seen: SseMessage[] = [];
  const waiters = new Set<() => void>();
  const listeners = new Set<(m: SseMessage) => void>();
  void (async () => {
    for (;;) {
      let m: SseMessage;
      try {
        m = await events.next();
      } catch {
        return; // closed at the end of the test
      }
      seen.push(m);
      for (const l of listeners) l(m);
      for (const w of [...waiters]) w();
    }
  })();
  await events.opened;
  return {
    until(match: (m: SseMessage) => boolean): Promise<SseMessage> {
      return new Promise((resolve) => {
        const check = () => {
          const found = seen.find(match);
          if (!found) return;
          waiters.delete(check);
          resolve(found);
        };
        waiters.add(check);
        check();
      });
    },
    onMessage(listener: (m: SseMessage) => void): void {
      listeners.add(listener);
    },
  };
}
const isEvent = (type: string, jobId: string) => (m: SseMessage) => m.event === type && eventJob(m).job_id === jobId;

test('several coordinators start at once on one database and serve the same state', async (t) => {
  const nodes = await cluster(t, 3);
  if (!nodes) return;
  const [a, b, c] = nodes.map((n) => clientOf(t, n.url));
  const job = await a!.createJob({ type: 'start_session', session_name: 'shared', prompt: 'hello' });
  assert.equal((await b!.getJob(job.job_id)).session_name, 'shared');
  assert.deepEqual((await c!.getSession('shared')).job_ids, [job.job_id]);
  await assert.rejects(b!.createJob({ type: 'start_session', session_name: 'shared', prompt: 'again' }), { status: 409, code: 'session_exists' });
});

test('a job created on A runs on a launcher parked on B', async (t) => {
  const nodes = await cluster(t, 2, { LOG_LEVEL: 'debug' });
  if (!nodes) return;
  const [A, B] = nodes as [CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const exec = shellExecutor(dir, 'exec.sh', `echo '{"type":"result","text":"ran on a launcher of B"}'`);
  const polled = B.waitFor((l) => l.msg === 'incoming request' && String((l['req'] as { url?: string })?.url).startsWith('/launcher/jobs'));
  const launcherId = await spawnLauncher(t, dir, 'on-b', ['--url', B.url, '--executor', exec, '--max-jobs', '1']);
  await polled; // its long-poll is on B (held for ten minutes unless a commit wakes it)

  const a = clientOf(t, A.url);
  const job = await a.createJob({ type: 'start_session', session_name: 'a-to-b', prompt: 'go' });
  const done = await a.waitJob(job.job_id, 60_000);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'ran on a launcher of B');
  assert.equal(done.launcher_id, launcherId);
});

test('a stop posted to B reaches the launcher parked on A; SSE on B sees it all', async (t) => {
  const nodes = await cluster(t, 2);
  if (!nodes) return;
  const [A, B] = nodes as [CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const exec = shellExecutor(dir, 'sleeper.sh', 'exec sleep 600');
  await spawnLauncher(t, dir, 'on-a', ['--url', A.url, '--executor', exec, '--max-jobs', '1']);
  const b = clientOf(t, B.url);
  const events = await watch(t, B.url);
  const job = await b.createJob({ type: 'start_session', session_name: 'stop-me', prompt: 'sleep' });
  await events.until(isEvent('job.started', job.job_id)); // started on A, seen on B

  const answer = await b.stopJob(job.job_id);
  assert.equal(answer.outcome, 'stopping');
  const ended = await b.waitJob(job.job_id, 60_000);
  assert.equal(ended.status, 'stopped');
  await events.until(isEvent('job.stopped', job.job_id));
});

test('a callback fires once when the child ends on C, though its report reaches A, B and C', async (t) => {
  const nodes = await cluster(t, 3);
  if (!nodes) return;
  const [a, b, c] = nodes.map((n) => clientOf(t, n.url)) as [AgentqClient, AgentqClient, AgentqClient];
  const eventsOnB = await watch(t, nodes[1]!.url);
  const onA = await fakeLauncher(a, 'host-1');

  const parent = await a.createJob({ type: 'start_session', session_name: 'parent', prompt: 'spawn a child' });
  assert.equal((await onA.take()).job_id, parent.job_id);
  await onA.started(parent.job_id, 'exec-parent');
  await onA.completed(parent.job_id, 'waiting for my child');

  const child = await b.createJob({ type: 'start_session', session_name: 'child', prompt: 'work', parent_session_name: 'parent' });
  const onC = await fakeLauncher(c, 'host-2');
  assert.equal((await onC.take()).job_id, child.job_id);
  await onC.started(child.job_id, 'exec-child');
  // the same report through every coordinator at once (a launcher retrying after a failover)
  const report = { launcher_id: onC.id, status: 'success' as const, result: 'child done' };
  await Promise.all([c, a, b].map((client) => client.reportCompleted(child.job_id, report)));

  const created = await eventsOnB.until((m) => m.event === 'job.created' && eventJob(m).session_name === 'parent' && eventJob(m).job_id !== parent.job_id);
  const callback: Job = eventJob(created);
  assert.deepEqual(callback.callback_of, [child.job_id]);
  const parentJobs = (await c.listJobs({ session_name: 'parent' })).jobs;
  assert.equal(parentJobs.length, 2, 'the start and one callback resume');
  assert.equal(parentJobs.filter((j) => j.callback_of?.includes(child.job_id)).length, 1);
  const session = await a.getSession('parent');
  assert.equal(session.callback_job_id, callback.job_id);
  assert.deepEqual(session.pending_callbacks, []);
});

test('SIGKILL of one of three coordinators during 2,000 jobs: each runs and ends exactly once', { timeout: 600_000 }, async (t) => {
  const nodes = await cluster(t, 3, { JOB_CLAIM_LEASE: '10' });
  if (!nodes) return;
  const [A, B, C] = nodes as [CoordinatorProcess, CoordinatorProcess, CoordinatorProcess];
  const dir = tempDir(t);
  const runs = join(dir, 'runs.txt');
  writeFileSync(runs, '');
  const exec = shellExecutor(dir, 'exec.sh', `echo "$AGENTQ_JOB_ID" >> ${runs}\necho '{"type":"result","text":"ok"}'`);
  const TOTAL = 2000;

  // watch from C, which survives: one global order of every coordinator's events
  const events = await watch(t, C.url);
  const ids: string[] = [];
  const coordinators = [A, B, C];
  for (let i = 0; i < TOTAL / 100; i++) {
    const url = coordinators[i % 3]!.url;
    const jobs = Array.from({ length: 100 }, (_, k) => ({ type: 'start_session', session_name: `s-${i * 100 + k}`, prompt: 'run' }));
    const res = await fetch(`${url}/jobs/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jobs }) });
    assert.equal(res.status, 201);
    ids.push(...((await res.json()) as { jobs: Job[] }).jobs.map((j) => j.job_id));
  }
  if (process.env.AGENTQ_TEST_PROGRESS) process.stderr.write(`created ${ids.length}\n`);
  // four launchers, each with all three URLs in its own order: two of them start on A
  const orders = [[A, B, C], [B, C, A], [C, A, B], [A, C, B]];
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
    if (process.env.AGENTQ_TEST_PROGRESS && completed.size % 100 === 0) process.stderr.write(`completed ${completed.size}\n`);
    if (completed.size >= TOTAL / 3) third();
    if (completed.size >= TOTAL) all();
  });
  await aThird;
  await A.kill(); // mid-run: its parked polls, answers in flight and open transactions die with it
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
