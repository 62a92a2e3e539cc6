/**
 * Stopping a large session tree (`npm run bench:tree-stop`; docs/benchmarks.md, "Stopping a large
 * tree"): a coordinator process (SQLite by default, a fresh file) with a root session and
 * BENCH_CHILDREN child sessions, each with its start job pending; then
 * `POST /sessions/root/stop?tree=true`, while `/health` is probed every 5 ms. Reported: how long
 * the stop took, the slowest `/health` meanwhile (the stop's transaction holds the event loop),
 * and the `session.updated` events of the root the stop sent (`GET /events`).
 *
 * BENCH_STORE=memory|sqlite|postgres; BENCH_COORDINATOR runs another build's main.js
 * (bench/lib/process.ts): the same workload before a change.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { postgresUrl } from './lib/postgres.js';
import { QUIET_ENV, startCoordinatorProcess } from './lib/process.js';
import { env, ms } from './lib/stats.js';

const CHILDREN = env('BENCH_CHILDREN', 20_000);
const STORE = process.env.BENCH_STORE ?? 'sqlite';

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-tree-stop-'));
  const databaseUrl = { memory: 'memory:', sqlite: `sqlite:${join(dir, 'agentq.db')}`, postgres: '' }[STORE];
  if (databaseUrl === undefined) throw new Error(`BENCH_STORE: memory, sqlite or postgres, not ${STORE}`);
  const server = await startCoordinatorProcess(databaseUrl || (await postgresUrl()), QUIET_ENV);
  const client = new AgentqClient({ url: server.url });
  const events = new AbortController();
  try {
    await client.createJob({ type: 'start_session', session_name: 'root', prompt: 'lead' });
    for (let i = 0; i < CHILDREN; i += 1000) {
      const n = Math.min(1000, CHILDREN - i);
      await client.createJobs(Array.from({ length: n }, (_, k) => ({ type: 'start_session' as const, session_name: `child-${i + k}`, prompt: 'work', parent_session_name: 'root' })));
    }
    // the root's session.updated events from here on
    let rootUpdates = 0;
    const opened = new Promise<void>((resolve) => {
      void (async () => {
        for await (const m of client.events({ signal: events.signal, onOpen: resolve })) {
          const e = JSON.parse(m.data) as { type: string; session?: { session_name: string } };
          if (e.type === 'session.updated' && e.session?.session_name === 'root') rootUpdates++;
        }
      })().catch(() => undefined);
    });
    await opened;
    let slowest = 0;
    let probing = true;
    const probes = (async () => {
      while (probing) {
        const t0 = performance.now();
        const res = await request(`${server.url}/health`);
        await res.body.dump();
        slowest = Math.max(slowest, performance.now() - t0);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const t0 = performance.now();
    const r = await client.stopSession('root', { tree: true });
    const took = performance.now() - t0;
    probing = false;
    await probes;
    // the events of the stop have been written by the time its answer was: give the stream a moment to read them
    await new Promise((r) => setTimeout(r, 500));
    console.log(`\n## Stopping a tree (${STORE} store): a root and ${CHILDREN.toLocaleString('en-US')} children, each with a pending start\n`);
    console.log('| jobs stopped | the stop took | slowest `/health` meanwhile | `session.updated` of the root sent |');
    console.log('|---|---|---|---|');
    console.log(`| ${r.stopped.length.toLocaleString('en-US')} | ${ms(took, 0)} | ${ms(slowest, 0)} | ${rootUpdates.toLocaleString('en-US')} |`);
  } finally {
    events.abort();
    await client.destroy();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
