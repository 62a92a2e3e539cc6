import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { pino } from 'pino';
import { loadConfig } from '../src/config.js';
import { ManualClock } from '../src/core/clock.js';
import { Coordinator } from '../src/core/coordinator.js';
import { MemoryStore } from '../src/core/store/memory-store.js';
import { unreachable } from '../src/core/store/pg-sql.js';
import { failTreeStopSecondPass, fakeLauncher, rejectsWith, start, startTest } from './helpers.js';

/*
 * `details.applied: false` on a 503 storage_unavailable tells a client (agentq mcp) that nothing of
 * the request was applied, so it may send it again. A create commits its jobs, then reads what
 * its answer needs (why a pending job waits: the online launchers, its session). On PostgreSQL
 * such a read that gets no connection of the pool throws the store's unreachable 503, which says
 * `applied: false` of itself (it changed nothing); the request's answer must not say it, as the
 * jobs were created: sent again without an Idempotency-Key, they would be created twice.
 */

/** A memory store whose reads outside transactions fail as PostgreSQL's do when no connection can be had, once `cut`. */
function cuttableReads() {
  const clock = new ManualClock();
  const config = loadConfig({}, { sweepIntervalMs: 600_000 });
  const store = new MemoryStore({ clock, log: pino({ level: 'silent' }), outputMaxBytes: config.outputMaxBytes });
  let cut = false;
  const noConnection = () => unreachable(new Error('timeout exceeded when trying to connect'));
  for (const read of ['getJob', 'getSession', 'sessionExtras', 'jobBriefs', 'listLaunchers', 'onlineLaunchers'] as const) {
    const original = ((store as unknown as Record<string, unknown>)[read] as ((...args: unknown[]) => Promise<unknown>) | undefined)?.bind(store);
    if (!original) continue;
    Object.assign(store, { [read]: (...args: unknown[]) => (cut ? Promise.reject(noConnection()) : original(...args)) });
  }
  // the reads fail from the first commit on: after the create's own transaction
  const transaction = store.transaction.bind(store);
  let armed = false;
  store.transaction = async (fn) => {
    const result = await transaction(fn);
    if (armed) cut = true;
    return result;
  };
  const core = new Coordinator(config, store, { clock });
  return { config, core, store, arm: () => (armed = true), restore: () => ((cut = false), (armed = false)) };
}

test('a create committed whose answer cannot be read (no database connection) is 503 storage_unavailable without details.applied: false', async (t) => {
  const s = cuttableReads();
  const { c } = await startTest(t, { logLevel: 'silent' }, { core: s.core });
  const client = new AgentqClient({ url: c.url, createRetries: 0 });
  t.after(() => client.close());
  // what such a read says of itself
  assert.equal(unreachable(new Error('timeout exceeded when trying to connect')).details?.['applied'], false);

  s.arm();
  const one = await rejectsWith(client.createJob({ type: 'start_session', session_name: 'one', prompt: 'x' }), 503, 'storage_unavailable');
  assert.ok(!('applied' in one), `the job was created: ${JSON.stringify(one)}`);
  s.restore();

  s.arm();
  const batch = await rejectsWith(
    client.createJobs([{ type: 'start_session', session_name: 'two', prompt: 'x' }, { type: 'start_session', session_name: 'three', prompt: 'x' }]),
    503,
    'storage_unavailable',
  );
  assert.ok(!('applied' in batch), `the jobs were created: ${JSON.stringify(batch)}`);
  s.restore();

  assert.deepEqual((await client.listJobs({})).jobs.map((j) => j.session_name).sort(), ['one', 'three', 'two']);
});

test("a tree stop whose later pass gets no database connection is 503 storage_unavailable without details.applied: false: its first pass was committed", async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const lead = await start(client, 'lead');
  await l.take();
  await l.started(lead.job_id);
  // the second pass (it finds a child started after the first read the tree) cannot connect
  failTreeStopSecondPass(c.core.store, client, () => unreachable(new Error('timeout exceeded when trying to connect')));
  const once = new AgentqClient({ url: c.url, stopRetries: 0 });
  t.after(() => once.close());
  const details = await rejectsWith(once.stopSession('lead', { tree: true }), 503, 'storage_unavailable');
  assert.ok(!('applied' in details), `the first pass stopped the lead: ${JSON.stringify(details)}`);
  assert.equal((await client.getJob(lead.job_id)).status, 'stopping');
});

test('a sync whose reports were applied and whose poll part gets no database connection is 503 storage_unavailable without details.applied: false', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'a');
  await l.take();
  // the report's transaction commits; the next one (the poll part) cannot connect
  const store = c.core.store;
  const transaction = store.transaction.bind(store);
  let left = 1;
  store.transaction = (fn) => (left-- > 0 ? transaction(fn) : Promise.reject(unreachable(new Error('timeout exceeded when trying to connect'))));
  const details = await rejectsWith(client.sync({ launcher_id: l.id, capacity: 1, reports: [{ job_id: job.job_id, kind: 'started' }] }), 503, 'storage_unavailable');
  store.transaction = transaction;
  assert.ok(!('applied' in details), `the report was applied: ${JSON.stringify(details)}`);
  assert.equal((await client.getJob(job.job_id)).status, 'running');
});
