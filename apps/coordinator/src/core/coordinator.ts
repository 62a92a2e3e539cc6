import {
  MAX_SESSION_DEPTH,
  isTerminal,
  type CompletedReport,
  type CreateJobRequest,
  type FailedReport,
  type Health,
  type HeartbeatRequest,
  type HeartbeatResponse,
  type Job,
  type JobStatus,
  type JobType,
  type Launcher,
  type ListSessionsQuery,
  type PollResponse,
  type RegisterLauncherRequest,
  type RegisterLauncherResponse,
  type Session,
  type StartedReport,
  type StopJobResponse,
  type StoppedReport,
  type StopReason,
  type StopSessionResponse,
} from '@agentq/protocol';
import { pino, type Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { CallbackProcessor } from './callbacks.js';
import { systemClock, type Clock } from './clock.js';
import { DeadlineHeap } from './deadline-heap.js';
import { CoordinatorError, jobNotFound, validation } from './errors.js';
import { EventLog } from './event-log.js';
import { LauncherRegistry } from './launcher-registry.js';
import { JobWatchers } from './job-watchers.js';
import { newId } from './ids.js';
import { fromWireJob, newJobRecord, notificationOf, toWireJob, transition, type JobRecord } from './job-record.js';
import { fromWireLauncher, newLauncherRecord, toWireLauncher, type LauncherRecord } from './launcher-record.js';
import { ReadyQueue } from './ready-queue.js';
import { fromWireSession, isBusy, newSessionRecord, toWireSession, type SessionRecord } from './sessions.js';
import type { StateSnapshot } from './journal.js';

export interface CoordinatorDeps {
  clock?: Clock;
  logger?: Logger;
}

/** How long a stale launcher stays listed (status `stale`) before it is forgotten. */
const STALE_LAUNCHER_KEEP_MS = 60 * 60 * 1000;

type ReportKind = 'started' | 'completed' | 'failed' | 'stopped';

/**
 * The domain core: job queue, launcher registry, sessions and callbacks. Plain TypeScript, no
 * HTTP. Every method runs to completion synchronously (Node's single thread makes each one
 * atomic), except the long waits, which park a promise that a state change resolves.
 */
export class Coordinator {
  readonly events: EventLog;
  /** Internal signals (parked / unparked polls) for tests and benchmarks; see LauncherRegistry. */
  get waiters(): LauncherRegistry['signals'] {
    return this.#launchers.signals;
  }
  readonly #config: CoordinatorConfig;
  readonly #clock: Clock;
  readonly #log: Logger;

  readonly #jobs = new Map<string, JobRecord>();
  /** every job in creation order (evicted ones are skipped, and swept out now and then) */
  #bySeq: JobRecord[] = [];
  #evictedInIndex = 0;
  readonly #ready = new ReadyQueue<JobRecord>();
  /** jobs that are claimed, running or stopping (checked by the sweeper for leases) */
  readonly #active = new Set<JobRecord>();
  readonly #deadlines = new DeadlineHeap<JobRecord>();
  /** terminal jobs in the order they ended, for retention */
  readonly #ended: JobRecord[] = [];
  #endedHead = 0;
  #pendingCount = 0;
  /** > 0 while several jobs change together; see #holdingDispatch */
  #dispatchHeld = 0;
  #seq = 0;

  readonly #sessions = new Map<string, SessionRecord>();

  readonly #callbacks: CallbackProcessor;

  readonly #launchers: LauncherRegistry;
  readonly #watchers = new JobWatchers();
  #closed = false;

  constructor(config: CoordinatorConfig, deps: CoordinatorDeps = {}) {
    this.#config = config;
    this.#clock = deps.clock ?? systemClock;
    this.#log = deps.logger ?? pino({ level: 'silent' });
    this.events = new EventLog(config.eventReplaySize, this.#clock, this.#log);
    this.#launchers = new LauncherRegistry(this.#clock);
    this.#callbacks = new CallbackProcessor({
      session: (name) => this.#sessions.get(name),
      enqueueCallback: (session, prompt, callbackOf) =>
        this.#enqueue(session, {
          type: 'resume_session',
          prompt,
          agentName: session.agentName,
          projectDir: session.projectDir,
          timeoutMs: this.#config.defaultJobTimeoutMs,
          callbackOf,
        }),
      sessionChanged: (session) => this.#emitSession(session),
      now: () => this.#clock.now(),
      log: this.#log,
    });
  }

  get config(): CoordinatorConfig {
    return this.#config;
  }

  // ---------------------------------------------------------------------------------------
  // Jobs
  // ---------------------------------------------------------------------------------------

  /** `actor`: name of the token that asks (audit: the job's `created_by`). */
  createJob(req: CreateJobRequest, actor: string | null = null): Job {
    const promptBytes = Buffer.byteLength(req.prompt, 'utf8');
    if (promptBytes > this.#config.maxPromptBytes) {
      throw validation('prompt', `is ${promptBytes} bytes; the limit is ${this.#config.maxPromptBytes}`);
    }
    const name = req.session_name;
    const parentName = req.parent_session_name ?? null;
    if (parentName === name) throw validation('parent_session_name', 'a session cannot be its own parent');

    let session = this.#sessions.get(name);
    if (req.type === 'start_session') {
      if (session) {
        throw new CoordinatorError(
          'session_exists',
          `session ${name} already exists; use a resume_session job to continue it`,
          { session_name: name, current_status: isBusy(session) ? 'busy' : 'idle' },
        );
      }
      const parent = parentName === null ? null : this.#parentSession(parentName);
      session = this.#newSession(req, parent);
    } else {
      if (!session) {
        throw new CoordinatorError('session_not_found', `session ${name} not found; start it with a start_session job`, {
          session_name: name,
        });
      }
      if (parentName !== null && parentName !== session.parentName) {
        throw validation(
          'parent_session_name',
          `session ${name} has parent ${session.parentName ?? 'none'}; a resume cannot change it`,
        );
      }
    }
    const job = this.#enqueue(session, {
      type: req.type,
      prompt: req.prompt,
      agentName: req.agent_name ?? session.agentName,
      projectDir: req.project_dir ?? session.projectDir,
      // absent: the configured default; null: explicitly no timeout
      timeoutMs: req.timeout_ms === undefined ? this.#config.defaultJobTimeoutMs : req.timeout_ms,
      callbackOf: null,
      createdBy: actor,
    });
    return toWireJob(job);
  }

  getJob(jobId: string): Job {
    return toWireJob(this.#job(jobId));
  }

  /** Jobs newest first. `cursor` is the `next_cursor` of the previous page. */
  listJobs(filter: {
    statuses?: ReadonlySet<JobStatus>;
    sessionName?: string;
    launcherId?: string;
    terminal?: boolean;
    limit: number;
    cursor?: number;
  }): { jobs: Job[]; next_cursor: string | null } {
    // Walk newest first from the cursor and stop after limit + 1 matches: a page costs what it
    // skips and returns, not the number of jobs retained.
    const live = (job: JobRecord | undefined): job is JobRecord => job !== undefined && this.#jobs.get(job.id) === job;
    let source: readonly (JobRecord | undefined)[];
    if (filter.sessionName !== undefined) {
      source = (this.#sessions.get(filter.sessionName)?.jobIds ?? []).map((id) => this.#jobs.get(id));
    } else source = this.#bySeq;
    let i = source.length - 1;
    if (filter.cursor !== undefined && filter.sessionName === undefined) i = lastBelow(this.#bySeq, filter.cursor);
    const page: JobRecord[] = [];
    for (; i >= 0 && page.length <= filter.limit; i--) {
      const job = source[i];
      if (!live(job)) continue;
      if (filter.cursor !== undefined && job.seq >= filter.cursor) continue;
      if (filter.statuses && !filter.statuses.has(job.status)) continue;
      if (filter.launcherId !== undefined && job.launcherId !== filter.launcherId) continue;
      if (filter.terminal !== undefined && isTerminal(job.status) !== filter.terminal) continue;
      page.push(job);
    }
    const more = page.length > filter.limit;
    if (more) page.pop();
    return { jobs: page.map(toWireJob), next_cursor: more ? String(page[page.length - 1]!.seq) : null };
  }

  /** `actor`: name of the token that asks (audit: the job's `stopped_by`). */
  stopJob(jobId: string, reason: StopReason = 'requested', actor: string | null = null): StopJobResponse {
    const job = this.#job(jobId);
    const answer = (outcome: StopJobResponse['outcome']): StopJobResponse => ({
      job_id: job.id,
      outcome,
      status: job.status,
      job: toWireJob(job),
    });
    if (isTerminal(job.status)) return answer('already_completed');
    if (job.status === 'stopping') return answer('stopping');
    job.stoppedBy = actor;
    if (job.status === 'pending') {
      this.#endPending(job, reason);
      return answer('stopped');
    }
    this.#requestStop(job, reason);
    return answer('stopping');
  }

  /** Resolve with the job once it is terminal, or its snapshot when `timeoutMs` passes. */
  waitJob(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<Job> {
    const job = this.#job(jobId);
    return this.#watchers.until([job.id], () => isTerminal(job.status), timeoutMs, signal).then(() => toWireJob(job));
  }

  /**
   * `all`: until every watched job is terminal. `any` (seed 000's semantics): until one of the
   * watched jobs that were still active when the wait began ends; at once if none was. A job
   * that had already ended does not satisfy it, so a caller can wait again on the same ids.
   */
  async waitJobs(
    jobIds: readonly string[],
    timeoutMs: number,
    mode: 'any' | 'all',
    signal?: AbortSignal,
    includeTerminal = false,
  ): Promise<{ mode: 'any' | 'all'; done: boolean; jobs: Job[]; not_found: string[] }> {
    const unique = [...new Set(jobIds)];
    const found = unique.map((id) => this.#jobs.get(id)).filter((j): j is JobRecord => j !== undefined);
    const notFound = unique.filter((id) => !this.#jobs.has(id));
    // any-mode watches the jobs still active (seed 000); with includeTerminal, every known job
    const open = includeTerminal ? found : found.filter((j) => !isTerminal(j.status));
    const met = () =>
      found.length > 0 &&
      (mode === 'any' ? open.length === 0 || open.some((j) => isTerminal(j.status)) : open.every((j) => isTerminal(j.status)));
    if (found.length > 0) await this.#watchers.until(open.map((j) => j.id), met, timeoutMs, signal);
    return { mode, done: met(), jobs: found.map(toWireJob), not_found: notFound };
  }

  async readOutput(
    jobId: string,
    q: { tail_bytes?: number; offset?: number; limit_bytes?: number; wait_ms?: number },
    signal?: AbortSignal,
  ) {
    const job = this.#job(jobId);
    const out = job.output;
    let slice;
    if (q.offset === undefined) {
      slice = out.tail(q.tail_bytes ?? this.#config.outputPreviewBytes);
    } else {
      if (q.offset >= out.totalBytes && !isTerminal(job.status) && (q.wait_ms ?? 0) > 0) {
        const done = new AbortController();
        const onAbort = () => done.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        const outputCame = out.whenAppended(done.signal);
        const ended = this.#watchers.until([job.id], () => isTerminal(job.status), q.wait_ms!, done.signal);
        await Promise.race([outputCame, ended]);
        done.abort();
        signal?.removeEventListener('abort', onAbort);
      }
      slice = out.read(q.offset, q.limit_bytes ?? this.#config.outputMaxBytes);
    }
    return {
      job_id: job.id,
      status: job.status,
      terminal: isTerminal(job.status),
      output: slice.text,
      offset: slice.offset,
      next_offset: slice.end,
      total_bytes: out.totalBytes,
      retained_bytes: out.retainedBytes,
      truncated: out.truncated,
    };
  }

  // ---------------------------------------------------------------------------------------
  // Sessions
  // ---------------------------------------------------------------------------------------

  listSessions(q: ListSessionsQuery = {}): { sessions: Session[]; next_cursor: string | null } {
    const sessions: Session[] = [];
    for (const s of this.#sessions.values()) {
      if (q.parent !== undefined && s.parentName !== q.parent) continue;
      const wire = toWireSession(s);
      if (q.status !== undefined && wire.status !== q.status) continue;
      sessions.push(wire);
    }
    return { sessions, next_cursor: null };
  }

  getSession(name: string): Session {
    return toWireSession(this.#session(name));
  }

  /** Stop everything the session is doing: its queued jobs, then its active one. */
  stopSession(name: string, actor: string | null = null): StopSessionResponse {
    const s = this.#session(name);
    const targets = [...s.pending].reverse();
    if (s.active) targets.push(s.active);
    if (targets.length === 0) {
      throw new CoordinatorError('session_idle', `session ${name} is idle: it has no job to stop`, {
        session_name: name,
        current_status: 'idle',
      });
    }
    const stopped = targets.map((job) => {
      const { outcome, status } = this.stopJob(job.id, 'requested', actor);
      return { job_id: job.id, outcome, status };
    });
    return { session_name: name, stopped };
  }

  // ---------------------------------------------------------------------------------------
  // Launchers
  // ---------------------------------------------------------------------------------------

  /** `actor`: name of the token it registers with (audit: the launcher's `created_by`). */
  register(req: RegisterLauncherRequest, actor: string | null = null): RegisterLauncherResponse {
    const now = this.#clock.now();
    const id = this.#launchers.newId();
    const launcher = newLauncherRecord(id, req, now, actor);
    this.#launchers.add(launcher);
    this.#log.info({ launcher_id: id, hostname: launcher.hostname }, 'launcher registered');
    this.#emitLauncher('launcher.registered', launcher);
    return {
      launcher_id: id,
      poll_endpoint: '/launcher/jobs',
      poll_timeout_seconds: this.#config.pollTimeoutSeconds,
      heartbeat_interval_seconds: this.#config.heartbeatIntervalSeconds,
      claim_lease_seconds: this.#config.claimLeaseSeconds,
    };
  }

  /**
   * A launcher asks for work. Answers at once when there is something for it (deregistration,
   * stop requests, or, with capacity, the oldest claimable job), else parks until one of those
   * happens, `pollTimeoutSeconds` pass (null = 204) or `signal` aborts (the client left).
   */
  poll(launcherId: string, capacity: number, signal: AbortSignal): Promise<PollResponse | null> {
    const launcher = this.#launchers.live(launcherId);
    this.#launchers.touch(launcher);
    const now = this.#answerPoll(launcher, capacity);
    if (now || this.#closed) return Promise.resolve(now);
    return this.#launchers.park(launcher, capacity, signal, this.#config.pollTimeoutSeconds * 1000);
  }

  /**
   * A poll answer could not be written (the launcher's connection closed first): undo what
   * giving it out did. A claimed job goes back to its place in the queue; stop requests wait
   * for the next poll; a deregistration notice stays due.
   */
  pollAnswerLost(launcherId: string, answer: PollResponse): void {
    if (answer.job) this.releaseUndelivered(answer.job.job_id, launcherId);
    const launcher = this.#launchers.get(launcherId);
    for (const id of answer.stop_jobs ?? []) {
      const job = this.#jobs.get(id);
      if (launcher && job?.status === 'stopping' && job.launcherId === launcherId) launcher.pendingStops.add(id);
    }
  }

  /** A poll answer was written: a launcher told it is deregistered is forgotten once it holds no job. */
  pollAnswerDelivered(launcherId: string, answer: PollResponse): void {
    const launcher = this.#launchers.get(launcherId);
    if (answer.deregistered && launcher?.status === 'deregistering') this.#deregistrationDelivered(launcher);
  }

  /** The answer carrying a claimed job never reached the launcher: it goes back to the queue. */
  releaseUndelivered(jobId: string, launcherId: string): void {
    const job = this.#jobs.get(jobId);
    if (job && job.status === 'claimed' && job.launcherId === launcherId && job.startedAt === null) {
      this.#requeue(job, 'the poll answer carrying it was not delivered');
    }
  }

  heartbeat(req: HeartbeatRequest): HeartbeatResponse {
    const launcher = this.#launchers.live(req.launcher_id);
    this.#launchers.touch(launcher);
    const stop_jobs = [...launcher.activeJobs].filter((j) => j.status === 'stopping').map((j) => j.id);
    return { ok: true, stop_jobs };
  }

  report(kind: ReportKind, jobId: string, body: StartedReport | CompletedReport | FailedReport | StoppedReport): void {
    const job = this.#heldJob(body.launcher_id, jobId);
    if (body.executor_session_id) this.#setExecutorSession(job, body.executor_session_id);
    const now = this.#clock.now();
    const target: JobStatus =
      kind === 'started'
        ? 'running'
        : kind === 'stopped'
          ? stoppedStatus(job.stopReason)
          : kind;
    if (job.status === target) return; // a repeated report: already applied
    if (kind === 'started' && job.status === 'stopping') {
      // it started while a stop request was on its way: note it, the stop still stands
      if (job.startedAt === null) {
        job.startedAt = now;
        this.#emitJob('job.started', job);
      }
      return;
    }
    transition(job, target, now);
    if (kind === 'started') {
      job.startedAt = now;
      this.#emitJob('job.started', job);
      return;
    }
    if (kind === 'completed') {
      job.result = (body as CompletedReport).result ?? null;
      job.error = null;
    } else if (kind === 'failed') {
      const f = body as FailedReport;
      job.error = f.error;
    } else {
      const s = body as StoppedReport;
      job.error =
        s.error ??
        (job.stopReason === 'timeout'
          ? `timed out after ${job.timeoutMs} ms${s.signal ? ` (executor ended by ${s.signal})` : ''}`
          : `stopped by request${s.signal ? ` (executor ended by ${s.signal})` : ''}`);
    }
    this.#finish(job);
  }

  appendOutput(jobId: string, launcherId: string, offset: number, data: string): void {
    this.#heldJob(launcherId, jobId).output.append(offset, data);
  }

  listLaunchers(): { launchers: Launcher[] } {
    const now = this.#clock.now();
    return { launchers: [...this.#launchers.values()].map((l) => toWireLauncher(l, now)) };
  }

  /**
   * External removal (`self` false): the launcher is told on its current or next poll, may
   * finish and report its running jobs, and is forgotten once it holds none. `self` true (a
   * launcher leaving): gone at once; jobs it still holds are released.
   */
  deleteLauncher(launcherId: string, self: boolean): { outcome: 'deregistering' | 'removed' } {
    const launcher = this.#launchers.get(launcherId);
    if (!launcher) {
      throw new CoordinatorError('launcher_not_found', `launcher ${launcherId} not found`, {
        launcher_id: launcherId,
      });
    }
    if (self || launcher.status === 'stale') {
      this.#removeLauncher(launcher, self ? 'it deregistered itself' : 'it was removed');
      return { outcome: 'removed' };
    }
    launcher.status = 'deregistering';
    this.#log.info({ launcher_id: launcher.id }, 'launcher marked for deregistration');
    this.#emitLauncher('launcher.deregistering', launcher);
    this.#launchers.answer(launcher, { deregistered: true });
    return { outcome: 'deregistering' };
  }

  health(startedAt: number): Health {
    return {
      status: 'ok',
      uptime_seconds: Math.round(this.#clock.now() - startedAt) / 1000,
      queue_depth: this.#pendingCount,
      jobs_active: this.#active.size,
      launchers: this.#launchers.counts(),
    };
  }

  // ---------------------------------------------------------------------------------------
  // The sweeper: run by a timer; tests call it after moving a ManualClock.
  // ---------------------------------------------------------------------------------------

  sweep(): void {
    this.#holdingDispatch(() => this.#sweep());
  }

  #sweep(): void {
    const now = this.#clock.now();
    const leaseMs = this.#config.claimLeaseSeconds * 1000;
    const staleMs = this.#config.heartbeatTimeoutSeconds * 1000;

    for (const launcher of [...this.#launchers.values()]) {
      if (launcher.status === 'stale') {
        if (now - (launcher.staleAt ?? now) >= STALE_LAUNCHER_KEEP_MS) this.#forget(launcher);
        continue;
      }
      if (launcher.waiters.size > 0) launcher.lastSeen = now; // a parked poll is a sign of life
      if (now - launcher.lastSeen > staleMs) this.#loseLauncher(launcher, now);
    }

    for (const job of [...this.#active]) {
      if (job.startedAt !== null || job.claimedAt === null || now - job.claimedAt <= leaseMs) continue;
      if (job.status === 'claimed') {
        this.#requeue(job, `claim lease of ${this.#config.claimLeaseSeconds} s expired before it was started`);
      } else if (job.status === 'stopping') {
        job.error = 'stopped before its launcher started it';
        this.#end(job, stoppedStatus(job.stopReason));
      }
    }

    for (const job of this.#deadlines.popDue(now)) {
      if (isTerminal(job.status)) continue;
      if (job.status === 'pending') this.#endPending(job, 'timeout');
      else if (job.status !== 'stopping') this.#requestStop(job, 'timeout');
      // a stop already under way keeps its reason: the request came first, so it ends `stopped`
    }

    while (this.#endedHead < this.#ended.length) {
      const job = this.#ended[this.#endedHead]!;
      if (now - (job.completedAt ?? now) < this.#config.jobRetentionMs) break;
      this.#ended[this.#endedHead++] = undefined as unknown as JobRecord;
      this.#evict(job);
    }
    if (this.#endedHead > 1024 && this.#endedHead * 2 > this.#ended.length) {
      this.#ended.splice(0, this.#endedHead);
      this.#endedHead = 0;
    }
  }

  /** Answer every parked request (polls get 204, waits their snapshot): the server is closing. */
  close(): void {
    this.#closed = true;
    this.#launchers.answerAll(null);
    this.#watchers.close();
  }

  /** Reopen after close() (the same core served by a new server, e.g. after a restart). */
  reopen(): void {
    this.#closed = false;
    this.#watchers.reopen();
  }

  // ---------------------------------------------------------------------------------------
  // Persistence: the journal (journal.ts) records lifecycle events; these two methods turn the
  // live state into a snapshot and rebuild it from one.
  // ---------------------------------------------------------------------------------------

  snapshot(): StateSnapshot {
    const now = this.#clock.now();
    return {
      lastEventId: this.events.lastId,
      sessions: [...this.#sessions.values()].map(toWireSession),
      launchers: [...this.#launchers.values()].map((l) => toWireLauncher(l, now)),
      jobs: [...this.#jobs.values()].map(toWireJob),
    };
  }

  /**
   * Rebuild from a snapshot, on a fresh core. Launchers get a full heartbeat timeout from now to
   * come back (they keep their ids, so their polls and reports carry on); jobs they held are
   * released as usual if they do not. Output previews are not journaled and start empty.
   */
  restore(s: StateSnapshot): void {
    if (this.#jobs.size + this.#sessions.size + this.#launchers.size > 0) throw new Error('restore() needs an empty core');
    const now = this.#clock.now();
    this.events.continueAfter(s.lastEventId);
    for (const w of s.sessions) this.#sessions.set(w.session_name, fromWireSession(w));
    for (const w of s.launchers) this.#launchers.add(fromWireLauncher(w, now));
    const orphans: JobRecord[] = [];
    for (const w of s.jobs) {
      const session = this.#sessions.get(w.session_name);
      if (!session) {
        this.#log.error({ job_id: w.job_id, session_name: w.session_name }, 'journal: job without its session; skipped');
        continue;
      }
      const job = fromWireJob(w, ++this.#seq, this.#config.outputMaxBytes);
      this.#jobs.set(job.id, job);
      this.#bySeq.push(job);
      session.jobIds.push(job.id);
      if (isTerminal(job.status)) {
        this.#ended.push(job);
        continue;
      }
      if (job.timeoutMs !== null) this.#deadlines.push(job.createdAt + job.timeoutMs, job);
      if (job.callbackOf && session.callbackJobId === job.id) {
        const delivered = job.callbackOf.flatMap((id) => {
          const child = this.#jobs.get(id);
          return child ? [notificationOf(child, now)] : [];
        });
        this.#callbacks.restoreDelivery(job.id, delivered);
      }
      if (job.status === 'pending') {
        session.pending.push(job);
        this.#pendingCount++;
        continue;
      }
      session.active = job;
      const launcher = this.#holder(job);
      if (!launcher || launcher.status === 'stale') {
        orphans.push(job);
        continue;
      }
      launcher.activeJobs.add(job);
      this.#active.add(job);
      if (job.status === 'stopping') launcher.pendingStops.add(job.id);
    }
    this.#ended.sort((a, b) => (a.completedAt ?? 0) - (b.completedAt ?? 0));
    this.#holdingDispatch(() => this.#settleRestored(orphans));
  }

  #settleRestored(orphans: JobRecord[]): void {
    for (const job of orphans) {
      // held by a launcher that is gone: treat like a lost launcher
      this.#active.add(job);
      if (job.status === 'claimed') this.#requeue(job, 'its launcher is gone (found at restore)');
      else {
        job.error = `launcher ${job.launcherId} lost across a coordinator restart`;
        this.#end(job, 'interrupted');
      }
    }
    for (const session of this.#sessions.values()) this.#offerNext(session);
  }

  // ---------------------------------------------------------------------------------------
  // Internals: queue and dispatch
  // ---------------------------------------------------------------------------------------

  #enqueue(
    session: SessionRecord,
    f: {
      type: JobType;
      prompt: string;
      agentName: string | null;
      projectDir: string | null;
      timeoutMs: number | null;
      callbackOf: string[] | null;
      createdBy?: string | null;
    },
  ): JobRecord {
    const now = this.#clock.now();
    const job = newJobRecord(
      {
        seq: ++this.#seq,
        id: newId('job_', (x) => this.#jobs.has(x)),
        type: f.type,
        sessionName: session.name,
        agentName: f.agentName,
        prompt: f.prompt,
        projectDir: f.projectDir,
        parentSessionName: session.parentName,
        createdAt: now,
        timeoutMs: f.timeoutMs,
        callbackOf: f.callbackOf,
        createdBy: f.createdBy ?? null,
      },
      this.#config.outputMaxBytes,
    );
    this.#jobs.set(job.id, job);
    this.#bySeq.push(job);
    session.jobIds.push(job.id);
    session.pending.push(job);
    session.updatedAt = now;
    this.#pendingCount++;
    if (job.timeoutMs !== null) this.#deadlines.push(now + job.timeoutMs, job);
    this.#log.debug({ job_id: job.id, session_name: session.name, type: job.type }, 'job created');
    this.#emitJob('job.created', job);
    this.#emitSession(session);
    this.#offerNext(session);
    return job;
  }

  /** Put the session's first pending job in the ready queue if the session has no active job. */
  #offerNext(session: SessionRecord): void {
    const head = session.pending[0];
    if (session.active !== null || !head) return;
    this.#ready.insert(head);
    this.#dispatch();
  }

  /**
   * Run `change` without handing out jobs, then dispatch once. Used where several jobs go back
   * to the queue together (a lost launcher, the sweep, a restore): each takes its creation-order
   * place first, so the oldest is handed out first.
   */
  #holdingDispatch(change: () => void): void {
    this.#dispatchHeld++;
    try {
      change();
    } finally {
      this.#dispatchHeld--;
    }
    this.#dispatch();
  }

  /** Hand ready jobs to parked pollers, longest-waiting first. */
  #dispatch(): void {
    if (this.#dispatchHeld > 0) return;
    while (this.#ready.size > 0 && this.#launchers.hasJobWaiters) {
      const waiter = this.#launchers.takeJobWaiter();
      if (!waiter) return;
      const job = this.#ready.shift()!;
      this.#claim(job, waiter.launcher);
      waiter.finish({ job: toWireJob(job) });
    }
  }

  #answerPoll(launcher: LauncherRecord, capacity: number): PollResponse | null {
    // the launcher is forgotten once the notice is delivered (pollAnswerDelivered)
    if (launcher.status === 'deregistering') return { deregistered: true };
    if (launcher.pendingStops.size > 0) return this.#takeStops(launcher);
    if (capacity > 0) {
      const job = this.#ready.shift();
      if (job) {
        this.#claim(job, launcher);
        return { job: toWireJob(job) };
      }
    }
    return null;
  }

  #claim(job: JobRecord, launcher: LauncherRecord): void {
    const now = this.#clock.now();
    const session = this.#sessions.get(job.sessionName)!;
    session.pending.shift();
    session.active = job;
    this.#pendingCount--;
    transition(job, 'claimed', now);
    job.launcherId = launcher.id;
    job.claimedAt = now;
    job.attempts++;
    if (job.type === 'resume_session') job.executorSessionId = session.executorSessionId;
    launcher.activeJobs.add(job);
    this.#active.add(job);
    this.#log.debug({ job_id: job.id, launcher_id: launcher.id }, 'job claimed');
    this.#emitJob('job.claimed', job);
  }

  /** A claimed job that never started goes back to its creation-order place in the queue. */
  #requeue(job: JobRecord, why: string): void {
    const launcher = this.#holder(job);
    this.#log.warn({ job_id: job.id, launcher_id: job.launcherId }, `job requeued: ${why}`);
    launcher?.activeJobs.delete(job);
    this.#active.delete(job);
    transition(job, 'pending', this.#clock.now());
    job.launcherId = null;
    job.claimedAt = null;
    const session = this.#sessions.get(job.sessionName)!;
    session.active = null;
    session.pending.unshift(job);
    this.#pendingCount++;
    this.#emitJob('job.requeued', job);
    this.#offerNext(session);
  }

  #requestStop(job: JobRecord, reason: StopReason): void {
    const now = this.#clock.now();
    transition(job, 'stopping', now);
    job.stopRequestedAt = now;
    job.stopReason = reason;
    this.#log.info({ job_id: job.id, launcher_id: job.launcherId, reason }, 'job stopping');
    this.#emitJob('job.stopping', job);
    const launcher = this.#holder(job);
    if (!launcher) return;
    launcher.pendingStops.add(job.id);
    if (launcher.waiters.size > 0) this.#launchers.answer(launcher, this.#takeStops(launcher));
  }

  /** A pending job ends without running (stopped or timed out). */
  #endPending(job: JobRecord, reason: StopReason): void {
    const session = this.#sessions.get(job.sessionName)!;
    const wasHead = session.pending[0] === job;
    session.pending.splice(session.pending.indexOf(job), 1);
    this.#ready.remove(job);
    this.#pendingCount--;
    job.stopRequestedAt = this.#clock.now();
    job.stopReason = reason;
    job.error =
      reason === 'timeout' ? `timed out after ${job.timeoutMs} ms before a launcher took it` : 'stopped before it was claimed';
    this.#end(job, stoppedStatus(reason));
    if (wasHead) this.#offerNext(session);
  }

  #end(job: JobRecord, status: JobStatus): void {
    transition(job, status, this.#clock.now());
    this.#finish(job);
  }

  /** Everything that follows a job reaching a terminal status. */
  #finish(job: JobRecord): void {
    const launcher = this.#holder(job);
    launcher?.activeJobs.delete(job);
    launcher?.pendingStops.delete(job.id);
    this.#active.delete(job);
    this.#ended.push(job);

    const session = this.#sessions.get(job.sessionName)!;
    if (session.active === job) session.active = null;
    session.lastJobStatus = job.status;
    session.updatedAt = this.#clock.now();
    if (job.status === 'completed') session.lastResult = job.result;
    session.lastError = job.error;

    const level = job.status === 'completed' ? 'info' : 'warn';
    this.#log[level]({ job_id: job.id, launcher_id: job.launcherId, status: job.status, error: job.error }, `job ${job.status}`);
    this.#emitJob(`job.${job.status}` as 'job.completed', job);

    this.#watchers.ended(job.id);

    this.#callbacks.jobEnded(session, job);
    if (job.parentSessionName !== null) this.#callbacks.childEnded(job);
    this.#offerNext(session);
    this.#callbacks.deliver(session);
    this.#emitSession(session);
    if (launcher?.status === 'deregistering' && launcher.activeJobs.size === 0) {
      this.#removeLauncher(launcher, 'it finished its jobs after deregistration');
    }
  }

  #evict(job: JobRecord): void {
    this.#jobs.delete(job.id);
    if (++this.#evictedInIndex > 1024 && this.#evictedInIndex * 2 > this.#bySeq.length) {
      this.#bySeq = this.#bySeq.filter((j) => this.#jobs.get(j.id) === j);
      this.#evictedInIndex = 0;
    }
    const session = this.#sessions.get(job.sessionName);
    if (session) {
      const i = session.jobIds.indexOf(job.id);
      if (i >= 0) session.jobIds.splice(i, 1);
    }
    this.#emitJob('job.evicted', job);
  }

  // ---------------------------------------------------------------------------------------
  // Internals: sessions and callbacks
  // ---------------------------------------------------------------------------------------

  #parentSession(parentName: string): SessionRecord {
    const parent = this.#sessions.get(parentName);
    if (!parent) {
      throw new CoordinatorError('parent_session_not_found', `parent session ${parentName} not found`, {
        field: 'parent_session_name',
        session_name: parentName,
      });
    }
    if (parent.depth + 1 > MAX_SESSION_DEPTH) {
      throw new CoordinatorError(
        'depth_exceeded',
        `session chain too deep: ${parentName} is at depth ${parent.depth}; at most ${MAX_SESSION_DEPTH} levels of children are allowed`,
        { field: 'parent_session_name', max_depth: MAX_SESSION_DEPTH, parent_depth: parent.depth },
      );
    }
    return parent;
  }

  #newSession(req: CreateJobRequest, parent: SessionRecord | null): SessionRecord {
    const now = this.#clock.now();
    const session = newSessionRecord(
      { name: req.session_name, agentName: req.agent_name ?? null, projectDir: req.project_dir ?? null, parent },
      now,
    );
    this.#sessions.set(session.name, session);
    if (parent) {
      parent.children.push(session.name);
      this.#emitSession(parent);
    }
    this.#emitSession(session, 'session.created');
    return session;
  }

  #setExecutorSession(job: JobRecord, executorSessionId: string): void {
    const session = this.#sessions.get(job.sessionName)!;
    if (job.executorSessionId === executorSessionId && session.executorSessionId === executorSessionId) return;
    job.executorSessionId = executorSessionId;
    session.executorSessionId = executorSessionId;
    this.#emitSession(session);
  }

  // ---------------------------------------------------------------------------------------
  // Internals: launchers
  // ---------------------------------------------------------------------------------------

  #deregistrationDelivered(launcher: LauncherRecord): void {
    if (launcher.activeJobs.size === 0) this.#removeLauncher(launcher, 'it was deregistered');
  }

  /** No heartbeat or poll for too long: release its jobs; it must register again. */
  #loseLauncher(launcher: LauncherRecord, now: number): void {
    const silent = Math.round((now - launcher.lastSeen) / 1000);
    launcher.status = 'stale';
    launcher.staleAt = now;
    this.#log.warn({ launcher_id: launcher.id, silent_seconds: silent }, 'launcher stale');
    this.#releaseJobs(launcher, `launcher ${launcher.id} lost: no heartbeat or poll for ${silent} s`);
    this.#emitLauncher('launcher.stale', launcher);
  }

  #removeLauncher(launcher: LauncherRecord, why: string): void {
    // answer its parked polls first: they must not be handed the jobs it is about to release
    this.#launchers.answerAll({ deregistered: true }, launcher);
    this.#forget(launcher);
    this.#releaseJobs(launcher, `launcher ${launcher.id} left while the job was running (${why})`);
    this.#log.info({ launcher_id: launcher.id }, `launcher removed: ${why}`);
  }

  #forget(launcher: LauncherRecord): void {
    if (this.#launchers.delete(launcher)) this.#emitLauncher('launcher.removed', launcher);
  }

  /** Claimed-not-started jobs go back to the queue; running ones end as interrupted. */
  #releaseJobs(launcher: LauncherRecord, why: string): void {
    this.#holdingDispatch(() => {
      for (const job of [...launcher.activeJobs]) {
        if (job.status === 'claimed') this.#requeue(job, why);
        else {
          job.error = why;
          this.#end(job, 'interrupted');
        }
      }
    });
  }

  // ---------------------------------------------------------------------------------------
  // Internals: lookups and events
  // ---------------------------------------------------------------------------------------

  #job(jobId: string): JobRecord {
    const job = this.#jobs.get(jobId);
    if (!job) throw jobNotFound(jobId);
    return job;
  }

  /** A report's job: the launcher must be live (401) and hold it (409); a report is a sign of life. */
  #heldJob(launcherId: string, jobId: string): JobRecord {
    const launcher = this.#launchers.live(launcherId);
    this.#launchers.touch(launcher);
    const job = this.#job(jobId);
    if (job.launcherId !== launcher.id) {
      throw new CoordinatorError(
        'job_owned_by_other_launcher',
        `job ${job.id} is ${job.status} and not held by launcher ${launcher.id}`,
        { job_id: job.id, current_status: job.status, launcher_id: job.launcherId },
      );
    }
    return job;
  }

  /** The launcher holding the job, if any (and still registered). */
  #holder(job: JobRecord): LauncherRecord | undefined {
    return job.launcherId === null ? undefined : this.#launchers.get(job.launcherId);
  }

  /** Hand the launcher its pending stop requests, as a poll answer. */
  #takeStops(launcher: LauncherRecord): PollResponse {
    const stop_jobs = [...launcher.pendingStops];
    launcher.pendingStops.clear();
    return { stop_jobs };
  }

  #session(name: string): SessionRecord {
    const s = this.#sessions.get(name);
    if (!s) throw new CoordinatorError('session_not_found', `session ${name} not found`, { session_name: name });
    return s;
  }

  #emitJob(type: Parameters<EventLog['emit']>[0], job: JobRecord): void {
    this.events.emit(type, () => ({ job: toWireJob(job) }));
  }
  #emitSession(session: SessionRecord, type: 'session.created' | 'session.updated' = 'session.updated'): void {
    this.events.emit(type, () => ({ session: toWireSession(session) }));
  }
  #emitLauncher(type: Parameters<EventLog['emit']>[0], launcher: LauncherRecord): void {
    this.events.emit(type, () => ({ launcher: toWireLauncher(launcher, this.#clock.now()) }));
  }
}

/** Index of the last job whose seq is below `seq` in a list sorted by seq (-1 if none). */
function lastBelow(jobs: readonly JobRecord[], seq: number): number {
  let lo = 0;
  let hi = jobs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (jobs[mid]!.seq < seq) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

/** How a stopped job ends: `timed_out` when the stop was its timeout, else `stopped`. */
function stoppedStatus(reason: StopReason | null): 'stopped' | 'timed_out' {
  return reason === 'timeout' ? 'timed_out' : 'stopped';
}
