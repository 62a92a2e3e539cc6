import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test, type TestContext } from 'node:test';
import pg from 'pg';
import { request } from 'undici';
import { AgentqApiError, AgentqClient } from '@agentq/client';
import type { Job } from '@agentq/protocol';
import { createLogger } from '../src/app.js';
import { loadConfig, type CoordinatorConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { LOGGED_PROMPT_CHARS } from '../src/core/store/pg-feed.js';
import { PgOutput } from '../src/core/store/pg-output.js';
import { PG_MIGRATIONS, PG_SCHEMA_VERSION } from '../src/core/store/pg-schema.js';
import { startCoordinator, type RunningCoordinator } from '../src/start.js';
import { called, eventJob, fakeLauncher, openEvents, parked, recordingLogger, start, watching } from './helpers.js';
import { commitCuttingProxy, cuttableProxy, freshDatabaseUrl } from './pg-server.js';

/*
 * The PostgreSQL store's promises, with two (or more) coordinators in this process on one
 * database: each has its own pool, LISTEN connection and core, exactly as separate processes
 * would, and the tests can await their internal signals (a poll parked on B) instead of sleeping.
 * Holds are far longer than the tests: a missing wake-up fails the test instead of passing late.
 */

const HOLD = { pollTimeoutSeconds: 600, sweepIntervalMs: 600_000 };

async function coordinators(
  t: TestContext,
  n: number,
  overrides: Partial<CoordinatorConfig> = {},
  deps: { clock?: ManualClock } = {},
): Promise<{ nodes: RunningCoordinator[]; clients: AgentqClient[]; url: string } | null> {
  const url = await freshDatabaseUrl(t);
  if (url === null) return null;
  const nodes = await Promise.all(Array.from({ length: n }, () => startCoordinator({ databaseUrl: url, ...HOLD, ...overrides }, deps)));
  const clients = nodes.map((c) => new AgentqClient({ url: c.url }));
  t.after(async () => {
    await Promise.all(clients.map((c) => c.destroy()));
    await Promise.all(nodes.map((c) => c.close()));
  });
  return { nodes, clients, url };
}

/** Resolves once `c` has seen event `id` (its own, or another coordinator's). */
function caughtUp(c: RunningCoordinator, id: number): Promise<void> {
  return new Promise((resolve) => {
    if (c.core.events.lastId >= id) return resolve();
    const off = c.core.events.subscribe((e) => {
      if (e.id < id) return;
      off();
      resolve();
    });
  });
}

test('a poll parked on B is woken by a job created on A; /wait on A returns when B records the end', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  const l = await fakeLauncher(b);
  const isParked = parked(B.core, l.id);
  const taken = l.take();
  await isParked;
  const job = await start(a, 'woken');
  assert.equal((await taken).job_id, job.job_id);

  const waitParked = watching(A.core, job.job_id);
  const waiting = a.waitJob(job.job_id, 600_000);
  await waitParked;
  await l.started(job.job_id);
  await l.completed(job.job_id, 'done on B');
  const ended = await waiting;
  assert.equal(ended.status, 'completed');
  assert.equal(ended.result, 'done on B');
});

test('output appended through A wakes a reader following it on B', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const [, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  const l = await fakeLauncher(a);
  const job = await start(a, 'talkative');
  await l.take();
  await l.started(job.job_id);
  await a.reportOutput(job.job_id, { launcher_id: l.id, offset: 0, data: 'hello ' });
  const followParked = called(B.core.store, 'whenOutput');
  const following = b.getOutput(job.job_id, { offset: 6, wait_ms: 300_000 });
  await followParked;
  await a.reportOutput(job.job_id, { launcher_id: l.id, offset: 6, data: 'world' });
  const out = await following;
  assert.equal(out.output, 'world');
  assert.equal(out.next_offset, 11);
  // a retried batch is stored once, whichever coordinator it reaches
  await b.reportOutput(job.job_id, { launcher_id: l.id, offset: 6, data: 'world' });
  const all = await b.getOutput(job.job_id, { offset: 0 });
  assert.equal(all.output, 'hello world');
  assert.equal(all.total_bytes, 11);
});

test('the same session started on A and B at once: one is created, the other gets 409', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  for (let i = 0; i < 10; i++) {
    const results = await Promise.allSettled([start(a, `race-${i}`), start(b, `race-${i}`)]);
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 1);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    assert.equal((refused.reason as { code?: string }).code, 'session_exists');
  }
});

test('the same Idempotency-Key on A and B at once creates one job', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const body = JSON.stringify({ type: 'start_session', session_name: 'once', prompt: 'p' });
  const post = (c: RunningCoordinator) =>
    fetch(`${c.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': 'k-1' }, body });
  const answers = await Promise.all(set.nodes.map(post));
  const jobs = (await Promise.all(answers.map((r) => r.json()))) as Job[];
  assert.deepEqual(new Set(jobs.map((j) => j.job_id)).size, 1);
  assert.deepEqual(answers.map((r) => r.status).sort(), [200, 201]);
});

test('many launchers polling through three coordinators at once: each job is handed out exactly once', async (t) => {
  const set = await coordinators(t, 3, { pollTimeoutSeconds: 1 });
  if (!set) return;
  const [a] = set.clients as [AgentqClient];
  const TOTAL = 300;
  const created: string[] = [];
  for (let i = 0; i < TOTAL; i++) created.push((await start(a, `many-${i}`)).job_id);
  const handed = new Map<string, string>();
  const launchers = await Promise.all(Array.from({ length: 9 }, (_, i) => fakeLauncher(set.clients[i % 3]!, `host-${i}`)));
  await Promise.all(
    launchers.map(async (l) => {
      for (;;) {
        const answer = await l.poll({ capacity: 3 });
        if (!answer?.jobs?.length) return; // the queue is empty
        for (const job of answer.jobs) {
          assert.equal(handed.get(job.job_id), undefined, `job ${job.job_id} handed out twice`);
          handed.set(job.job_id, l.id);
        }
      }
    }),
  );
  assert.deepEqual([...handed.keys()].sort(), [...created].sort());
});

test('one sweeper at a time: the first coordinator takes the lock; when it closes another takes over', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  assert.equal(await A.core.store.sweeperLease!(), true);
  assert.equal(await B.core.store.sweeperLease!(), false);
  assert.equal(await A.core.store.sweeperLease!(), true, 'kept');
  await A.close();
  assert.equal(await B.core.store.sweeperLease!(), true);
});

test('JOB_SCHEDULE_TIMEOUT goes on counting when another coordinator takes over the sweeping', async (t) => {
  const clock = new ManualClock();
  const set = await coordinators(t, 2, { scheduleTimeoutSeconds: 30 }, { clock });
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const job = await set.clients[0]!.createJob({ type: 'start_session', session_name: 'gpu', prompt: 'x', requires: { gpu: 'a100' } });
  await A.core.sweep(); // the sweeper: the route is unserved from now on
  clock.advance(20_000);
  await B.core.sweep(); // not the sweeper: it keeps nothing
  await A.core.sweep();
  await A.close();

  await B.core.sweep(); // takes over, and goes on from what A kept
  assert.equal((await B.core.getJob(job.job_id)).status, 'pending', 'not cut short: 20 s of 30 have passed');
  clock.advance(10_000);
  await B.core.sweep();
  const failed = await B.core.getJob(job.job_id);
  assert.equal(failed.status, 'failed', '30 s after the route was first seen unserved, whoever sweeps');
  assert.equal(failed.error_code, 'no_matching_launcher');
});

test('a poll parked on B keeps its launcher alive while A sweeps; a silent one goes stale', async (t) => {
  const clock = new ManualClock();
  const timing = { heartbeatIntervalSeconds: 10, heartbeatTimeoutSeconds: 30 };
  const set = await coordinators(t, 2, timing, { clock });
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  assert.equal(await A.core.store.sweeperLease!(), true);
  const parkedOnB = await fakeLauncher(b, 'parked');
  const silent = await fakeLauncher(a, 'silent');
  const isParked = parked(B.core, parkedOnB.id);
  void parkedOnB.poll().catch(() => undefined);
  await isParked;
  clock.advance(20_000);
  await B.core.sweep(); // not the sweeper: it only says its parked launchers are alive
  clock.advance(20_000);
  await A.core.sweep();
  const status = new Map((await a.listLaunchers()).launchers.map((l) => [l.launcher_id, l.status]));
  assert.equal(status.get(parkedOnB.id), 'online');
  assert.equal(status.get(silent.id), 'stale');
});

test('SSE: one global order across coordinators; a coordinator started later replays from the commit log', async (t) => {
  const set = await coordinators(t, 2, { eventReplaySize: 5 });
  if (!set) return;
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  for (let i = 0; i < 4; i++) await start(i % 2 ? a : b, `ordered-${i}`);
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const newest = Math.max(A.core.events.lastId, B.core.events.lastId);
  // each is told of the other's commits a moment later: both reach the same last event
  await Promise.all([caughtUp(A, newest), caughtUp(B, newest)]);
  assert.equal(A.core.events.lastId, B.core.events.lastId);
  assert.ok(newest > 10, 'more events than the replay window');

  // a third coordinator, started now: its window is empty, the log has everything
  const C = await startCoordinator({ databaseUrl: set.url, ...HOLD, eventReplaySize: 5 });
  t.after(() => C.close());
  const events = openEvents(t, C.url, 0);
  const all = await events.until((m) => Number(m.id) === newest);
  assert.deepEqual(
    all.map((m) => Number(m.id)),
    Array.from({ length: newest }, (_, i) => i + 1),
    'every event once, in order, no gap',
  );
  const later = await start(b, 'live');
  const live = await events.until((m) => m.event === 'job.created');
  assert.equal(eventJob(live.at(-1)!).job_id, later.job_id);
  assert.equal(Number(live.at(-1)!.id) > newest, true);
});

test('text PostgreSQL cannot hold (the NUL character) is refused with 400 naming the field, not 500', async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [a] = set.clients as [AgentqClient];
  await assert.rejects(start(a, 'nul', 'a\u0000b'), { status: 400, code: 'validation_failed', details: { field: 'prompt' } });
  // (a name is refused before the store sees it, in every store alike: as any body field is)
  await assert.rejects(start(a, 'nul\u0000name'), { status: 400, code: 'validation_failed', details: { field: 'session_name', in: 'body' } });
  await assert.rejects(a.getSession('nul\u0000name'), { status: 404, code: 'session_not_found' });
});

test('a claim reads whole rows only while their prompts fit in one answer; the rows it locked beyond stay ready', async (t) => {
  const BUDGET = 64 * 1024;
  const set = await coordinators(t, 1, { maxAnswerBytes: BUDGET });
  if (!set) return;
  const [A] = set.nodes as [RunningCoordinator];
  const [a] = set.clients as [AgentqClient];
  // three fit in the budget, not four; the prompts are ASCII, so bytes are characters
  const created = await a.createJobs(
    Array.from({ length: 7 }, (_, i) => ({ type: 'start_session' as const, session_name: `read-${i}`, prompt: `${i}:${'x'.repeat(20_000)}` })),
  );
  const l = await fakeLauncher(a);
  // the store itself, as a claim calls it: all seven are locked, three are read
  const read = await A.core.store.transaction(async (tx) => tx.readyJobsFor((await tx.launcher(l.id))!, 10, BUDGET));
  assert.deepEqual(
    read.map((j) => j.id),
    created.slice(0, 3).map((j) => j.job_id),
  );
  // nothing was claimed: the next polls hand out all seven in order, three, three, one
  const taken: string[][] = [];
  for (let i = 0; i < 3; i++) taken.push(((await l.poll({ batch: true, capacity: 10 }))?.jobs ?? []).map((j) => j.job_id));
  assert.deepEqual(taken, [0, 3, 6].map((from) => created.slice(from, from + 3).map((j) => j.job_id)));
});

test('prompts over LOGGED_PROMPT_CHARS are not copied into the commit log; events read from it carry them from the jobs table', async (t) => {
  const set = await coordinators(t, 2);
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const [a] = set.clients as [AgentqClient];
  const big = `big:${'p'.repeat(LOGGED_PROMPT_CHARS)}`;
  // B is told of A's commits through the log: its stream (with prompts) sees what the log carries
  const onB = openEvents(t, B.url, undefined, { includePrompt: true });
  const first = onB.next();
  await onB.opened;
  const [large, small] = await a.createJobs([
    { type: 'start_session', session_name: 'large-prompt', prompt: big },
    { type: 'start_session', session_name: 'small-prompt', prompt: 'small' },
  ]);
  const seen = [await first, ...(await onB.until((m) => m.event === 'job.created' && eventJob(m).job_id === small!.job_id))];
  const created = new Map(seen.filter((m) => m.event === 'job.created').map((m) => [eventJob(m).job_id, eventJob(m)]));
  assert.equal(created.get(large!.job_id)?.prompt, big);
  assert.equal(created.get(small!.job_id)?.prompt, 'small');
  await caughtUp(A, B.core.events.lastId);

  const db = new pg.Client({ connectionString: set.url });
  await db.connect();
  t.after(() => db.end());
  const logged = (await db.query<{ events: string }>('SELECT events FROM commit_log')).rows.map((r) => r.events).join('\n');
  assert.ok(logged.includes(large!.job_id) && logged.includes('"prompt":"small"'), 'the log has both jobs\' events, the small prompt inline');
  assert.ok(!logged.includes('p'.repeat(LOGGED_PROMPT_CHARS)), 'the large prompt is not in the log');

  // replayed from the log by a coordinator started later: the prompt, or (the job deleted since,
  // as history retention does) `prompt_omitted`
  const replayed = async () => {
    const C = await startCoordinator({ databaseUrl: set.url, ...HOLD });
    t.after(() => C.close());
    const events = openEvents(t, C.url, 0, { includePrompt: true });
    const all = await events.until((m) => m.event === 'job.created' && eventJob(m).job_id === small!.job_id);
    return all.filter((m) => m.event === 'job.created').map(eventJob).find((j) => j.job_id === large!.job_id)!;
  };
  assert.equal((await replayed()).prompt, big);
  await db.query('DELETE FROM jobs WHERE id = $1', [large!.job_id]);
  const gone = (await replayed()) as Job & { prompt_omitted?: boolean };
  assert.equal(gone.prompt, undefined);
  assert.equal(gone.prompt_omitted, true);
});

test('a claim hands out the job as it locked it, not as its statement first saw it', async (t) => {
  const base = await freshDatabaseUrl(t);
  if (base === null) return;
  // a delay inside the claim's statement, after its snapshot and before its lock: octet_length
  // (which the claim calls on each row it locks) resolves to this schema's own first
  const url = new URL(base);
  const schema = /search_path=(\S+)/.exec(url.searchParams.get('options')!)![1]!;
  url.searchParams.set('options', `-c search_path=${schema},pg_catalog`);
  const A = await startCoordinator({ databaseUrl: url.toString(), ...HOLD });
  const a = new AgentqClient({ url: A.url });
  t.after(async () => {
    await a.destroy();
    await A.close();
  });
  const job = await start(a, 'locked-late');
  const l = await fakeLauncher(a);
  const db = new pg.Client({ connectionString: url.toString() });
  await db.connect();
  t.after(() => db.end());
  await db.query('CREATE TABLE slow_once (x int)');
  await db.query(`CREATE FUNCTION octet_length(s text) RETURNS int LANGUAGE plpgsql VOLATILE AS $$
    DECLARE n int;
    BEGIN
      DELETE FROM slow_once; GET DIAGNOSTICS n = ROW_COUNT;
      IF n > 0 THEN PERFORM pg_sleep(2); END IF;
      RETURN pg_catalog.octet_length(s);
    END $$`);
  await db.query('INSERT INTO slow_once VALUES (1)');
  // while the claim's statement sleeps, another transaction changes the job (as another
  // coordinator's claim and requeue would) and commits; the job stays ready
  const claimed = l.poll({ batch: true, capacity: 1 });
  const asleep = "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND pid <> pg_backend_pid()";
  while ((await db.query(asleep)).rowCount === 0);
  await db.query('UPDATE jobs SET attempts = attempts + 1 WHERE id = $1', [job.job_id]);
  const answer = await claimed;
  assert.equal(answer?.jobs?.[0]?.job_id, job.job_id);
  const [row] = (await db.query<{ attempts: number }>('SELECT attempts FROM jobs WHERE id = $1', [job.job_id])).rows;
  assert.equal(row!.attempts, 2, 'the claim counted its attempt on top of the one committed before it locked the row');
});

test('cut off from PostgreSQL: /ready is 503 storage_unavailable, /health stays 200 saying the store is unavailable; both recover', { timeout: 60_000 }, async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await cuttableProxy(t, direct);
  const lines: Array<{ msg?: string }> = [];
  const waiting: Array<{ msg: string; resolve: () => void }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) {
        const line = JSON.parse(text) as { msg?: string };
        lines.push(line);
        for (const w of waiting.filter((x) => x.msg === line.msg)) w.resolve();
      }
      done();
    },
  });
  const logged = (msg: string) => new Promise<void>((resolve) => waiting.push({ msg, resolve }));
  const config = loadConfig({}, { logLevel: 'info' });
  const A = await startCoordinator({ databaseUrl: proxy.url, ...HOLD }, { logger: createLogger(config, stream) });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    await a.destroy();
    await A.close();
  });
  await start(a, 'before-the-cut');
  assert.deepEqual(await a.ready(), { ready: true });
  assert.equal((await a.health()).queue_depth, 1);

  const lost = logged('PostgreSQL control connection lost; reconnecting');
  await proxy.cut();
  await lost;
  const refused = await a.ready().catch((e: unknown) => e);
  assert.ok(refused instanceof AgentqApiError && refused.status === 503 && refused.code === 'storage_unavailable', String(refused));
  const h = await a.health();
  assert.deepEqual([h.status, h.store, h.queue_depth, h.launchers.online], ['ok', 'unavailable', null, null]);

  const back = logged('PostgreSQL control connection restored');
  await proxy.restore();
  await back;
  assert.deepEqual(await a.ready(), { ready: true });
  const again = await a.health();
  assert.deepEqual([again.store, again.queue_depth], ['ok', 1]);
});

/** A coordinator that reaches a fresh database through cuttableProxy, and a client of it (no retries). */
async function behindProxy(t: TestContext) {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return null;
  const proxy = await cuttableProxy(t, direct);
  const A = await startCoordinator({ databaseUrl: proxy.url, ...HOLD });
  const a = new AgentqClient({ url: A.url, overloadRetries: 0 });
  t.after(async () => {
    await a.destroy();
    await A.close().catch(() => undefined); // a frozen database may refuse the last writes
  });
  return { proxy, A, a };
}

test('cut off from PostgreSQL: GET /metrics still answers with what the process knows, and leaves out the gauges it reads from the store', { timeout: 60_000 }, async (t) => {
  const set = await behindProxy(t);
  if (!set) return;
  const { proxy, A, a } = set;
  await start(a, 'before-the-cut');
  const scrape = async () => {
    const res = await request(`${A.url}/metrics`);
    return { status: res.statusCode, text: await res.body.text() };
  };
  const before = await scrape();
  assert.equal(before.status, 200);
  assert.match(before.text, /^agentq_queue_depth 1$/m);

  await proxy.cut();
  assert.equal((await a.health()).store, 'unavailable');
  // the moment the event loop, memory and request rates matter most: Prometheus must not lose them
  const during = await scrape();
  assert.equal(during.status, 200, during.text);
  assert.match(during.text, /^nodejs_eventloop_lag_seconds /m);
  assert.match(during.text, /^agentq_jobs_created_total\{type="start_session"\} 1$/m);
  assert.match(during.text, /^agentq_http_request_duration_seconds_count\{/m);
  // no store gauge at all rather than a 0 (or the last value) that says the queue is empty
  for (const name of ['agentq_queue_depth', 'agentq_pending_jobs', 'agentq_jobs', 'agentq_launchers']) {
    assert.doesNotMatch(during.text, new RegExp(`^${name}[ {]`, 'm'), name);
  }

  await proxy.restore();
  // the pool connects again at the next read
  assert.match((await scrape()).text, /^agentq_queue_depth 1$/m);
});

test('the control connection asks PostgreSQL to notice a silent peer within seconds, so a partitioned sweeper frees its lock', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const { log, lines } = recordingLogger();
  const node = await startCoordinator({ databaseUrl: url, ...HOLD }, { logger: log });
  t.after(() => node.close());
  const line = lines.map((l) => JSON.parse(l) as { msg: string; settings?: Record<string, string> }).find((l) => l.msg === 'PostgreSQL control connection keepalive set');
  // as the server reads them back off this TCP connection's socket (s, s, probes, ms); without them, the OS defaults: 7200 s idle, 9 probes 75 s apart, no user timeout
  assert.deepEqual(line?.settings, { tcp_keepalives_idle: '10', tcp_keepalives_interval: '5', tcp_keepalives_count: '3', tcp_user_timeout: '30000', idle_session_timeout: '30s' });
});

test('a database of the first schema version is brought up to date; a session keeps what its start required', async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  try {
    await db.query(PG_MIGRATIONS[0]!);
    await db.query('CREATE TABLE agentq_schema (version integer NOT NULL); INSERT INTO agentq_schema (version) VALUES (1)');
  } finally {
    await db.end();
  }
  const c = await startCoordinator({ databaseUrl: url, ...HOLD });
  const client = new AgentqClient({ url: c.url });
  t.after(async () => {
    await client.destroy();
    await c.close();
  });
  await start(client, 'routed', 'p', { requires: { zone: 'eu' } });
  assert.deepEqual((await client.getSession('routed')).requires, { zone: 'eu' });
  const check = new pg.Client({ connectionString: url });
  await check.connect();
  t.after(() => check.end());
  assert.equal((await check.query('SELECT version FROM agentq_schema')).rows[0].version, PG_SCHEMA_VERSION);
});

test('a replay from the commit log reads at most EVENT_REPLAY_BYTES of it: older events are a stream.gap', async (t) => {
  const set = await coordinators(t, 1, { eventReplaySize: 5, eventReplayBytes: 100_000 });
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  // 40 commits of about 3 KB each (prompts that short are kept in the log itself): 120 KB
  for (let i = 0; i < 40; i++) await start(client, `heavy-${i}`, 'x'.repeat(3000));
  const newest = set.nodes[0]!.core.events.lastId;
  const events = openEvents(t, set.nodes[0]!.url, 0);
  const [gap, ...rest] = await events.until((m) => Number(m.id) === newest);
  assert.equal(gap!.event, 'stream.gap', 'the oldest part is a gap');
  const oldest = (JSON.parse(gap!.data) as { oldest_available_id: number }).oldest_available_id;
  assert.ok(oldest > 1, `the replay starts at ${oldest}`);
  assert.deepEqual(rest.map((m) => Number(m.id)), Array.from({ length: newest - oldest + 1 }, (_, i) => oldest + i));
});

// migration 3 as 281e2d1 shipped it; builds from ffa68d7 on added the meta table to it in place
for (const [made, withMeta] of [['281e2d1 (no meta)', false], ['ffa68d7 (with meta)', true]] as const) {
  test(`a database at schema version 3 as ${made} made it is brought up to date: the sweeper keeps JOB_SCHEDULE_TIMEOUT in meta`, async (t) => {
    const url = await freshDatabaseUrl(t);
    if (url === null) return;
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query(PG_MIGRATIONS[0]!);
      await db.query(PG_MIGRATIONS[1]!);
      await db.query('CREATE TABLE host_bindings (host_id text PRIMARY KEY, token_name text NOT NULL, bound_at bigint NOT NULL)');
      if (withMeta) await db.query('CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)');
      await db.query('CREATE TABLE agentq_schema (version integer NOT NULL); INSERT INTO agentq_schema (version) VALUES (3)');
    } finally {
      await db.end();
    }
    const clock = new ManualClock();
    const c = await startCoordinator({ databaseUrl: url, ...HOLD, scheduleTimeoutSeconds: 30 }, { clock });
    const client = new AgentqClient({ url: c.url });
    t.after(async () => {
      await client.destroy();
      await c.close();
    });
    const job = await start(client, 'gpu', 'x', { requires: { gpu: 'a100' } });
    // a sweep that cannot keep the route's unserved time stops there: no timeout, no retention
    await c.core.sweep();
    clock.advance(30_000);
    await c.core.sweep();
    assert.equal((await client.getJob(job.job_id)).error_code, 'no_matching_launcher');
    const check = new pg.Client({ connectionString: url });
    await check.connect();
    t.after(() => check.end());
    assert.equal((await check.query('SELECT version FROM agentq_schema')).rows[0].version, PG_SCHEMA_VERSION);
  });
}

test("a claim of a child session's job takes no lock on its root session: a transaction holding the root does not hold up the poll", async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  const l = await fakeLauncher(client);
  const root = await start(client, 'root', 'lead', { budget_usd: 10 });
  assert.equal((await l.take()).job_id, root.job_id);
  await l.started(root.job_id);
  const child = await start(client, 'child', 'work', { parent_session_name: 'root' });

  // another transaction holds the root session (as a report of a child's cost does, adding it to
  // the tree's sums): a claim reads the root only to check the budget, and must not wait for it
  const holder = new pg.Client({ connectionString: set.url });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('BEGIN');
  await holder.query("SELECT 1 FROM sessions WHERE name = 'root' FOR UPDATE");
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await holder.query('ROLLBACK');
  };
  t.after(release);
  const waitsForLock = (async () => {
    for (;;) {
      await holder.query('SELECT pg_stat_clear_snapshot()'); // a fresh pg_stat_activity (pg-races.test.ts, lockWaitsNow)
      const { rows } = await holder.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()");
      if (rows[0].n > 0) return 'waited for a lock' as const;
      if (released) return 'released' as const;
      await new Promise((r) => setImmediate(r));
    }
  })();
  const took = l.take().then((job) => job.job_id);
  const first = await Promise.race([took, waitsForLock]);
  await release();
  assert.equal(first, child.job_id, 'the claim waited for the lock on the root session');
  await waitsForLock;
});

test("a claim that ends a job of a spent tree records its outcome on the parent as the parent is then, not as the claim first read it: a sibling's outcome committed meanwhile is kept", async (t) => {
  const url = await freshDatabaseUrl(t);
  if (url === null) return;
  const node = await startCoordinator({ databaseUrl: url, ...HOLD });
  const client = new AgentqClient({ url: node.url });
  t.after(async () => {
    await client.destroy();
    await node.close();
  });
  const l = await fakeLauncher(client, 'one');
  // the sibling runs on another launcher: its report must not wait for the poll's lock on 'one'
  const other = await fakeLauncher(client, 'two');
  const done = (job_id: string, cost_usd = 0, by = l) => client.reportCompleted(job_id, { launcher_id: by.id, status: 'success', result: 'ok', cost_usd });
  const runChild = async (name: string, by = l) => {
    const job = await start(client, name, 'work', { parent_session_name: 'root' });
    assert.equal((await by.take()).job_id, job.job_id);
    await by.started(job.job_id);
    return job;
  };
  const root = await start(client, 'root', 'lead', { budget_usd: 1 });
  assert.equal((await l.take()).job_id, root.job_id);
  await l.started(root.job_id);
  await done(root.job_id);
  const sibling = await runChild('sibling', other);
  const spender = await runChild('spender');
  // a child's outcome queues the root's delivery (ready); then a child is queued behind it
  await done((await runChild('first')).job_id);
  const queued = await start(client, 'late', 'work', { parent_session_name: 'root' });
  await done(spender.job_id, 1); // the tree has spent its budget: 'late' must not run

  // the claim takes the root's delivery (reading the root without a lock) and then ends 'late';
  // it is held at the lock on 'late' while the sibling's outcome is added to the root
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  t.after(() => holder.end());
  await holder.query('BEGIN');
  await holder.query("SELECT 1 FROM sessions WHERE name = 'late' FOR UPDATE");
  // the root's delivery runs where the root lives: the launcher of host 'one'
  const polled = l.poll({ capacity: 2, batch: true });
  for (;;) {
    await holder.query('SELECT pg_stat_clear_snapshot()'); // a fresh pg_stat_activity (pg-races.test.ts, lockWaitsNow)
    const { rows } = await holder.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()");
    if (rows[0].n > 0) break;
    await new Promise((r) => setImmediate(r));
  }
  await done(sibling.job_id, 0, other);
  await holder.query('ROLLBACK');
  const answer = await polled;
  assert.equal(answer?.jobs?.length, 1);
  assert.equal((await client.getJob(queued.job_id)).error_code, 'budget_exceeded');
  const held = (await client.getSession('root')).pending_callbacks.map((c) => c.child_session_name).sort();
  assert.deepEqual(held, ['late', 'sibling', 'spender']);
});

/**
 * The statements the coordinators in this process send that `match` accepts (every pool client is
 * a pg.Client), from now until `stop()` (or the end of the test).
 */
function statements(t: TestContext, match: (text: string) => boolean): string[] & { stop(): void } {
  const seen = [] as unknown as string[] & { stop(): void };
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text;
    if (text !== undefined && match(text)) seen.push(text);
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  seen.stop = () => (pg.Client.prototype.query = query);
  t.after(seen.stop);
  return seen;
}

test("a tree stop writes the parent's held outcomes once, not once per child that ended", async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  const CHILDREN = 40;
  await start(client, 'root');
  for (let i = 0; i < CHILDREN; i++) await start(client, `child-${i}`, 'c', { parent_session_name: 'root' });
  // the statements that write a session's held outcomes while the tree is stopped (every pool
  // client is a pg.Client); each wrote the whole list, growing with every child
  const writes = statements(t, (text) => text.startsWith('UPDATE sessions') && text.includes(' callbacks = '));
  await client.stopSession('root', { tree: true });
  writes.stop();
  assert.equal((await client.getSession('root')).pending_callbacks.length, CHILDREN, 'every child outcome is kept on the parent');
  assert.equal(writes.length, 1);
});

test("a coordinator does not read its own commits back from the commit log (their NOTIFY comes back to it too)", async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  await start(client, 'warm-up');
  const reads = statements(t, (text) => text.includes('FROM commit_log WHERE id >'));
  for (let i = 0; i < 20; i++) await start(client, `s-${i}`);
  reads.stop();
  assert.equal(reads.length, 0);
});

test("pending_reason reads the online launchers once, until a commit on any coordinator changes one", async (t) => {
  const clock = new ManualClock(Date.now());
  const set = await coordinators(t, 2, {}, { clock });
  if (!set) return;
  const [A, B] = set.nodes as [RunningCoordinator, RunningCoordinator];
  const [a, b] = set.clients as [AgentqClient, AgentqClient];
  const reads = statements(t, (text) => text.startsWith('SELECT * FROM launchers'));
  const jobs: Job[] = [];
  for (let i = 0; i < 5; i++) jobs.push(await start(a, `gpu-${i}`, 'p', { requires: { gpu: 'a100' } }));
  assert.equal(reads.length, 1, 'one read for five creates');
  assert.equal((await a.getJob(jobs[0]!.job_id)).pending_reason, 'no launcher is online');

  // a launcher that can take them registers on B: A hears of it at once
  const registered = await b.register({ hostname: 'gpu-box', executor_type: 'test', labels: { gpu: 'a100' } });
  await caughtUp(A, B.core.events.lastId);
  assert.equal((await a.getJob(jobs[0]!.job_id)).pending_reason, null);
  assert.ok(registered.launcher_id);
});

test('a create does not look its new random job id up first: the unique key refuses a repeat, and the transaction runs again', async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  await start(client, 'warm-up');
  const lookups = statements(t, (text) => text.startsWith('SELECT s.* FROM sessions s JOIN jobs j'));
  const jobs = [];
  for (let i = 0; i < 5; i++) jobs.push(await start(client, `s-${i}`));
  lookups.stop();
  assert.equal(lookups.length, 0);
  assert.equal(new Set(jobs.map((j) => j.job_id)).size, 5);
});

test("output that came while a coordinator's LISTEN connection was down wakes its followers once the connection is back (recheck)", async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  const job = await start(client, 'talkative');
  const pool = new pg.Pool({ connectionString: set.url });
  t.after(() => pool.end());
  const output = new PgOutput(pool, 1024 * 1024, 'unused', () => Promise.reject(new Error('not used here')));
  // a follower that has read 6 bytes waits for more
  let woken = false;
  const follower = output.when(job.job_id, new AbortController().signal, 6).then(() => (woken = true));
  await output.recheck(); // nothing more yet: it goes on waiting
  assert.equal(woken, false);
  // another coordinator stores output, and its NOTIFY is lost (this one's LISTEN connection was down)
  await pool.query('UPDATE jobs SET output_bytes = 13 WHERE id = $1', [job.job_id]);
  await output.recheck(); // what the store does when its LISTEN connection is back
  await follower;
  assert.equal(woken, true);
});

test('a database that stops answering (a hung host) leaves GET /health and /metrics answering within seconds, the store unavailable', { timeout: 60_000 }, async (t) => {
  const set = await behindProxy(t);
  if (!set) return;
  const { proxy, A, a } = set;
  await start(a, 'before');
  assert.equal((await a.health()).store, 'ok');
  proxy.freeze();
  // the client's own limit (5 s) is well under the pool's 30 s wait for a connection
  const h = await a.health({ headersTimeoutMs: 5000 });
  assert.deepEqual([h.status, h.store, h.queue_depth], ['ok', 'unavailable', null]);
  const res = await fetch(`${A.url}/metrics`, { signal: AbortSignal.timeout(5000) });
  assert.equal(res.status, 200);
  const text = await res.text();
  assert.match(text, /^process_cpu_seconds_total /m);
  assert.doesNotMatch(text, /^agentq_queue_depth /m, 'the store-read gauges are left out, not 0');
});

test('a connection to PostgreSQL that breaks during a commit fails that request with 503 storage_unavailable; the coordinator goes on', async (t) => {
  const direct = await freshDatabaseUrl(t);
  if (direct === null) return;
  const proxy = await commitCuttingProxy(t, direct);
  const A = await startCoordinator({ databaseUrl: proxy.url, logLevel: 'silent', ...HOLD });
  const a = new AgentqClient({ url: A.url });
  t.after(async () => {
    await a.destroy();
    await A.close();
  });
  await start(a, 'a');
  const cut = proxy.arm('a message whose commit is not confirmed');
  const refused = await a.sendMessage('a', { text: 'a message whose commit is not confirmed' }).catch((e: unknown) => e);
  await cut;
  assert.ok(refused instanceof AgentqApiError && refused.status === 503 && refused.code === 'storage_unavailable', String(refused));
  assert.ok(refused.details && 'sql_state' in refused.details, 'said to come from PostgreSQL');
  assert.ok(!('applied' in refused.details), 'not said to be unapplied: its outcome is unknown');
  // the process is still there, and the commit it could not confirm was made
  assert.deepEqual(
    (await a.getSession('a')).pending_messages.map((m) => m.text),
    ['a message whose commit is not confirmed'],
  );
});

test('an output batch whose pooled connection breaks before its commit is stored on a fresh connection, as other writes are, not answered 503', async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [a] = set.clients as [AgentqClient];
  const l = await fakeLauncher(a);
  const job = await start(a, 'talkative');
  await l.take();
  await l.started(job.job_id);
  // the job's row held here keeps the batch's transaction waiting, on its pooled connection
  const db = new pg.Client({ connectionString: set.url });
  await db.connect();
  t.after(() => db.end());
  await db.query('BEGIN');
  await db.query('SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE', [job.job_id]);
  // the server process of the connection the batch's transaction runs on (every pool client is a pg.Client)
  const query = pg.Client.prototype.query;
  t.after(() => (pg.Client.prototype.query = query));
  const batchBackend = new Promise<number>((resolve) => {
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const text = (args[0] as { text?: string } | undefined)?.text;
      if (text === 'SELECT output_bytes, launcher_id FROM jobs WHERE id = $1 FOR UPDATE') {
        pg.Client.prototype.query = query;
        resolve((this as unknown as { processID: number }).processID);
      }
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
  });
  const report = a.reportOutput(job.job_id, { launcher_id: l.id, offset: 0, data: 'hello' });
  // that process ends (as all do when the database restarts), and the batch's query with it
  const { rows } = await db.query<{ gone: boolean }>('SELECT pg_terminate_backend($1, 60000) AS gone', [await batchBackend]);
  assert.equal(rows[0]!.gone, true);
  await db.query('COMMIT');
  await report;
  const out = await a.getOutput(job.job_id, { offset: 0 });
  assert.deepEqual([out.output, out.total_bytes], ['hello', 5]);
});

test('a launcher sign of life whose pooled connection breaks is written on a fresh connection, not lost', async (t) => {
  const clock = new ManualClock();
  const set = await coordinators(t, 1, {}, { clock });
  if (!set) return;
  const [a] = set.clients as [AgentqClient];
  const l = await fakeLauncher(a);
  const db = new pg.Client({ connectionString: set.url });
  await db.connect();
  t.after(() => db.end());
  // a table lock that lets the heartbeat's transaction read its launcher (FOR UPDATE) but keeps
  // the sign of life's UPDATE waiting, on its pooled connection
  await db.query('BEGIN');
  await db.query('LOCK TABLE launchers IN SHARE MODE');
  clock.advance(60_000);
  const beat = l.heartbeat();
  // the server process that waits for the lock (the UPDATE: the heartbeat's reads do not wait)
  let backend: number | undefined;
  while (backend === undefined) {
    const { rows } = await db.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE NOT granted AND locktype = 'relation' AND relation = 'launchers'::regclass`,
    );
    backend = rows[0]?.pid;
    if (backend === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  // that server process ends (as all do when the database restarts), and the UPDATE with it
  const { rows } = await db.query<{ gone: boolean }>('SELECT pg_terminate_backend($1, 60000) AS gone', [backend]);
  assert.equal(rows[0]!.gone, true);
  await db.query('COMMIT');
  assert.deepEqual((await beat).stop_jobs, []);
  const [row] = (await db.query<{ last_seen: string }>('SELECT last_seen FROM launchers WHERE id = $1', [l.id])).rows;
  assert.equal(Number(row!.last_seen), clock.now(), 'the sign of life was lost with its connection');
});

// A page of roots reads about a page of rows, however many children there are. Through
// sessions_by_parent or the primary key alone, the planner sorted every root or walked every
// session newer than the page: 250 ms a page behind a million children (100,000 roots). What the
// store asks is caught as it is sent, and its plan read over the children a test can afford.
test('GET /sessions?root=true reads the roots from an index of their own, not through the children', async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [a] = set.clients as [AgentqClient];
  await start(a, 'root');
  await start(a, 'child', 'p', { parent_session_name: 'root' });
  const db = new pg.Client({ connectionString: set.url });
  await db.connect();
  t.after(() => db.end());
  // 20,000 more children of the root, newer than it
  await db.query(`INSERT INTO sessions SELECT (jsonb_populate_record(NULL::sessions, to_jsonb(s) || jsonb_build_object('seq', s.seq + g, 'name', s.name || '-' || g))).*
    FROM sessions s, generate_series(1, 20000) g WHERE s.name = 'child'`);
  await db.query('ANALYZE sessions');

  const asked: Array<{ text: string; values: unknown[] }> = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const [q, values] = args as [string | { text: string; values?: unknown[] }, unknown[] | undefined];
    const text = typeof q === 'string' ? q : q?.text;
    if (typeof text === 'string' && /parent_name IS NULL/.test(text)) asked.push({ text, values: (typeof q === 'string' ? values : q.values) ?? [] });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    assert.deepEqual((await a.listSessions({ root: 'true' })).sessions.map((s) => s.session_name), ['root']);
  } finally {
    pg.Client.prototype.query = query;
  }

  assert.ok(asked.length > 0, 'the store asked for roots with parent_name IS NULL');
  for (const { text, values } of asked) {
    const { rows } = await db.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
    const plan = JSON.stringify(rows[0]['QUERY PLAN']);
    assert.match(plan, /"Index Name":"sessions_roots"/, `a page of roots reads them by sessions_roots; plan: ${plan}`);
  }
});

test("GET /launchers reads the jobs a page's launchers hold in one query, not one per launcher", async (t) => {
  const set = await coordinators(t, 1);
  if (!set) return;
  const [client] = set.clients as [AgentqClient];
  const launchers = [];
  for (let i = 0; i < 30; i++) launchers.push(await fakeLauncher(client, `host-${i}`));
  // two of them hold a job each (claimed, then running)
  const held = new Map<string, string[]>();
  for (const l of [launchers[3]!, launchers[17]!]) {
    const job = await start(client, `held-by-${l.id}`);
    assert.equal((await l.take()).job_id, job.job_id);
    held.set(l.id, [job.job_id]);
  }
  await launchers[17]!.started(held.get(launchers[17]!.id)![0]!);
  const reads = statements(t, (text) => /\bFROM jobs\b/.test(text) && text.includes('launcher_id'));
  const page = await client.listLaunchers({ limit: 1000 });
  const whole = await client.listLaunchers();
  reads.stop();
  assert.equal(reads.length, 2, 'one query for each answer');
  for (const list of [page, whole]) {
    assert.equal(list.launchers.length, 30);
    for (const l of list.launchers) assert.deepEqual(l.active_jobs, held.get(l.launcher_id) ?? [], l.launcher_id);
  }
});
