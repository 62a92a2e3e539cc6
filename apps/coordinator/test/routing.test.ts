import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LauncherRow } from '../src/core/rows.js';
import type { AgentqClient } from '@agentq/client';
import { LABEL_KEY_RULE } from '@agentq/protocol';
import { pino } from 'pino';
import { loadConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { Coordinator } from '../src/core/coordinator.js';
import { MemoryStore } from '../src/core/store/memory-store.js';
import { ANY_ROUTE_KEY, encodeRoute, launcherIdentity, routeFromKey, routeKey, serves, unservedReason, type Route } from '../src/core/routing.js';
import { rejectsWith, resume, start, startTest } from './helpers.js';

const launcherRow = (over: Partial<LauncherRow>): LauncherRow => ({
  id: 'lnch_000000000001',
  hostname: 'h1',
  projectDir: null,
  executorType: 'claude-code',
  maxJobs: 4,
  version: null,
  registeredAt: 0,
  lastSeen: 0,
  status: 'online',
  staleAt: null,
  labels: { hostname: 'h1', executor: 'claude-code' },
  roots: ['/srv'],
  hostId: 'host-1',
  portable: false,
  createdBy: null,
  tokenHash: null,
  registrationKey: null,
  ...over,
});

test('routeKey(): the open route (no labels, directory or affinity) has the constant key its encoding gives; every other route its encoding', () => {
  const route = (r: Partial<Route>): Route => ({ requires: null, dir: null, affinity: null, ...r });
  const open = route({});
  assert.equal(routeKey(open), encodeRoute(open));
  assert.equal(ANY_ROUTE_KEY, encodeRoute(open));
  assert.deepEqual(routeFromKey(ANY_ROUTE_KEY), open);
  // an empty label set is no label: the same bucket as the open route
  assert.equal(routeKey(route({ requires: {} })), ANY_ROUTE_KEY);
  const portable = { hostId: null, hostname: null, executorType: null, workingDir: null };
  const others: Route[] = [
    route({ requires: { gpu: 'a100' } }),
    route({ dir: '/srv/app' }),
    route({ dir: '' }),
    route({ affinity: portable }),
    route({ affinity: { hostId: 'host-1', hostname: 'h1', executorType: 'claude-code', workingDir: '/srv/app' }, dir: '/srv/app' }),
  ];
  for (const r of others) {
    assert.equal(routeKey(r), encodeRoute(r), JSON.stringify(r));
    assert.notEqual(routeKey(r), ANY_ROUTE_KEY, JSON.stringify(r));
  }
});

test('serves(): every required label, a root containing the directory, the session host and executor', () => {
  const l = launcherRow({ labels: { hostname: 'h1', executor: 'claude-code', gpu: 'a100' } });
  const route = (r: Partial<Route>): Route => ({ requires: null, dir: null, affinity: null, ...r });
  assert.ok(serves(l, route({})));
  assert.ok(serves(l, route({ requires: { gpu: 'a100' } })));
  assert.ok(!serves(l, route({ requires: { gpu: 'a100', zone: 'eu' } })));
  assert.ok(serves(l, route({ dir: '/srv/app' })));
  assert.ok(serves(l, route({ dir: '/srv' })));
  assert.ok(!serves(l, route({ dir: '/srvx/app' })), 'a prefix is not a parent directory');
  assert.ok(serves(l, route({ dir: 'app' })), 'relative: from its first root');
  assert.ok(!serves(l, route({ dir: '../etc' })));
  assert.ok(!serves(launcherRow({ roots: [] }), route({ dir: '/srv/app' })), 'no roots: no named directory');
  const affinity = { hostId: 'host-1', hostname: 'h1', executorType: 'claude-code', workingDir: '/srv/app' };
  assert.ok(serves(l, route({ dir: '/srv/app', affinity })));
  assert.ok(!serves(launcherRow({ hostId: 'host-2' }), route({ dir: '/srv/app', affinity })));
  assert.ok(!serves(launcherRow({ executorType: 'demo' }), route({ dir: '/srv/app', affinity })));
  // a portable session: any host, its executor type only
  const portable = { hostId: null, hostname: null, executorType: 'demo', workingDir: null };
  assert.ok(serves(launcherRow({ hostId: 'host-7', executorType: 'demo' }), route({ affinity: portable })));
  assert.ok(!serves(l, route({ affinity: portable })));
  assert.deepEqual(routeFromKey(routeKey(route({ affinity: portable }))).affinity, portable);
  // a key stands for its route
  const key = routeKey(route({ requires: { zone: 'eu', gpu: 'a100' }, dir: '/srv/app', affinity }));
  assert.equal(key, routeKey(route({ requires: { gpu: 'a100', zone: 'eu' }, dir: '/srv/app', affinity })), 'label order does not matter');
  assert.ok(serves(l, { ...routeFromKey(key), requires: { gpu: 'a100' } }));
  assert.equal(routeFromKey(key).affinity?.hostId, 'host-1');
});

test('unservedReason() names what is missing', () => {
  const online = [launcherRow({}), launcherRow({ id: 'lnch_000000000002', labels: { zone: 'eu' }, roots: ['/data'] })];
  assert.equal(unservedReason({ requires: { gpu: 'a100' }, dir: null, affinity: null }, online), 'no online launcher has gpu=a100');
  assert.equal(
    unservedReason({ requires: { hostname: 'h1', zone: 'eu' }, dir: null, affinity: null }, online),
    'no online launcher has all of hostname=h1, zone=eu',
  );
  assert.equal(unservedReason({ requires: null, dir: '/elsewhere', affinity: null }, online), 'no online launcher serves /elsewhere');
  const away = { hostId: 'host-9', hostname: 'build-9', executorType: 'claude-code', workingDir: '/srv' };
  assert.equal(unservedReason({ requires: null, dir: '/srv', affinity: away }, online), 'session lives on host build-9, which is offline');
  // a launcher with the host's name but another host identity (restarted without its state directory)
  assert.equal(
    unservedReason({ requires: null, dir: '/srv', affinity: away }, [...online, launcherRow({ id: 'lnch_000000000003', hostname: 'build-9', hostId: 'host-new' })]),
    'session lives on host build-9 (host_id host-9), which is offline; the online launcher named build-9 is another host (another host-id in its state directory)',
  );
  assert.equal(unservedReason({ requires: null, dir: null, affinity: null }, []), 'no launcher is online');
  assert.equal(unservedReason({ requires: null, dir: '/srv/x', affinity: null }, online), null);
  // each part is checked against the launchers that pass the parts before it
  assert.equal(
    unservedReason({ requires: { zone: 'eu' }, dir: '/srv/x', affinity: null }, online),
    'no online launcher with zone=eu serves /srv/x',
  );
  const home = { hostId: 'host-1', hostname: 'h1', executorType: 'claude-code', workingDir: '/srv' };
  assert.equal(
    unservedReason({ requires: { zone: 'eu' }, dir: '/srv', affinity: home }, online),
    'session lives on host h1, where no online launcher has zone=eu',
  );
  const portable = { hostId: null, hostname: null, executorType: 'claude-code', workingDir: null };
  assert.equal(
    unservedReason({ requires: { zone: 'eu' }, dir: null, affinity: portable }, [launcherRow({}), launcherRow({ executorType: 'demo', labels: { zone: 'eu' } })]),
    'session runs on claude-code launchers, and none online has zone=eu',
  );
});

test("the original launcher's fields count: hostname and executor_type are labels, project_dir its one root", () => {
  const id = launcherIdentity({ hostname: 'seed-host', project_dir: '/srv/a/', executor_type: 'claude' });
  assert.deepEqual(id.labels, { hostname: 'seed-host', executor: 'claude' });
  assert.deepEqual(id.roots, ['/srv/a']);
  assert.equal(id.hostId, 'hostname:seed-host');
  const own = launcherIdentity({ hostname: 'h', labels: { zone: 'eu', hostname: 'other' }, project_roots: ['/a/../b', '/c'], host_id: 'abcdefgh12' });
  assert.deepEqual(own.labels, { zone: 'eu', hostname: 'other' }, 'its own labels win over the registration fields');
  assert.deepEqual(own.roots, ['/b', '/c']);
  assert.equal(own.hostId, 'abcdefgh12');
});

test('a launcher that registers like the original one (hostname, project_dir, executor_type) takes matching jobs, one per poll', async (t) => {
  const { client, c } = await startTest(t);
  const seed = await client.register({ hostname: 'seed-host', project_dir: '/srv/a', executor_type: 'claude' });
  const other = await client.register({ hostname: 'other', project_roots: ['/srv/b'], labels: { hostname: 'other' } });
  const forSeed = await client.createJob({ type: 'start_session', session_name: 's1', prompt: 'x', requires: { hostname: 'seed-host' } });
  const inA = await client.createJob({ type: 'start_session', session_name: 's2', prompt: 'x', project_dir: '/srv/a/app' });
  const anywhere = await start(client, 's3');
  // the other launcher never gets seed-host's jobs: it takes the only one it may
  const o = await client.poll(other.launcher_id, { holdSeconds: 1, capacity: 5, batch: true });
  assert.deepEqual(o?.jobs?.map((j) => j.job_id), [anywhere.job_id]);
  // without `batch`, one job per answer, in `job` (what the original launcher reads)
  const p1 = await client.poll(seed.launcher_id, { holdSeconds: 1, capacity: 5 });
  assert.equal(p1?.job?.job_id, forSeed.job_id);
  assert.equal(p1?.jobs?.length, 1);
  const p2 = await client.poll(seed.launcher_id, { holdSeconds: 1 });
  assert.equal(p2?.job?.job_id, inA.job_id);
  assert.ok(c.core);
});

test('requires is validated: short keys and values, an empty object is none', async (t) => {
  const { client } = await startTest(t);
  await rejectsWith(
    client.createJob({ type: 'start_session', session_name: 'bad', prompt: 'x', requires: { 'bad key': 'v' } }),
    400,
    'validation_failed',
  );
  await rejectsWith(
    client.createJob({ type: 'start_session', session_name: 'bad', prompt: 'x', requires: { gpu: 'x'.repeat(129) } }),
    400,
    'validation_failed',
  );
  const none = await client.createJob({ type: 'start_session', session_name: 'none', prompt: 'x', requires: {} });
  assert.equal(none.requires, null);
});

test('a label name that is not one (empty, a space) is refused naming requires or labels, with the rule it breaks', async (t) => {
  const { client } = await startTest(t);
  const refused = (field: string, key: string) => (err: unknown) => {
    const e = err as { status?: number; code?: string; message?: string; details?: Record<string, unknown> };
    assert.deepEqual([e.status, e.code, e.details], [400, 'validation_failed', { field, in: 'body' }], e.message);
    assert.equal(e.message, `${field}: label key ${JSON.stringify(key)} ${LABEL_KEY_RULE}`);
    return true;
  };
  for (const key of ['', 'bad key', '-x/y']) {
    await assert.rejects(client.createJob({ type: 'start_session', session_name: 'bad', prompt: 'x', requires: { [key]: 'v' } }), refused('requires', key));
    await assert.rejects(client.register({ hostname: 'h', labels: { [key]: 'v' } }), refused('labels', key));
  }
  // a bad value of a valid key is said of that key, written as it was (a pointer escapes its "/")
  await assert.rejects(client.register({ hostname: 'h', labels: { 'a/b': '' } }), (err: Error & { details?: unknown }) => {
    assert.deepEqual(err.details, { field: 'labels.a/b', in: 'body' });
    return true;
  });
  assert.deepEqual((await client.listLaunchers()).launchers, [], 'none registered');
});

test('a resume of a session bound to a host runs in the session\'s working_dir, whatever project_dir it carries', async (t) => {
  const { client } = await startTest(t);
  const first = await client.register({ hostname: 'h', executor_type: 'claude-code', host_id: 'HOSTHOST1', project_roots: ['/srv/a'] });
  const job = await start(client, 's', 'p', { project_dir: 'app' });
  assert.equal((await client.poll(first.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  await client.reportStarted(job.job_id, { launcher_id: first.launcher_id, working_dir: '/srv/a/app', executor_session_id: 'x' });
  await client.reportCompleted(job.job_id, { launcher_id: first.launcher_id, status: 'success', result: 'ok' });
  assert.equal((await client.getSession('s')).affinity?.working_dir, '/srv/a/app');
  // another launcher on the same host, whose first root (where a relative directory goes) differs
  const second = await client.register({ hostname: 'h', executor_type: 'claude-code', host_id: 'HOSTHOST1', project_roots: ['/srv/b', '/srv/a'] });
  await client.deleteLauncher(first.launcher_id, { self: true });
  const again = await resume(client, 's', 'again');
  const handed = (await client.poll(second.launcher_id, { holdSeconds: 1 }))?.job;
  assert.equal(handed?.job_id, again.job_id);
  assert.equal(handed?.project_dir, '/srv/a/app');
});

test('a session of a portable executor resumes on any host, but only with its executor type', async (t) => {
  const { client } = await startTest(t, { pollTimeoutSeconds: 0.05 });
  const demo = await client.register({ hostname: 'a', executor_type: 'demo', host_id: 'HOSTHOSTA', portable_sessions: true });
  const job = await start(client, 'p');
  assert.equal((await client.poll(demo.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  await client.reportStarted(job.job_id, { launcher_id: demo.launcher_id, executor_session_id: 'demo-1' });
  await client.reportCompleted(job.job_id, { launcher_id: demo.launcher_id, status: 'success', result: 'ok' });
  assert.equal((await client.getSession('p')).affinity, null, 'bound to no host');

  // a claude-code launcher polls first: the resume is not for it (it would `claude --resume demo-1`)
  const claude = await client.register({ hostname: 'b', executor_type: 'claude-code', host_id: 'HOSTHOSTB' });
  await client.deleteLauncher(demo.launcher_id, { self: true });
  const again = await resume(client, 'p', 'again');
  assert.equal(await client.poll(claude.launcher_id, { holdSeconds: 0.05 }), null);
  assert.equal((await client.getJob(again.job_id)).pending_reason, 'session runs on demo launchers, and none is online');
  // another demo launcher, on another host: it takes it
  const other = await client.register({ hostname: 'c', executor_type: 'demo', host_id: 'HOSTHOSTC', portable_sessions: true });
  assert.equal((await client.poll(other.launcher_id, { holdSeconds: 1 }))?.job?.job_id, again.job_id);
});

test("a session's later jobs (resumes, callback deliveries) require what its start required, unless they say otherwise", async (t) => {
  const { client } = await startTest(t, { pollTimeoutSeconds: 0.05 });
  const portable = { executor_type: 'demo', portable_sessions: true };
  const eu = await client.register({ ...portable, hostname: 'eu', host_id: 'HOSTHOSTEU', labels: { zone: 'eu' } });
  const us = await client.register({ ...portable, hostname: 'us', host_id: 'HOSTHOSTUS', labels: { zone: 'us' } });
  const take = async (launcherId: string, jobId: string) => {
    assert.equal((await client.poll(launcherId, { holdSeconds: 1 }))?.job?.job_id, jobId);
    await client.reportCompleted(jobId, { launcher_id: launcherId, status: 'success', result: 'ok', executor_session_id: 'demo-1' });
  };
  await take(eu.launcher_id, (await start(client, 'eu-only', 'p', { requires: { zone: 'eu' } })).job_id);
  assert.deepEqual((await client.getSession('eu-only')).requires, { zone: 'eu' });

  // a resume that says nothing: still zone=eu, so the us launcher is not given it
  const again = await resume(client, 'eu-only', 'again');
  assert.deepEqual((await client.getJob(again.job_id)).requires, { zone: 'eu' });
  assert.equal(await client.poll(us.launcher_id, { holdSeconds: 0.05 }), null);
  await take(eu.launcher_id, again.job_id);

  // a child's outcome delivered to it: also zone=eu
  const child = await start(client, 'child', 'c', { parent_session_name: 'eu-only' });
  await take(us.launcher_id, child.job_id);
  const delivery = (await client.getSession('eu-only')).callback_job_id!;
  assert.deepEqual((await client.getJob(delivery)).requires, { zone: 'eu' });
  await take(eu.launcher_id, delivery);

  // a resume may ask otherwise: {} is no requirement
  const anywhere = await resume(client, 'eu-only', 'anywhere', { requires: {} });
  assert.equal((await client.getJob(anywhere.job_id)).requires, null);
  await take(us.launcher_id, anywhere.job_id);
});

test('a resume whose host stays offline fails after JOB_SCHEDULE_TIMEOUT naming the host as its pending_reason did', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { scheduleTimeoutSeconds: 30, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const home = await client.register({ hostname: 'build-1', executor_type: 'claude-code', host_id: 'h_OPAQUEHOSTKEY', project_roots: ['/srv'] });
  const job = await start(client, 's');
  assert.equal((await client.poll(home.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  await client.reportStarted(job.job_id, { launcher_id: home.launcher_id, working_dir: '/srv', executor_session_id: 'x' });
  await client.reportCompleted(job.job_id, { launcher_id: home.launcher_id, status: 'success', result: 'ok' });
  await client.deleteLauncher(home.launcher_id, { self: true });
  await client.register({ hostname: 'build-2', executor_type: 'claude-code', host_id: 'h_OTHERHOSTKEY', project_roots: ['/srv'] });

  const again = await resume(client, 's');
  assert.equal((await client.getJob(again.job_id)).pending_reason, 'session lives on host build-1, which is offline');
  await c.core.sweep(); // the route is unserved from now on
  clock.advance(30_000);
  await c.core.sweep();
  const failed = await client.getJob(again.job_id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error_code, 'no_matching_launcher');
  assert.equal(failed.error, 'no launcher could take it within 30 s: session lives on host build-1, which is offline');
});

test('a launcher that registers while the sweeper looks at an unserved route takes its jobs: they are not failed no_matching_launcher', async (t) => {
  const clock = new ManualClock();
  const config = loadConfig({}, { scheduleTimeoutSeconds: 30, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 });
  const store = new MemoryStore({ clock, log: pino({ level: 'silent' }), outputMaxBytes: config.outputMaxBytes });
  const core = new Coordinator(config, store, { clock });
  const { client, c } = await startTest(t, config, { core, clock });
  const job = await client.createJob({ type: 'start_session', session_name: 'gpu-work', prompt: 'x', requires: { gpu: 'a100' } });
  await c.core.sweep(); // the route is unserved from now on
  clock.advance(31_000);
  // the sweep has read the online launchers (none with the label) when a launcher with it registers
  const readyBuckets = store.readyBuckets.bind(store);
  let registered: string | undefined;
  store.readyBuckets = async () => {
    registered ??= (await client.register({ hostname: 'gpu-1', executor_type: 'claude-code', labels: { gpu: 'a100' } })).launcher_id;
    return readyBuckets();
  };
  await c.core.sweep();
  assert.ok(registered, 'the launcher registered during the sweep');
  assert.equal((await client.getJob(job.job_id)).status, 'pending', 'still waiting, for the launcher that came');
  assert.equal((await client.poll(registered, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
});

/**
 * Session `lead` on host build-1 and its child `helper` on build-2; build-1 goes away, then the
 * child's turn ends (result `done helper-1`): its outcome's delivery waits for build-1.
 */
async function deliveryToHostAway(client: AgentqClient) {
  const host = { hostname: 'build-1', executor_type: 'claude-code', host_id: 'h_PARENTHOST', project_roots: ['/srv'] };
  const run = async (launcherId: string, jobId: string, sessionId: string) => {
    assert.equal((await client.poll(launcherId, { holdSeconds: 1 }))?.job?.job_id, jobId);
    await client.reportStarted(jobId, { launcher_id: launcherId, working_dir: '/srv', executor_session_id: sessionId });
    await client.reportCompleted(jobId, { launcher_id: launcherId, status: 'success', result: `done ${sessionId}` });
  };
  const home = await client.register(host);
  await run(home.launcher_id, (await start(client, 'lead')).job_id, 'lead-1');
  const other = await client.register({ ...host, hostname: 'build-2', host_id: 'h_CHILDHOST' });
  const child = await start(client, 'helper', 'c', { parent_session_name: 'lead' });
  await client.deleteLauncher(home.launcher_id, { self: true }); // the parent's host goes away
  await run(other.launcher_id, child.job_id, 'helper-1');
  return { host, delivery: (await client.getSession('lead')).callback_job_id! };
}

test('a delivery waits for its offline host past JOB_SCHEDULE_TIMEOUT and goes when the host is back', async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { scheduleTimeoutSeconds: 30, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const { host, delivery } = await deliveryToHostAway(client);
  assert.equal((await client.getJob(delivery)).pending_reason, 'session lives on host build-1, which is offline');
  await c.core.sweep(); // the route is unserved from now on
  clock.advance(31_000);
  await c.core.sweep();
  const waiting = await client.getJob(delivery);
  assert.equal(waiting.status, 'pending', 'no client waits on a delivery: it is not failed no_matching_launcher');
  assert.equal(waiting.pending_reason, 'session lives on host build-1, which is offline');

  // the host comes back: it is handed the delivery, which carries the child's outcome
  const back = await client.register(host);
  const handed = await client.poll(back.launcher_id, { holdSeconds: 1 });
  assert.equal(handed?.job?.job_id, delivery);
  assert.match(handed!.job!.prompt, /<result>done helper-1<\/result>/);
});

test('a job behind a thousand deliveries waiting for their offline host still fails after JOB_SCHEDULE_TIMEOUT', { timeout: 120_000 }, async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { scheduleTimeoutSeconds: 30, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const host = { hostname: 'build-1', executor_type: 'claude-code', host_id: 'h_MANYSESSIONS', project_roots: ['/srv'], max_jobs: 1000 };
  const home = await client.register(host);
  // 1,001 sessions of host build-1 (one more than the sweeper reads of a route at a time)
  const names = Array.from({ length: 1001 }, (_, i) => `s-${i}`);
  for (const batch of [names.slice(0, 1000), names.slice(1000)]) {
    await client.createJobs(batch.map((session_name) => ({ type: 'start_session' as const, session_name, prompt: 'x' })));
    const { jobs } = await client.sync({ launcher_id: home.launcher_id, capacity: 1000, reports: [] });
    assert.equal(jobs.length, batch.length);
    for (const kind of ['started', 'completed'] as const) {
      const reports = jobs.map((j) => ({
        job_id: j.job_id,
        kind,
        ...(kind === 'started' ? { working_dir: '/srv', executor_session_id: `x-${j.session_name}` } : {}),
      }));
      assert.ok((await client.sync({ launcher_id: home.launcher_id, capacity: 0, reports })).results.every((r) => r.ok));
    }
  }
  await client.register({ ...host, hostname: 'build-2', host_id: 'h_OTHERHOST' }); // another host stays
  await client.deleteLauncher(home.launcher_id, { self: true }); // the host goes away
  // a message to each of the first 1,000: a delivery each, waiting for the host
  for (const name of names.slice(0, 1000)) await client.sendMessage(name, { text: 'hello' });
  // then a client's own resume of the last one, on the same route
  const mine = await resume(client, 's-1000');
  assert.equal((await client.getJob(mine.job_id)).pending_reason, 'session lives on host build-1, which is offline');

  await c.core.sweep(); // the route is unserved from now on
  clock.advance(31_000);
  await c.core.sweep();
  const failed = await client.getJob(mine.job_id);
  assert.equal(failed.status, 'failed', 'the deliveries ahead of it do not hide it from JOB_SCHEDULE_TIMEOUT');
  assert.equal(failed.error_code, 'no_matching_launcher');
  const delivery = await client.getJob((await client.getSession('s-0')).callback_job_id!);
  assert.equal(delivery.status, 'pending', 'the deliveries still wait');
});

test("a delivery's JOB_DEFAULT_TIMEOUT_MS counts from when a launcher takes it, not while it waits for its host", async (t) => {
  const clock = new ManualClock();
  const HOUR = 3_600_000;
  const { c, client } = await startTest(
    t,
    { scheduleTimeoutSeconds: 30, defaultJobTimeoutMs: HOUR, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 },
    { clock },
  );
  const { host, delivery } = await deliveryToHostAway(client);

  // the host is away for longer than the timeout: the delivery waits
  await c.core.sweep();
  clock.advance(HOUR + 120_000);
  await c.core.sweep();
  assert.equal((await client.getJob(delivery)).status, 'pending');

  // back: it is taken, and its hour starts then
  const back = await client.register(host);
  assert.equal((await client.poll(back.launcher_id, { holdSeconds: 1 }))?.job?.job_id, delivery);
  await client.reportStarted(delivery, { launcher_id: back.launcher_id, working_dir: '/srv', executor_session_id: 'lead-1' });
  assert.equal((await client.getJob(delivery)).timeout_ms, HOUR + HOUR + 120_000);
  clock.advance(HOUR - 1000);
  await c.core.sweep();
  assert.equal((await client.getJob(delivery)).status, 'running');
  clock.advance(1000);
  await c.core.sweep();
  assert.equal((await client.getJob(delivery)).status, 'stopping', 'an hour after it was taken, it is stopped as any job past its timeout');
  await client.reportStopped(delivery, { launcher_id: back.launcher_id, signal: 'SIGTERM' });
  const ended = await client.getJob(delivery);
  assert.equal(ended.status, 'timed_out');
  assert.equal(ended.error, `timed out after ${HOUR} ms (executor ended by SIGTERM)`, 'the hour it had once taken, not the time it waited');
});

test("pending_reason names what the session's host lacks, not a directory other launchers serve, and the schedule timeout's error says the same", async (t) => {
  const clock = new ManualClock();
  const { c, client } = await startTest(t, { scheduleTimeoutSeconds: 30, heartbeatTimeoutSeconds: 86_400, sweepIntervalMs: 600_000 }, { clock });
  const host = { hostname: 'build-1', executor_type: 'claude-code', host_id: 'h_BUILDONE', project_roots: ['/srv'] };
  const home = await client.register({ ...host, labels: { gpu: 'a100' } });
  const job = await start(client, 's', 'go', { requires: { gpu: 'a100' } });
  assert.equal((await client.poll(home.launcher_id, { holdSeconds: 1 }))?.job?.job_id, job.job_id);
  await client.reportStarted(job.job_id, { launcher_id: home.launcher_id, working_dir: '/srv', executor_session_id: 'x' });
  await client.reportCompleted(job.job_id, { launcher_id: home.launcher_id, status: 'success', result: 'ok' });
  // the host comes back without the label; another host has it, and both serve /srv
  await client.deleteLauncher(home.launcher_id, { self: true });
  await client.register(host);
  await client.register({ ...host, hostname: 'build-2', host_id: 'h_BUILDTWO', labels: { gpu: 'a100' } });

  const again = await resume(client, 's');
  const why = 'session lives on host build-1, where no online launcher has gpu=a100';
  assert.equal((await client.getJob(again.job_id)).pending_reason, why);
  await c.core.sweep();
  clock.advance(30_000);
  await c.core.sweep();
  const failed = await client.getJob(again.job_id);
  assert.equal(failed.error_code, 'no_matching_launcher');
  assert.equal(failed.error, `no launcher could take it within 30 s: ${why}`);
});
