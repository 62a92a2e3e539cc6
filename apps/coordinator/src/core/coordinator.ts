import { createHash } from 'node:crypto';
import {
  isTerminal,
  type CreateJobRequest,
  type Health,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type Job,
  type JobList,
  type JobOutput,
  type LauncherList,
  type LifecycleEvent,
  type ListSessionsQuery,
  type OutputQuery,
  type PollResponse,
  type RegisterLauncherRequest,
  type RegisterLauncherResponse,
  type SendMessageResponse,
  type Session,
  type SessionList,
  type StopJobResponse,
  type StopReason,
  type StopSessionResponse,
  type SyncRequest,
  type SyncResponse,
  type WaitManyResponse,
} from '@agentq/protocol';
import { pino, type Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { queuedBytesLimit } from '../limits.js';
import { Admission } from './admission.js';
import { answerPoll, releaseUndelivered, undoAnswer } from './claims.js';
import { systemClock, type Clock } from './clock.js';
import { liveLauncher, type CoreContext } from './context.js';
import { Dispatcher } from './dispatcher.js';
import { CoordinatorError, jobNotFound, validation } from './errors.js';
import { EventLog } from './event-log.js';
import { JobWatchers } from './job-watchers.js';
import * as launchers from './launchers.js';
import { recover } from './recovery.js';
import { heldJob, report, type ReportBody, type ReportKind } from './reports.js';
import { routeFromKey, unservedReason } from './routing.js';
import type { JobRow } from './rows.js';
import * as sessions from './sessions.js';
import { openStore } from './store/open-store.js';
import type { ListJobsFilter, Store } from './store/store.js';
import { Sweeper } from './sweeper.js';
import { applyReports } from './sync.js';
import { toWireJob, toWireLauncher, toWireSession } from './wire.js';

export interface CoordinatorDeps {
  clock?: Clock;
  logger?: Logger;
}

/** Who asks: the token's name (null when auth is off). */
export interface Actor {
  actor?: string | null;
}

/**
 * The domain core's front door: what the HTTP routes call. No HTTP in here. State changes run as
 * store transactions in the lifecycle modules (sessions.ts, jobs.ts, claims.ts, reports.ts,
 * launchers.ts, callbacks.ts, sweeper.ts); this class adds the waiting (parked polls, job
 * watchers) and the wire views.
 */
export class Coordinator {
  readonly events: EventLog;
  /** MAX_QUEUED_BYTES: creates past it are refused (queue_full) */
  readonly admission: Admission;
  readonly #ctx: CoreContext;
  readonly #dispatcher: Dispatcher;
  readonly #watchers = new JobWatchers();
  readonly #sweeper: Sweeper;
  #closed = false;

  /** Open the store named by `config.databaseUrl`, recover after a restart, and build the core. */
  static async open(config: CoordinatorConfig, deps: CoordinatorDeps = {}): Promise<Coordinator> {
    const clock = deps.clock ?? systemClock;
    const log = deps.logger ?? pino({ level: 'silent' });
    const store = await openStore(config, { clock, log });
    const core = new Coordinator(config, store, { clock, logger: log });
    await recover(core.#ctx);
    return core;
  }

  constructor(config: CoordinatorConfig, store: Store, deps: CoordinatorDeps = {}) {
    const clock = deps.clock ?? systemClock;
    const log = deps.logger ?? pino({ level: 'silent' });
    this.#ctx = { config, store, clock, log };
    this.events = new EventLog(config.eventReplaySize, log, config.eventReplayBytes);
    // a durable store numbers on after a restart: a Last-Event-ID from before it is a gap, not news
    if (store.lastEventId !== undefined) this.events.continueAfter(store.lastEventId);
    this.admission = new Admission(store, queuedBytesLimit(config), config.overloadRetryAfterSeconds);
    this.#dispatcher = new Dispatcher(
      (launcherId, capacity) => store.transaction(async (tx) => answerPoll(this.#ctx, tx, await tx.launcher(launcherId), capacity)),
      (launcherId, answer) => this.pollAnswerLost(launcherId, answer),
      (err) => log.error({ err }, 'dispatch failed'),
    );
    this.#sweeper = new Sweeper(this.#ctx, () => this.#dispatcher.launchersWithParkedPolls());
    store.onCommit((commit) => {
      this.events.ingest(commit.events);
      this.#watchers.ended(commit.ended);
      this.#dispatcher.committed(commit);
    });
  }

  get config(): CoordinatorConfig {
    return this.#ctx.config;
  }
  get store(): Store {
    return this.#ctx.store;
  }
  /** Internal signals (parked / unparked polls) for tests and benchmarks. */
  get waiters(): Dispatcher['signals'] {
    return this.#dispatcher.signals;
  }
  get parkedPolls(): number {
    return this.#dispatcher.parkedCount;
  }

  // ---------------------------------------------------------------------------------------
  // Jobs
  // ---------------------------------------------------------------------------------------

  /**
   * Create a job. With an Idempotency-Key, the same key and body within 24 h return the job the
   * first request created (`created: false`); a different body with the key is refused.
   */
  async createJob(req: CreateJobRequest, o: Actor & { idempotencyKey?: string } = {}): Promise<{ job: Job; created: boolean }> {
    const { store } = this.#ctx;
    const actor = o.actor ?? null;
    const row = await store.transaction(async (tx) => {
      if (o.idempotencyKey !== undefined) {
        // keys are per token (a key has no spaces: the header's pattern)
        const key = `${actor ?? '-'} ${o.idempotencyKey}`;
        const hash = requestHash(req);
        const seen = await tx.idempotency(key);
        if (seen) {
          if (seen.requestHash !== hash) {
            throw new CoordinatorError('idempotency_key_reused', 'this Idempotency-Key was used with a different request body', {
              idempotency_key: o.idempotencyKey,
              job_id: seen.jobIds[0],
            });
          }
          const first = await tx.job(seen.jobIds[0]!);
          if (first) return { job: first, created: false };
        }
        await this.admission.check([req]);
        const job = await sessions.createJob(this.#ctx, tx, req, actor);
        await tx.putIdempotency({ key, requestHash: hash, jobIds: [job.id], createdAt: tx.now });
        return { job, created: true };
      }
      await this.admission.check([req]);
      return { job: await sessions.createJob(this.#ctx, tx, req, actor), created: true };
    });
    // a launcher parked now takes the job at once: answer with what it became (`claimed`)
    await this.#dispatcher.settled();
    const job = (await this.#ctx.store.getJob(row.job.id)) ?? row.job;
    return { job: await this.#wireJob(job), created: row.created };
  }

  /** Create many jobs, all or none (`POST /jobs/batch`); a refusal names the failing index. */
  async createJobs(reqs: readonly CreateJobRequest[], o: Actor = {}): Promise<Job[]> {
    const rows = await this.#ctx.store.transaction(async (tx) => {
      await this.admission.check(reqs);
      const out: JobRow[] = [];
      for (const [i, req] of reqs.entries()) {
        try {
          out.push(await sessions.createJob(this.#ctx, tx, req, o.actor ?? null));
        } catch (err) {
          if (err instanceof CoordinatorError) {
            const field = typeof err.details?.field === 'string' ? `jobs[${i}].${err.details.field}` : `jobs[${i}]`;
            throw new CoordinatorError(err.code, `jobs[${i}]: ${err.message}`, { ...err.details, index: i, field });
          }
          throw err;
        }
      }
      return out;
    });
    return Promise.all(rows.map((r) => this.#wireJob(r)));
  }

  async getJob(jobId: string): Promise<Job> {
    const job = await this.#ctx.store.getJob(jobId);
    if (!job) throw jobNotFound(jobId);
    return this.#wireJob(job);
  }

  /** Jobs newest first. `cursor` is the `next_cursor` of the previous page (a job's seq). */
  async listJobs(filter: Omit<ListJobsFilter, 'limit' | 'before'> & { limit: number; cursor?: number }): Promise<JobList> {
    const { cursor, ...rest } = filter;
    const rows = await this.#ctx.store.listJobs({ ...rest, limit: filter.limit + 1, ...(cursor !== undefined ? { before: cursor } : {}) });
    const more = rows.length > filter.limit;
    if (more) rows.pop();
    const reasons = await this.#reasons(rows);
    return {
      jobs: rows.map((r) => toWireJob(r, reasons.get(r.id) ?? null)),
      next_cursor: more ? String(rows[rows.length - 1]!.seq) : null,
    };
  }

  async stopJob(jobId: string, o: Actor & { reason?: StopReason } = {}): Promise<StopJobResponse> {
    const { job, outcome } = await this.#ctx.store.transaction((tx) =>
      sessions.stopJob(this.#ctx, tx, jobId, o.reason ?? 'requested', o.actor ?? null),
    );
    return { job_id: job.id, outcome, status: job.status, job: await this.#wireJob(job) };
  }

  /** Resolve with the job once it is terminal, or its snapshot when `timeoutMs` passes. */
  async waitJob(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<Job> {
    let job: JobRow | undefined;
    await this.#waitUntil([jobId], timeoutMs, signal, async () => {
      job = await this.#ctx.store.getJob(jobId);
      if (!job) throw jobNotFound(jobId);
      return isTerminal(job.status);
    });
    return this.#wireJob(job!);
  }

  /**
   * `all`: until every watched job is terminal. `any`: until one of the watched jobs that were
   * still active when the wait began ends; at once if none was. A job that had already ended does
   * not satisfy it (so a caller can wait again on the same ids) unless `includeTerminal`.
   */
  async waitJobs(
    jobIds: readonly string[],
    timeoutMs: number,
    mode: 'any' | 'all',
    signal?: AbortSignal,
    includeTerminal = false,
  ): Promise<WaitManyResponse> {
    const unique = [...new Set(jobIds)];
    const read = async () => (await Promise.all(unique.map((id) => this.#ctx.store.getJob(id)))).filter((j) => j !== undefined);
    let found = await read();
    const known = new Set(found.map((j) => j.id));
    const open = new Set(found.filter((j) => includeTerminal || !isTerminal(j.status)).map((j) => j.id));
    const met = () => {
      if (found.length === 0) return false;
      const watched = found.filter((j) => open.has(j.id));
      if (mode === 'any') return watched.length === 0 || watched.some((j) => isTerminal(j.status));
      return watched.every((j) => isTerminal(j.status));
    };
    let first = true;
    await this.#waitUntil([...open], found.length > 0 ? timeoutMs : 0, signal, async () => {
      if (!first) found = await read();
      first = false;
      return met();
    });
    return {
      mode,
      done: met(),
      jobs: await Promise.all(found.map((j) => this.#wireJob(j))),
      not_found: unique.filter((id) => !known.has(id)),
    };
  }

  /** Wait (real time) until `check` holds, re-checking after each commit that ends one of `ids`. */
  async #waitUntil(ids: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, check: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await check()) return;
      const remaining = deadline - Date.now();
      if (remaining <= 0 || this.#watchers.closed || signal?.aborted) return;
      const cancel = new AbortController();
      const wake = this.#watchers.next(ids, remaining, signal ? AbortSignal.any([signal, cancel.signal]) : cancel.signal);
      // an end committed between the check and the registration is not missed: check again
      if (await check()) {
        cancel.abort();
        return;
      }
      await wake;
      cancel.abort();
    }
  }

  async readOutput(jobId: string, q: OutputQuery, signal?: AbortSignal): Promise<JobOutput> {
    const { store, config } = this.#ctx;
    let job = await store.getJob(jobId);
    if (!job) throw jobNotFound(jobId);
    if (q.offset !== undefined && q.offset >= job.outputBytes && !isTerminal(job.status) && (q.wait_ms ?? 0) > 0) {
      const done = new AbortController();
      const both = signal ? AbortSignal.any([signal, done.signal]) : done.signal;
      const outputCame = store.whenOutput(jobId, both, job.outputBytes);
      const ended = this.#watchers.next([jobId], q.wait_ms!, both);
      await Promise.race([outputCame, ended]);
      done.abort();
      job = (await store.getJob(jobId)) ?? job;
    }
    const out =
      q.offset === undefined
        ? await store.readOutput(jobId, null, q.tail_bytes ?? config.outputPreviewBytes)
        : await store.readOutput(jobId, q.offset, q.limit_bytes ?? config.outputMaxBytes);
    return {
      job_id: job.id,
      status: job.status,
      terminal: isTerminal(job.status),
      output: out.text,
      offset: out.offset,
      next_offset: out.end,
      total_bytes: out.totalBytes,
      retained_bytes: out.retainedBytes,
      truncated: out.truncated,
    };
  }

  // ---------------------------------------------------------------------------------------
  // Sessions
  // ---------------------------------------------------------------------------------------

  async listSessions(q: ListSessionsQuery = {}): Promise<SessionList> {
    let before: number | undefined;
    if (q.cursor !== undefined) {
      before = Number(q.cursor);
      if (!Number.isSafeInteger(before) || before < 0) throw validation('cursor', 'is not a cursor this server gave out');
    }
    const limit = q.limit ?? 100;
    const rows = await this.#ctx.store.listSessions({
      limit: limit + 1,
      ...(q.parent !== undefined ? { parent: q.parent } : {}),
      ...(q.status !== undefined ? { status: q.status } : {}),
      ...(before !== undefined ? { before } : {}),
    });
    const more = rows.length > limit;
    if (more) rows.pop();
    const list = await Promise.all(rows.map(async (s) => toWireSession(s, await this.#ctx.store.sessionExtras(s))));
    return { sessions: list, next_cursor: more ? String(rows[rows.length - 1]!.seq) : null };
  }

  async getSession(name: string): Promise<Session> {
    const s = await this.#ctx.store.getSession(name);
    if (!s) throw new CoordinatorError('session_not_found', `session ${name} not found`, { session_name: name });
    return toWireSession(s, await this.#ctx.store.sessionExtras(s));
  }

  /** Stop everything the session is doing: its queued jobs, then its active one. */
  async stopSession(name: string, o: Actor = {}): Promise<StopSessionResponse> {
    const answers = await this.#ctx.store.transaction((tx) => sessions.stopSession(this.#ctx, tx, name, o.actor ?? null));
    return { session_name: name, stopped: answers.map((a) => ({ job_id: a.job.id, outcome: a.outcome, status: a.job.status })) };
  }

  async sendMessage(name: string, text: string, o: Actor = {}): Promise<SendMessageResponse> {
    const { message, jobId } = await this.#ctx.store.transaction((tx) =>
      sessions.sendMessage(this.#ctx, tx, name, text, o.actor ?? null),
    );
    return { session_name: name, outcome: 'queued', message_id: message.message_id, job_id: jobId };
  }

  // ---------------------------------------------------------------------------------------
  // Launchers
  // ---------------------------------------------------------------------------------------

  async register(
    req: RegisterLauncherRequest,
    o: { createdBy?: string | null; tokenHash?: string | null } = {},
  ): Promise<RegisterLauncherResponse & { launcher_id: string }> {
    const { config, store } = this.#ctx;
    const row = await store.transaction((tx) =>
      launchers.register(this.#ctx, tx, req, { createdBy: o.createdBy ?? null, tokenHash: o.tokenHash ?? null }),
    );
    return {
      launcher_id: row.id,
      poll_endpoint: '/launcher/jobs',
      poll_timeout_seconds: config.pollTimeoutSeconds,
      heartbeat_interval_seconds: config.heartbeatIntervalSeconds,
      claim_lease_seconds: config.claimLeaseSeconds,
    };
  }

  /** Keep the SHA-256 (hex) of a launcher's credential with it (http/auth/launcher-credentials.ts). */
  async setLauncherTokenHash(launcherId: string, hash: string): Promise<void> {
    await this.#ctx.store.transaction(async (tx) => {
      if (await tx.launcher(launcherId)) await tx.updateLauncher(launcherId, { tokenHash: hash });
    });
  }

  /** The SHA-256 (hex) of a launcher's credential; null when it has none or is unknown. */
  async launcherTokenHash(launcherId: string): Promise<string | null> {
    return (await this.#ctx.store.getLauncher(launcherId))?.tokenHash ?? null;
  }

  /**
   * A launcher asks for work. Answers at once when there is something for it (deregistration,
   * stop requests, or, with capacity, the oldest jobs it may take), else parks until a commit
   * brings one of those, `pollTimeoutSeconds` pass (null = 204) or `signal` aborts.
   */
  async poll(launcherId: string, capacity: number, signal: AbortSignal): Promise<PollResponse | null> {
    const { store, clock, config } = this.#ctx;
    const epoch = this.#dispatcher.epoch;
    const { launcher, answer } = await store.transaction(async (tx) => {
      const l = await liveLauncher(tx, launcherId);
      return { launcher: l, answer: await answerPoll(this.#ctx, tx, l, capacity) };
    });
    await store.touchLauncher(launcherId, clock.now());
    if (answer || this.#closed) return answer;
    return this.#dispatcher.park(launcher, capacity, signal, config.pollTimeoutSeconds * 1000, epoch);
  }

  /** A poll answer could not be written: undo what giving it out did (claims.ts). */
  async pollAnswerLost(launcherId: string, answer: PollResponse): Promise<void> {
    await this.#ctx.store.transaction((tx) => undoAnswer(this.#ctx, tx, launcherId, answer));
  }

  /** A poll answer was written: a launcher told it is deregistered is forgotten once it holds no job. */
  async pollAnswerDelivered(launcherId: string, answer: PollResponse): Promise<void> {
    if (!answer.deregistered) return;
    await this.#ctx.store.transaction((tx) => launchers.deregistrationDelivered(this.#ctx, tx, launcherId));
  }

  async releaseUndelivered(jobId: string, launcherId: string): Promise<void> {
    await this.#ctx.store.transaction((tx) => releaseUndelivered(this.#ctx, tx, jobId, launcherId));
  }

  async heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const stop_jobs = await this.#ctx.store.transaction((tx) => launchers.heartbeatStops(tx, req.launcher_id));
    await this.#ctx.store.touchLauncher(req.launcher_id, this.#ctx.clock.now());
    return { ok: true, stop_jobs };
  }

  async report(kind: ReportKind, jobId: string, body: ReportBody & { launcher_id: string }): Promise<void> {
    await this.#ctx.store.transaction((tx) => report(this.#ctx, tx, kind, jobId, body.launcher_id, body));
    await this.#ctx.store.touchLauncher(body.launcher_id, this.#ctx.clock.now());
  }

  async appendOutput(jobId: string, launcherId: string, offset: number, data: string): Promise<void> {
    const { store, clock } = this.#ctx;
    await store.transaction((tx) => heldJob(tx, launcherId, jobId));
    await store.appendOutput(jobId, offset, data);
    await store.touchLauncher(launcherId, clock.now());
  }

  /**
   * Report-and-poll: apply each report as its single endpoint would (one failing does not fail
   * the others), then answer like a poll; held like one only when there was nothing to report.
   */
  async sync(req: SyncRequest, signal: AbortSignal): Promise<SyncResponse> {
    const results = await applyReports(this.#ctx, req.launcher_id, req.reports, (jobId, offset, data) =>
      this.appendOutput(jobId, req.launcher_id, offset, data),
    );
    let answer: PollResponse | null;
    if (req.reports.length === 0) answer = await this.poll(req.launcher_id, req.capacity, signal);
    else {
      // not liveLauncher: a deregistering launcher's last report removes it, and it is then told
      // it is deregistered (as a poll would be), not 401 for a request whose reports were applied
      answer = await this.#ctx.store.transaction(async (tx) =>
        answerPoll(this.#ctx, tx, await tx.launcher(req.launcher_id), req.capacity),
      );
    }
    return {
      jobs: answer?.jobs ?? [],
      ...(answer?.stop_jobs ? { stop_jobs: answer.stop_jobs } : {}),
      ...(answer?.deregistered ? { deregistered: true as const } : {}),
      ...(answer?.agent_tokens ? { agent_tokens: answer.agent_tokens } : {}),
      results,
    };
  }

  async listLaunchers(): Promise<LauncherList> {
    const { store, clock } = this.#ctx;
    const now = clock.now();
    const rows = await store.listLaunchers();
    return {
      launchers: await Promise.all(rows.map(async (l) => toWireLauncher(l, await store.activeJobIdsOfLauncher(l.id), now))),
    };
  }

  async deleteLauncher(launcherId: string, self: boolean): Promise<{ outcome: 'deregistering' | 'removed' }> {
    const outcome = await this.#ctx.store.transaction((tx) => launchers.deleteLauncher(this.#ctx, tx, launcherId, self));
    return { outcome };
  }

  async health(startedAt: number): Promise<Health> {
    const { store, clock } = this.#ctx;
    const counts = await store.counts();
    let online = 0;
    let stale = 0;
    for (const l of await store.listLaunchers()) {
      if (l.status === 'stale') stale++;
      else online++;
    }
    return {
      status: 'ok',
      uptime_seconds: Math.round(clock.now() - startedAt) / 1000,
      queue_depth: counts.pending,
      jobs_active: counts.active,
      launchers: { online, stale, parked_polls: this.#dispatcher.parkedCount },
    };
  }

  /** What `/metrics` reads at each scrape (see metrics/source.ts). */
  async metricsCounts(): Promise<import('../metrics/source.js').ScrapeCounts> {
    const { store } = this.#ctx;
    const [counts, jobsByStatus, buckets, launcherRows] = await Promise.all([
      store.counts(),
      store.countByStatus(),
      store.readyBuckets(),
      store.listLaunchers(),
    ]);
    const ready = buckets.reduce((n, b) => n + b.size, 0);
    const byKey: [string, number][] = buckets.map((b) => [b.key, b.size]);
    if (counts.pending > ready) byKey.push(['', counts.pending - ready]);
    const stale = launcherRows.filter((l) => l.status === 'stale').length;
    return {
      queueDepth: counts.pending,
      queueDepthByKey: byKey,
      jobsByStatus,
      launchers: { online: launcherRows.length - stale, stale },
      parkedPolls: this.#dispatcher.parkedCount,
    };
  }

  /**
   * Events after `afterId` for an SSE client resuming with Last-Event-ID: from the replay window,
   * and (a shared store) from the store's commit log for what the window no longer holds, e.g. on
   * a coordinator that started after them. `gap`: some are lost; `oldestId` is the first sent.
   */
  async replayEvents(afterId: number): Promise<{ events: LifecycleEvent[]; gap: boolean; oldestId: number }> {
    const held = this.events.since(afterId);
    const { store, config } = this.#ctx;
    if (!held.gap || !store.eventsSince) return held;
    const before = held.oldestId;
    const older = await store.eventsSince(afterId, before, Math.max(config.eventReplaySize, 1000));
    const oldestId = older[0]?.id ?? before;
    return { events: [...older, ...held.events], gap: afterId + 1 < oldestId, oldestId };
  }

  // ---------------------------------------------------------------------------------------
  // Time, and the server's life
  // ---------------------------------------------------------------------------------------

  /** Staleness, leases, timeouts, unmatched jobs, history. Run by a timer; tests call it. */
  sweep(): Promise<void> {
    return this.#sweeper.sweep();
  }

  /** Answer every parked request (polls get 204, waits their snapshot): the server is closing. */
  close(): void {
    this.#closed = true;
    this.#dispatcher.close();
    this.#watchers.close();
  }

  /** Reopen after close() (the same core served by a new server, e.g. after a restart in tests). */
  reopen(): void {
    this.#closed = false;
    this.#dispatcher.reopen();
    this.#watchers.reopen();
  }

  /** Close the store (after close()); the core cannot be used afterwards. */
  async shutdown(): Promise<void> {
    this.close();
    await this.#ctx.store.close();
  }

  // ---------------------------------------------------------------------------------------

  async #wireJob(job: JobRow): Promise<Job> {
    return toWireJob(job, (await this.#reasons([job])).get(job.id) ?? null);
  }

  /** Why each pending job is still waiting (see docs/routing.md). */
  async #reasons(jobs: readonly JobRow[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const pending = jobs.filter((j) => j.status === 'pending');
    if (pending.length === 0) return out;
    const { store } = this.#ctx;
    const online = (await store.listLaunchers()).filter((l) => l.status === 'online');
    for (const job of pending) {
      if (job.readySince === null || job.routeKey === null) {
        const session = await store.getSession(job.sessionName);
        const extras = session ? await store.sessionExtras(session) : null;
        const blocker = extras?.activeJobId ?? null;
        out.set(
          job.id,
          blocker
            ? `waiting for job ${blocker} of session ${job.sessionName} to end`
            : `waiting behind older jobs of session ${job.sessionName}`,
        );
        continue;
      }
      const route = routeFromKey(job.routeKey);
      if (route.affinity) {
        const session = await store.getSession(job.sessionName);
        route.affinity.hostname = session?.affinity?.hostname ?? null;
      }
      const why = unservedReason(route, online);
      if (why) out.set(job.id, why);
    }
    return out;
  }
}

/** A stable hash of a create request, to compare a retried Idempotency-Key's body. */
function requestHash(req: CreateJobRequest): string {
  const sorted = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
        )
      : v;
  return createHash('sha256').update(JSON.stringify(sorted(req))).digest('hex');
}
