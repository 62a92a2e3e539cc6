import {
  MAX_OUTPUT_OFFSET,
  type CreateJobRequest,
  type Health,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type Job,
  type JobList,
  type JobOutput,
  type LauncherList,
  type ListLaunchersQuery,
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
import { answerBytesInFlightLimit, queuedBytesLimit } from '../limits.js';
import type { ScrapeCounts } from '../metrics/source.js';
import { Admission } from './admission.js';
import type { Turn } from './agent-tokens.js';
import { AnswersInFlight, type AnswerHold } from './answer-budget.js';
import { answerPoll, undoAnswer } from './claims.js';
import { systemClock, type Clock } from './clock.js';
import { liveLauncher, type CoreContext } from './context.js';
import { afterChanges, afterCommit, validation } from './errors.js';
import * as creates from './creates.js';
import { Dispatcher } from './dispatcher.js';
import { EventLog } from './event-log.js';
import { JobWatchers } from './job-watchers.js';
import * as launchers from './launchers.js';
import { pendingReasons, wireJob } from './pending-reasons.js';
import { toWireJob } from './wire.js';
import { recover } from './recovery.js';
import * as reads from './reads.js';
import { heldJob, report, type ReportBody, type ReportKind } from './reports.js';
import * as sessions from './sessions.js';
import * as status from './status.js';
import * as stops from './stops.js';
import { openStore } from './store/open-store.js';
import type { Store } from './store/store.js';
import { Sweeper } from './sweeper.js';
import { applyReports } from './sync.js';
import * as waits from './waits.js';

export interface CoordinatorDeps {
  clock?: Clock;
  logger?: Logger;
}

/** Who asks: the token's name (null when auth is off). */
export interface Actor {
  actor?: string | null;
  /**
   * For an agent token: the turn that asks (its job and token). A turn being stopped (or ended)
   * may not start jobs or send messages (sessions.checkTurnGoesOn).
   */
  turn?: Turn | undefined;
}

/**
 * The domain core's front door: what the HTTP routes call. No HTTP in here. State changes run as
 * store transactions in the lifecycle modules (creates.ts, sessions.ts, jobs.ts, claims.ts,
 * reports.ts, launchers.ts, callbacks.ts, sweeper.ts); reads, waits and status have modules of
 * their own (reads.ts, waits.ts, status.ts). This class holds what they share with the store's
 * commits: the dispatcher (parked polls), the job watchers and the event log.
 */
export class Coordinator {
  readonly events: EventLog;
  /** MAX_QUEUED_BYTES: creates past it are refused (queue_full) */
  readonly admission: Admission;
  /** MAX_ANSWER_BYTES, MAX_ANSWER_BYTES_IN_FLIGHT: the text of list pages and wait answers */
  readonly answers: AnswersInFlight;
  readonly #ctx: CoreContext;
  readonly #dispatcher: Dispatcher;
  readonly #watchers = new JobWatchers();
  readonly #sweeper: Sweeper;
  #closed = false;

  /**
   * Open the store named by `config.databaseUrl`, build the core, and recover after a restart.
   * `recover: false` leaves recovery to the caller (`core.recover()`), to subscribe to the events
   * it emits first.
   */
  static async open(config: CoordinatorConfig, deps: CoordinatorDeps & { recover?: boolean } = {}): Promise<Coordinator> {
    const clock = deps.clock ?? systemClock;
    const log = deps.logger ?? pino({ level: 'silent' });
    const store = await openStore(config, { clock, log });
    const core = new Coordinator(config, store, { clock, logger: log });
    if (deps.recover !== false) await core.recover();
    return core;
  }

  constructor(config: CoordinatorConfig, store: Store, deps: CoordinatorDeps = {}) {
    const clock = deps.clock ?? systemClock;
    const log = deps.logger ?? pino({ level: 'silent' });
    this.#ctx = { config, store, clock, log };
    this.events = new EventLog(config.eventReplaySize, log, config.eventReplayBytes);
    // a durable store numbers on after a restart: a Last-Event-ID from before it is a gap, not news
    if (store.lastEventId !== undefined) this.events.continueAfter(store.lastEventId, store.lastEventIdUsed);
    this.admission = new Admission(store, queuedBytesLimit(config), config.overloadRetryAfterSeconds, config.maxPromptBytes);
    this.answers = new AnswersInFlight(config.maxAnswerBytes, answerBytesInFlightLimit(config));
    this.#dispatcher = new Dispatcher(
      (launcherId, capacity, stopsAlone) =>
        store.transaction(async (tx) => answerPoll(this.#ctx, tx, await tx.launcher(launcherId), capacity, stopsAlone)),
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
  /** Internal signal (a wait registered on its jobs) for tests. */
  get watching(): JobWatchers['signals'] {
    return this.#watchers.signals;
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
    const row = await creates.createOne(this.#ctx, this.admission, req, o.actor ?? null, o.idempotencyKey, o.turn);
    // the job is committed: a read of the answer that fails (no connection: applied: false for
    // that read) says nothing of the create
    return afterCommit(async () => {
      // a launcher parked now takes the job at once: answer with what it became (`claimed`). Only
      // a service of a parked poll, started by the commit before it returned, can have; without
      // one the job is as committed, and is not read again (a claim elsewhere races the answer
      // as it raced that read)
      const dispatched = await this.#dispatcher.settled();
      const job = dispatched ? ((await this.#ctx.store.getJob(row.job.id)) ?? row.job) : row.job;
      return { job: await wireJob(this.#ctx, job), created: row.created };
    });
  }

  /**
   * Create many jobs, all or none (`POST /jobs/batch`); a refusal names the failing index. With an
   * Idempotency-Key, as createJob: the same key and jobs return the jobs the first request created.
   */
  async createJobs(
    reqs: readonly CreateJobRequest[],
    o: Actor & { idempotencyKey?: string } = {},
  ): Promise<{ jobs: Job[]; created: boolean }> {
    const { jobs: created, created: isNew } = await creates.createMany(this.#ctx, this.admission, reqs, o.actor ?? null, o.idempotencyKey, o.turn);
    // (committed: as for one job)
    return afterCommit(async () => {
      // as for one job: answer with what each became, re-reading only the ones parked launchers took
      const dispatched = await this.#dispatcher.settled();
      const now = dispatched ? new Map((await this.#ctx.store.jobBriefs(created.map((r) => r.id))).map((b) => [b.id, b.status])) : null;
      const rows = await Promise.all(
        created.map(async (r) => (!now || now.get(r.id) === r.status ? r : ((await this.#ctx.store.getJob(r.id)) ?? r))),
      );
      const reasons = await pendingReasons(this.#ctx, rows);
      return { jobs: rows.map((r) => toWireJob(r, reasons.get(r.id) ?? null)), created: isNew };
    });
  }

  async getJob(jobId: string): Promise<Job> {
    return reads.getJob(this.#ctx, jobId);
  }

  /**
   * Jobs newest first. `cursor` is the `next_cursor` of the previous page (a job's seq). The
   * page's text counts in MAX_ANSWER_BYTES_IN_FLIGHT until `hold` releases it (answer-budget.ts).
   */
  async listJobs(filter: reads.ListJobsQuery, hold: AnswerHold): Promise<JobList> {
    return reads.listJobs(this.#ctx, filter, this.answers.room(hold));
  }

  /**
   * Stop a job. With an Idempotency-Key, the same key within 24 h answers the first stop's outcome
   * again (`replayed`), with the job as it is now.
   */
  async stopJob(jobId: string, o: Actor & { reason?: StopReason; idempotencyKey?: string } = {}): Promise<StopJobResponse> {
    return stops.stopJob(this.#ctx, jobId, o.reason ?? 'requested', o.actor ?? null, o.idempotencyKey);
  }

  /** Resolve with the job once it is terminal, or its snapshot when `timeoutMs` passes. */
  async waitJob(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<Job> {
    return waits.waitJob(this.#ctx, this.#watchers, jobId, timeoutMs, signal);
  }

  /**
   * Wait on several jobs until `any` or `all` of them end (see waits.ts), or `timeoutMs` passes.
   * The answer's text counts in MAX_ANSWER_BYTES_IN_FLIGHT until `o.hold` releases it.
   */
  async waitJobs(
    jobIds: readonly string[],
    timeoutMs: number,
    mode: 'any' | 'all',
    o: { hold: AnswerHold; signal?: AbortSignal; includeTerminal?: boolean },
  ): Promise<WaitManyResponse> {
    return waits.waitJobs(this.#ctx, this.#watchers, this.answers.room(o.hold), jobIds, timeoutMs, mode, o.signal, o.includeTerminal);
  }

  async readOutput(jobId: string, q: OutputQuery, signal?: AbortSignal): Promise<JobOutput> {
    return reads.readOutput(this.#ctx, this.#watchers, jobId, q, signal);
  }

  // ---------------------------------------------------------------------------------------
  // Sessions
  // ---------------------------------------------------------------------------------------

  /** Sessions newest first; the page's text counts as a list of jobs' does (listJobs). */
  async listSessions(q: ListSessionsQuery, hold: AnswerHold): Promise<SessionList> {
    return reads.listSessions(this.#ctx, q, this.answers.room(hold));
  }

  async getSession(name: string): Promise<Session> {
    return reads.getSession(this.#ctx, name);
  }

  /**
   * Stop everything the session is doing: its queued jobs, then its active one (`tree`: and those
   * of every session under it). With an Idempotency-Key, the same key within 24 h answers the first
   * stop's answer again (`replayed`) and stops nothing more (stops.ts).
   */
  async stopSession(name: string, o: Actor & { tree?: boolean; idempotencyKey?: string } = {}): Promise<StopSessionResponse> {
    return stops.stopSession(this.#ctx, name, {
      by: o.actor ?? null,
      tree: o.tree === true,
      ...(o.idempotencyKey !== undefined ? { idempotencyKey: o.idempotencyKey } : {}),
    });
  }

  async sendMessage(name: string, text: string, o: Actor = {}): Promise<SendMessageResponse> {
    const { message, jobId } = await this.#ctx.store.transaction(async (tx) => {
      if (o.turn !== undefined) await sessions.checkTurnGoesOn(tx, o.turn);
      return sessions.sendMessage(this.#ctx, tx, name, text, o.actor ?? null, (s, t) => this.admission.checkMessage(s, t));
    });
    return { session_name: name, outcome: 'queued', message_id: message.message_id, job_id: jobId };
  }

  // ---------------------------------------------------------------------------------------
  // Launchers
  // ---------------------------------------------------------------------------------------

  async register(
    req: RegisterLauncherRequest,
    o: { createdBy?: string | null; tokenHash?: string | null; binder?: launchers.HostBinder | undefined } = {},
  ): Promise<RegisterLauncherResponse & { launcher_id: string }> {
    const { config, store } = this.#ctx;
    const { row, replaced } = await store.transaction((tx) =>
      launchers.register(this.#ctx, tx, req, { createdBy: o.createdBy ?? null, tokenHash: o.tokenHash ?? null, binder: o.binder }),
    );
    return {
      launcher_id: row.id,
      poll_endpoint: '/launcher/jobs',
      poll_timeout_seconds: config.pollTimeoutSeconds,
      heartbeat_interval_seconds: config.heartbeatIntervalSeconds,
      claim_lease_seconds: config.claimLeaseSeconds,
      ...(req.replaces ? { replaced } : {}),
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
   * brings one of those, `pollTimeoutSeconds` pass (null = 204) or `signal` aborts. `stopsAlone`:
   * stop requests are answered without jobs (a poll of the original API's shape: claims.ts).
   */
  async poll(launcherId: string, capacity: number, signal: AbortSignal, stopsAlone = false): Promise<PollResponse | null> {
    const { store, clock, config } = this.#ctx;
    const epoch = this.#dispatcher.epoch;
    const { launcher, answer } = await store.transaction(async (tx) => {
      const l = await liveLauncher(tx, launcherId);
      return { launcher: l, answer: await answerPoll(this.#ctx, tx, l, capacity, stopsAlone) };
    });
    await store.touchLauncher(launcherId, clock.now());
    if (answer || this.#closed) return answer;
    return this.#dispatcher.park(launcher, capacity, signal, config.pollTimeoutSeconds * 1000, epoch, stopsAlone);
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

  async heartbeat(req: HeartbeatRequest): Promise<HeartbeatResponse> {
    const stop_jobs = await this.#ctx.store.transaction((tx) => launchers.heartbeatStops(tx, req.launcher_id, req.running_jobs));
    await this.#ctx.store.touchLauncher(req.launcher_id, this.#ctx.clock.now());
    return { ok: true, stop_jobs };
  }

  async report(kind: ReportKind, jobId: string, body: ReportBody & { launcher_id: string }): Promise<void> {
    await this.#ctx.store.transaction((tx) => report(this.#ctx, tx, kind, jobId, body.launcher_id, body));
    await this.#ctx.store.touchLauncher(body.launcher_id, this.#ctx.clock.now());
  }

  async appendOutput(jobId: string, launcherId: string, offset: number, data: string): Promise<void> {
    const { store, clock } = this.#ctx;
    // the stream's end is a reader's next offset: past MAX_OUTPUT_OFFSET, GET .../output would
    // refuse the next_offset it answered
    if (offset + Buffer.byteLength(data, 'utf8') > MAX_OUTPUT_OFFSET) {
      throw validation('data', `ends past byte ${MAX_OUTPUT_OFFSET} of the job's output (offset ${offset}), the most a job's output may hold`);
    }
    // Checked (for the refusal's reason), then checked again by the store as it stores the batch:
    // the job may be requeued, or its launcher removed or declared stale, in between (by another
    // coordinator on a shared database), and a batch stored then would land in the output of
    // another launcher's run, or of a job that has ended. Refused there, it is checked here again,
    // which refuses it with the reason. (Each turn of the loop needs the job to move meanwhile.)
    // A store whose own check refuses unknown jobs too (PostgreSQL) is checked here only once it
    // has refused the batch, for the reason: a transaction fewer per batch.
    for (let check = !store.appendOutputChecksJob; ; check = true) {
      if (check) await store.transaction((tx) => heldJob(tx, launcherId, jobId));
      if ((await store.appendOutput(jobId, offset, data, launcherId)) !== null) break;
    }
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
      // after reports that were applied: its failure's applied: false is not the request's
      answer = await this.#ctx.store
        .transaction(async (tx) => answerPoll(this.#ctx, tx, await tx.launcher(req.launcher_id), req.capacity))
        .catch((err: unknown) => {
          throw afterChanges(err);
        });
    }
    return {
      jobs: answer?.jobs ?? [],
      ...(answer?.stop_jobs ? { stop_jobs: answer.stop_jobs } : {}),
      ...(answer?.deregistered ? { deregistered: true as const } : {}),
      ...(answer?.agent_tokens ? { agent_tokens: answer.agent_tokens } : {}),
      results,
    };
  }

  /**
   * Launchers in registration order; a page with `q.limit`, whose text counts as a list of jobs'
   * does (listJobs) until `hold` releases it (reads.listLaunchers).
   */
  async listLaunchers(q: ListLaunchersQuery, hold: AnswerHold): Promise<LauncherList> {
    return reads.listLaunchers(this.#ctx, q, this.answers.room(hold));
  }

  async deleteLauncher(launcherId: string, self: boolean): Promise<{ outcome: 'deregistering' | 'removed' }> {
    const outcome = await this.#ctx.store.transaction((tx) => launchers.deleteLauncher(this.#ctx, tx, launcherId, self));
    return { outcome };
  }

  async health(startedAt: number): Promise<Omit<Health, 'overloaded'>> {
    return status.health(this.#ctx, startedAt, () => this.#dispatcher.parkedCount);
  }

  /** What `/metrics` reads at each scrape (see metrics/source.ts). */
  async metricsCounts(): Promise<ScrapeCounts> {
    return status.metricsCounts(this.#ctx, () => this.#dispatcher.parkedCount);
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
    // as much as the replay window may hold in memory (EVENT_REPLAY_BYTES), older is a gap
    const older = await store.eventsSince(afterId, before, Math.max(config.eventReplaySize, 1000), config.eventReplayBytes);
    const oldestId = older[0]?.id ?? before;
    return { events: [...older, ...held.events], gap: afterId + 1 < oldestId, oldestId };
  }

  // ---------------------------------------------------------------------------------------
  // Time, and the server's life
  // ---------------------------------------------------------------------------------------

  /**
   * After a restart on a durable store: claimed jobs go back to the queue, running jobs of a
   * launcher that is gone end interrupted (recovery.ts). Run once, before serving.
   */
  recover(): Promise<void> {
    return recover(this.#ctx);
  }

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
}
