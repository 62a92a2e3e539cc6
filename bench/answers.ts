/**
 * Large answers (`npm run bench:answers`; docs/benchmarks.md, "Large answers"): a coordinator
 * process (memory store) holding BENCH_JOBS pending jobs with BENCH_PROMPT_BYTES prompts, then
 * BENCH_READERS clients at once asking for everything: `GET /jobs?limit=1000` (the first page, as
 * a dashboard would), then `POST /jobs/wait` on every id, then each one job (`GET /jobs/{id}`);
 * last, one launcher polls with `capacity=1000` until every job is handed out. Meanwhile `/health` is probed every
 * 20 ms. A reader answered 503 comes back after the Retry-After, as the project's client does.
 * Reported per request kind: the bytes of the answers, how many 503s were answered, the time until
 * all were read, the slowest `/health`, and the coordinator's peak RSS (VmHWM) before and after.
 *
 * BENCH_COORDINATOR runs another build's main.js (bench/lib/process.ts): the same workload before
 * a change. BENCH_STORE=sqlite runs the coordinator on a fresh SQLite file, BENCH_STORE=postgres
 * on a fresh PostgreSQL schema (bench/lib/postgres.ts), instead of the memory store; BENCH_ONLY=poll runs the launcher's part
 * alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { AgentqClient } from '@agentq/client';
import { request } from 'undici';
import { postgresUrl } from './lib/postgres.js';
import { memoryOf, QUIET_ENV, startCoordinatorProcess } from './lib/process.js';
import { env, mb, ms } from './lib/stats.js';

const JOBS = env('BENCH_JOBS', 300);
const PROMPT_BYTES = env('BENCH_PROMPT_BYTES', 1024 * 1024);
const READERS = env('BENCH_READERS', 4);
const STORE = process.env.BENCH_STORE ?? 'memory';
const ONLY_POLL = process.env.BENCH_ONLY === 'poll';

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-answers-'));
  const databaseUrl = { memory: 'memory:', sqlite: `sqlite:${join(dir, 'agentq.db')}`, postgres: '' }[STORE];
  if (databaseUrl === undefined) throw new Error(`BENCH_STORE: memory, sqlite or postgres, not ${STORE}`);
  const server = await startCoordinatorProcess(databaseUrl || (await postgresUrl()), QUIET_ENV);
  const client = new AgentqClient({ url: server.url });
  try {
    const filler = 'x'.repeat(PROMPT_BYTES - 16);
    const ids: string[] = [];
    // a few per request: a body holds at most 6 prompts of MAX_PROMPT_BYTES
    for (let i = 0; i < JOBS; i += 5) {
      const batch = Array.from({ length: Math.min(5, JOBS - i) }, (_, k) => ({ type: 'start_session' as const, session_name: `big-${i + k}`, prompt: `${i + k}:${filler}` }));
      ids.push(...(await client.createJobs(batch)).map((j) => j.job_id));
    }
    console.log(`\n## Large answers (${STORE} store): ${JOBS} pending jobs with ${mb(PROMPT_BYTES)} prompts, ${READERS} readers at once\n`);
    console.log('| request | bytes per answer | 503 then retried | all answers read after | slowest /health meanwhile | coordinator peak RSS before → after |');
    console.log('|---|---|---|---|---|---|');
    const kinds: [string, (reader: number) => Promise<Answer>][] = [
      ['`GET /jobs?limit=1000`', () => read(`${server.url}/jobs?limit=1000`)],
      ['`POST /jobs/wait` (every id, `timeout_ms: 0`)', () => read(`${server.url}/jobs/wait`, JSON.stringify({ job_ids: ids, timeout_ms: 0 }))],
      ['`GET /jobs/{id}` (one job each, in turn)', (reader) => read(`${server.url}/jobs/${ids[reader % ids.length]}`)],
    ];
    for (const [name, once] of ONLY_POLL ? [] : kinds) {
      const peakBefore = memoryOf(server.pid).peak;
      const probes = probe(`${server.url}/health`);
      const t0 = performance.now();
      const answers = await Promise.all(Array.from({ length: READERS }, (_, reader) => once(reader)));
      const elapsed = performance.now() - t0;
      const slowest = await probes.stop();
      const sizes = answers.map((a) => a.bytes);
      const [least, most] = [Math.min(...sizes), Math.max(...sizes)];
      const bytes = mb(least) === mb(most) ? mb(most) : `${mb(least)}–${mb(most)}`;
      const retried = answers.reduce((n, a) => n + a.refusals, 0);
      console.log(`| ${name} | ${bytes} | ${retried} | ${ms(elapsed, 0)} | ${ms(slowest, 0)} | ${mb(peakBefore)} → ${mb(memoryOf(server.pid).peak)} |`);
    }
    // a launcher asking for 1,000 slots at once, polling until every job is handed out
    const { launcher_id } = await client.register({ hostname: 'answers-bench' });
    const peakBefore = memoryOf(server.pid).peak;
    const probes = probe(`${server.url}/health`);
    const t0 = performance.now();
    const sizes: number[] = [];
    for (let handed = 0; handed < JOBS; ) {
      const res = await request(`${server.url}/launcher/jobs?launcher_id=${launcher_id}&capacity=1000&batch=true`, { headersTimeout: 600_000, bodyTimeout: 600_000 });
      const body = Buffer.from(await res.body.arrayBuffer());
      if (res.statusCode !== 200) throw new Error(`poll: ${res.statusCode}`);
      sizes.push(body.length);
      handed += (JSON.parse(body.toString('utf8')) as { jobs: unknown[] }).jobs.length;
    }
    const elapsed = performance.now() - t0;
    const slowest = await probes.stop();
    const [least, most] = [Math.min(...sizes), Math.max(...sizes)];
    const bytes = sizes.length === 1 ? mb(most) : `${mb(least)}–${mb(most)} (${sizes.length} polls)`;
    console.log(`| \`GET /launcher/jobs?capacity=1000&batch=true\` (one launcher, until all are handed out) | ${bytes} | 0 | ${ms(elapsed, 0)} | ${ms(slowest, 0)} | ${mb(peakBefore)} → ${mb(memoryOf(server.pid).peak)} |`);
  } finally {
    await client.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface Answer {
  /** of the 200 answer, read to the end */
  bytes: number;
  /** 503s with a Retry-After before it */
  refusals: number;
}

/** One request, sent again after the Retry-After of a 503 as the project's client does. */
async function read(url: string, body?: string): Promise<Answer> {
  for (let refusals = 0; ; refusals++) {
    const res = await request(url, {
      method: body === undefined ? 'GET' : 'POST',
      ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
      headersTimeout: 600_000,
      bodyTimeout: 600_000,
    });
    let bytes = 0;
    for await (const chunk of res.body) bytes += (chunk as Buffer).length;
    const retryAfter = Number(res.headers['retry-after']);
    if (res.statusCode === 503 && Number.isFinite(retryAfter)) {
      await new Promise((r) => setTimeout(r, retryAfter * 1000));
      continue;
    }
    if (res.statusCode !== 200) throw new Error(`${url}: ${res.statusCode}`);
    return { bytes, refusals };
  }
}

/** `GET /health` every 20 ms until stopped; resolves with the slowest answer's time. */
function probe(url: string): { stop: () => Promise<number> } {
  let running = true;
  let slowest = 0;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      await (await request(url)).body.dump();
      slowest = Math.max(slowest, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return slowest;
    },
  };
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
