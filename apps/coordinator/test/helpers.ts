import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { TestContext } from 'node:test';
import { AgentqClient, type SseMessage } from '@agentq/client';
import type { Job, LifecycleEvent, Session } from '@agentq/protocol';
import { tempDir, trackRunning } from '@agentq/test-support';
import type { Coordinator } from '../src/core/coordinator.js';
import { CoordinatorError } from '../src/core/errors.js';
import { newJobRow } from '../src/core/jobs.js';
import type { JobRow } from '../src/core/rows.js';
import type { Store } from '../src/core/store/store.js';
import { startCoordinator, type RunningCoordinator } from '../src/start.js';
import type { CoordinatorConfig } from '../src/config.js';
import { createLogger, type AppDeps } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { freshDatabaseUrl } from './pg-server.js';

export interface TestCoordinator {
  c: RunningCoordinator;
  client: AgentqClient;
}

/** A job row for store-level tests: `job_<seq>` on session `s<seq>`, created at 0, with `changes` over it. */
export function jobRowFixture(seq: number, changes: Partial<JobRow> = {}): JobRow {
  const fields = { type: 'start_session', prompt: 'p', agentName: null, projectDir: null, timeoutMs: null, requires: null, maxCostUsd: null, createdBy: null, callbackOf: null, messageIds: null } as const;
  return { ...newJobRow(seq, `job_${seq}`, { name: `s${seq}`, parentName: null }, 0, fields), ...changes };
}

/** The coordinator's own logger (as main.ts makes it) at `trace`, its lines kept as text: to look for secrets in. */
export function recordingLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return { log: createLogger(loadConfig({}, { logLevel: 'trace' }), stream), lines };
}

/** A logger whose lines can be awaited by message. */
export function awaitableLogger(logLevel: 'warn' | 'info' = 'warn') {
  const waiting: Array<{ msg: string; left: number; resolve: () => void }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n').filter(Boolean)) {
        const { msg } = JSON.parse(text) as { msg?: string };
        for (const w of waiting.filter((x) => x.msg === msg)) if (--w.left === 0) w.resolve();
      }
      done();
    },
  });
  return {
    logger: createLogger(loadConfig({}, { logLevel }), stream),
    /** resolves once `msg` has been logged `times` more times */
    logged: (msg: string, times: number) =>
      times === 0 ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ msg, left: times, resolve })),
  };
}

/** A real coordinator on 127.0.0.1:0 and a real client, both closed when the test ends. */
export async function startTest(
  t: TestContext,
  overrides: Partial<CoordinatorConfig> = {},
  deps: AppDeps = {},
): Promise<TestCoordinator> {
  const c = await startCoordinator({ pollTimeoutSeconds: 5, ...(await storeFor(t)), ...overrides }, deps);
  const client = new AgentqClient({ url: c.url });
  trackRunning(t, () => c.close());
  t.after(async () => {
    // the server first: closing it answers parked waits, so a request a failed test left
    // waiting cannot hold the client's close (and the test file) until its hold runs out
    await c.close();
    await client.close();
  });
  return { c, client };
}

/**
 * The store tests run on: memory by default; `AGENTQ_TEST_STORE=sqlite` runs the same tests on a
 * fresh SQLite file each, `AGENTQ_TEST_STORE=postgres` on a fresh PostgreSQL schema each (a
 * check of the store seam; see pg-server.ts).
 */
async function storeFor(t: TestContext): Promise<Partial<CoordinatorConfig>> {
  if (process.env.AGENTQ_TEST_STORE === 'postgres') {
    const url = await freshDatabaseUrl(t);
    if (url === null) throw new Error('PostgreSQL is not available (AGENTQ_TEST_STORE=postgres)');
    return { databaseUrl: url };
  }
  if (process.env.AGENTQ_TEST_STORE !== 'sqlite') return {};
  return { databaseUrl: `sqlite:${join(tempDir(t, 'agentq-test-db-'), 'agentq.db')}` };
}

/**
 * A temporary directory, removed when the test ends: after the coordinators the test started
 * with startTest (or tracked: trackRunning) have stopped, whichever was made first.
 */
export { tempDir } from '@agentq/test-support';

/**
 * `c`, a coordinator (or store, or anything with a database open) the test started itself rather
 * than with startTest, closed when the test ends: before the test's temporary directories are
 * removed, whichever was made first (tempDir), and also when the test failed before its own close.
 * A test may close it itself before (closing twice is harmless).
 */
export function closeAfter<T extends { close(): Promise<unknown> }>(t: TestContext, c: T): T {
  trackRunning(t, () => c.close());
  t.after(() => c.close());
  return c;
}

/** Play a launcher over real HTTP with the project's client. */
export async function fakeLauncher(client: AgentqClient, hostname = 'test-host') {
  const reg = await client.register({ hostname, executor_type: 'test' });
  const id = reg.launcher_id;
  return {
    id,
    reg,
    /** poll once; resolves with the job (throws if the poll brought something else) */
    async take(signal?: AbortSignal): Promise<Job> {
      const answer = await client.poll(id, { holdSeconds: reg.poll_timeout_seconds, signal });
      if (!answer?.job) throw new Error(`expected a job, got ${JSON.stringify(answer)}`);
      return answer.job;
    },
    poll: (o: { capacity?: number; batch?: boolean; signal?: AbortSignal } = {}) =>
      client.poll(id, { holdSeconds: reg.poll_timeout_seconds, ...o }),
    started: (jobId: string, executor_session_id?: string) =>
      client.reportStarted(jobId, { launcher_id: id, ...(executor_session_id ? { executor_session_id } : {}) }),
    completed: (jobId: string, result?: string, executor_session_id?: string) =>
      client.reportCompleted(jobId, {
        launcher_id: id,
        status: 'success',
        ...(result !== undefined ? { result } : {}),
        ...(executor_session_id ? { executor_session_id } : {}),
      }),
    failed: (jobId: string, error: string) => client.reportFailed(jobId, { launcher_id: id, error }),
    stopped: (jobId: string, signal: string | null = 'SIGTERM') => client.reportStopped(jobId, { launcher_id: id, signal }),
    heartbeat: () => client.heartbeat({ launcher_id: id }),
  };
}
export type FakeLauncher = Awaited<ReturnType<typeof fakeLauncher>>;

export const start = (client: AgentqClient, session_name: string, prompt = `do ${session_name}`, extra = {}) =>
  client.createJob({ type: 'start_session', session_name, prompt, ...extra });

/** A session whose first job a fresh fake launcher took and started: busy, so input for it waits. */
export async function busySession(client: AgentqClient, name: string, prompt?: string): Promise<{ l: FakeLauncher; own: Job }> {
  const l = await fakeLauncher(client);
  const own = await start(client, name, prompt);
  await l.take();
  await l.started(own.job_id);
  return { l, own };
}

export const resume = (client: AgentqClient, session_name: string, prompt = `more ${session_name}`, extra = {}) =>
  client.createJob({ type: 'resume_session', session_name, prompt, ...extra });

/** Assert that `promise` rejects with an AgentqApiError of this status and code. */
export async function rejectsWith(promise: Promise<unknown>, status: number, code: string): Promise<Record<string, unknown>> {
  try {
    await promise;
  } catch (err) {
    const e = err as { status?: number; code?: string; details?: Record<string, unknown>; message?: string };
    if (e.status !== status || e.code !== code) {
      throw new Error(`expected ${status} ${code}, got ${e.status} ${e.code}: ${e.message}`, { cause: err });
    }
    return e.details ?? {};
  }
  throw new Error(`expected ${status} ${code}, but the call succeeded`);
}

/** Resolve once `launcherId`'s next long-poll is parked on the server (or `count` of any). */
export function parked(core: { waiters: import('node:events').EventEmitter }, launcherId?: string, count = 1): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const on = (id: string) => {
      if (launcherId !== undefined && id !== launcherId) return;
      if (++seen < count) return;
      core.waiters.off('parked', on);
      resolve();
    };
    core.waiters.on('parked', on);
  });
}

/**
 * Resolve once a wait (`GET /jobs/{id}/wait`, `POST /jobs/wait`, an output follow) is registered
 * on `jobId`: from then on the job's end wakes it. (Being called is not enough: on a store whose
 * reads are asynchronous, the wait reads its jobs first.)
 */
export function watching(core: Pick<Coordinator, 'watching'>, jobId: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (ids: readonly string[]) => {
      if (!ids.includes(jobId)) return;
      core.watching.off('watching', on);
      resolve();
    };
    core.watching.on('watching', on);
  });
}

/** Count the turns of the event loop (a chain of setImmediate) from now until `stop()`. */
export function countTurns(): { readonly turn: number; stop(): void } {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turn() {
      return turn;
    },
    stop: () => (ticking = false),
  };
}

/** Resolve once `launcherId`'s parked poll has ended on the server. */
export function unparked(core: { waiters: import('node:events').EventEmitter }, launcherId: string): Promise<void> {
  return new Promise((resolve) => {
    const on = (id: string) => {
      if (id !== launcherId) return;
      core.waiters.off('unparked', on);
      resolve();
    };
    core.waiters.on('unparked', on);
  });
}

/**
 * Resolve once `obj[method]` has been called and has returned (the next call only). The core's
 * long waits (waitJob, waitJobs, readOutput) register their waiter synchronously inside the call,
 * so when this resolves the request is parked on the server: no sleep needed.
 */
export function called<T extends object>(obj: T, method: keyof T & string): Promise<void> {
  return new Promise((resolve) => {
    const original = obj[method] as unknown as (...args: unknown[]) => unknown;
    const spy = function (this: unknown, ...args: unknown[]) {
      delete (obj as Record<string, unknown>)[method]; // back to the prototype's method
      const out = original.apply(obj, args);
      resolve();
      return out;
    };
    Object.defineProperty(obj, method, { value: spy, configurable: true, writable: true });
  });
}

/** An SSE subscription to `GET /events` on its own connection pool, torn down when the test ends. */
export function openEvents(t: TestContext, url: string, lastEventId?: number | string, o: { includePrompt?: boolean } = {}) {
  const client = new AgentqClient({ url });
  const abort = new AbortController();
  let onOpen!: () => void;
  const opened = new Promise<void>((resolve) => (onOpen = resolve));
  const it = client.events({ signal: abort.signal, onOpen, ...o, ...(lastEventId !== undefined ? { lastEventId } : {}) });
  const close = async () => {
    abort.abort();
    await it.return(undefined).catch(() => undefined);
    await client.destroy();
  };
  t.after(close);
  return {
    /**
     * Resolves once the coordinator accepted the stream: every event committed after that comes.
     * (The request goes out with the first `next()`: call it, then await this.)
     */
    opened,
    /** the next message (the stream must not end) */
    async next(): Promise<SseMessage> {
      const r = await it.next();
      if (r.done) throw new Error('event stream ended');
      return r.value;
    },
    /** messages up to and including the first one `stop` accepts */
    async until(stop: (m: SseMessage) => boolean): Promise<SseMessage[]> {
      const seen: SseMessage[] = [];
      for (;;) {
        const m = await this.next();
        seen.push(m);
        if (stop(m)) return seen;
      }
    },
    close,
  };
}

/** A job event's payload (`data:` of an SSE message). */
export const eventJob = (m: SseMessage): Job => (JSON.parse(m.data) as { job: Job }).job;
/** A session event's payload. */
export const eventSession = (m: SseMessage): Session => (JSON.parse(m.data) as { session: Session }).session;

/**
 * Resolve with the next lifecycle event of `type` the core commits (on a shared store, whichever
 * coordinator commits it). For changes made after an answer was written (a deregistration
 * notice delivered), which a test cannot otherwise await.
 */
export function nextEvent(core: { events: { subscribe(l: (e: LifecycleEvent) => void): () => void } }, type: string): Promise<LifecycleEvent> {
  return new Promise((resolve) => {
    const off = core.events.subscribe((e) => {
      if (e.type !== type) return;
      off();
      resolve(e);
    });
  });
}

/**
 * Hold the store's next output appends until `go()`: `reached` resolves when the first one is
 * called (its launcher's check of the job is done by then: the append is what comes after it).
 */
export function holdAppends(store: Pick<Store, 'appendOutput'>): { reached: Promise<void>; go: () => void } {
  const original = store.appendOutput.bind(store);
  let reached!: () => void;
  let go!: () => void;
  const gate = new Promise<void>((resolve) => (go = resolve));
  const held = { reached: new Promise<void>((resolve) => (reached = resolve)), go };
  store.appendOutput = async (...args) => {
    reached();
    await gate;
    return original(...args);
  };
  return held;
}

/**
 * Makes the next tree stop of session `lead` fail half way. The stop reads the tree before its
 * first pass; a child of the lead (session `child`) starts just after that read (as if the lead's
 * turn started it), so the first pass misses it and the second finds it. The second pass's
 * transaction fails (the store refuses it): the stop answers 503 with the lead stopped and its
 * key unfinished. `reads`: how many times the stop has read the lead's tree; `child`: the
 * child's job once started.
 */
export function failTreeStopSecondPass(
  store: Store,
  client: AgentqClient,
  failure: () => Error = () => new CoordinatorError('storage_unavailable', 'the database refused the change (test)'),
): { readonly reads: number; readonly child: Job | undefined } {
  const childNames = store.childNames.bind(store);
  const transaction = store.transaction.bind(store);
  let reads = 0;
  let creating = false;
  let failNext = false;
  let child: Job | undefined;
  store.childNames = async (name) => {
    const read = await childNames(name);
    if (name !== 'lead' || creating) return read;
    reads++;
    if (reads === 1) {
      creating = true;
      child = await start(client, 'child', 'x', { parent_session_name: 'lead' });
      creating = false;
    }
    if (reads === 2) failNext = true;
    return read;
  };
  store.transaction = (fn) => {
    if (!failNext) return transaction(fn);
    failNext = false;
    return Promise.reject(failure());
  };
  return {
    get reads() {
      return reads;
    },
    get child() {
      return child;
    },
  };
}

/**
 * POST `body` (as JSON, when given) to `url` + `path` with `key` as its Idempotency-Key (when
 * given): the status and the JSON answer.
 */
export async function post(url: string, path: string, body?: unknown, key?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(key === undefined ? {} : { 'idempotency-key': key }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** POST /sessions/:name/stop (`query`, e.g. `?tree=true`) with `key` as its Idempotency-Key. */
export const stopSession = (url: string, name: string, key?: string, query = '') =>
  post(url, `/sessions/${name}/stop${query}`, undefined, key);
