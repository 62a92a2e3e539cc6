import { isTerminal, MAX_SESSION_LIST_ITEMS, type JobStatus, type LifecycleEvent } from '@agentq/protocol';
import type { Logger } from 'pino';
import { jobTextSize } from '../answer-budget.js';
import { iso } from '../clock.js';
import type { Clock } from '../clock.js';
import { OutputBuffer } from '../output-buffer.js';
import { holdsNoInput, isDelivery, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import { toWireLauncher, type SessionExtras } from '../wire.js';
import { runAfterCommit } from './after-commit.js';
import { compactEvents, hintsOf, type ChangeSet } from './changes.js';
import { jobEvent, sessionEvent, type EventExtras } from './lazy-events.js';
import { MemoryState, type StateLoader } from './memory-state.js';
import { MemoryTx } from './memory-tx.js';
import { Mutex } from './mutex.js';
import {
  compareLaunchers,
  type Commit,
  type JobBrief,
  type LaunchersPage,
  type ListJobsFilter,
  type ListPage,
  type ListSessionsFilter,
  type OutputInfo,
  type OutputSlice,
  type ReadyBucket,
  type Store,
  type StoreCounts,
  type Tx,
} from './store.js';

export interface MemoryStoreOptions {
  clock: Clock;
  log: Logger;
  /** output bytes kept per job */
  outputMaxBytes: number;
  /** entries of `job_ids` and `children` a session's wire view carries at most (MAX_SESSION_LIST_ITEMS) */
  sessionListMax?: number;
}

/**
 * The in-memory store (DATABASE_URL=memory:): the whole state in a MemoryState, one transaction
 * at a time. The SQLite store extends it: `persist` writes a change set through before it is
 * applied, and history is read from the database.
 */
export class MemoryStore implements Store {
  readonly kind: Store['kind'] = 'memory';
  readonly shared = false;
  /** holds() lets a job not in memory through: see Store.appendOutputChecksJob */
  readonly appendOutputChecksJob: boolean = false;
  get available(): boolean {
    return true;
  }
  protected readonly state: MemoryState;
  protected readonly options: MemoryStoreOptions;
  protected readonly outputs = new Map<string, OutputBuffer>();
  readonly #mutex = new Mutex();
  readonly #listeners: ((commit: Commit) => void)[] = [];

  constructor(options: MemoryStoreOptions, state?: { fullHistory: boolean; loader?: StateLoader }) {
    this.options = options;
    this.state = new MemoryState(state?.fullHistory ?? true, state?.loader);
  }

  onCommit(listener: (commit: Commit) => void): void {
    this.#listeners.push(listener);
  }

  async transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    const wait = this.#mutex.acquire();
    if (wait) await wait;
    let commit: Commit | undefined;
    let result: T;
    let tx: MemoryTx;
    try {
      tx = new MemoryTx(this.state, this.options.clock.now());
      result = await fn(tx);
      commit = this.#commit(tx.changes(), tx.now);
    } finally {
      this.#mutex.release();
    }
    if (commit) {
      this.committed(commit);
      const onDisk = this.settled();
      if (onDisk) await onDisk;
    }
    runAfterCommit(tx.committed, this.options.log);
    return result;
  }

  /** What `transaction` holds: a group of commits is committed under it too (sqlite-group.ts). */
  protected lock(): Promise<void> | undefined {
    return this.#mutex.acquire();
  }

  protected unlock(): void {
    this.#mutex.release();
  }

  /** A commit is made: its events go out now (SQLite: once its group of commits is on disk). */
  protected committed(commit: Commit): void {
    this.deliver(commit);
  }

  /** Everything applied is on disk at once here (see Store.settled). */
  settled(): Promise<void> | undefined {
    return undefined;
  }

  #commit(changes: ChangeSet, now: number): Commit | undefined {
    changes.events = compactEvents(changes.events);
    if (changes.jobs.size + changes.sessions.size + changes.launchers.size + changes.idempotency.length + changes.hostBindings.length === 0) {
      if (changes.events.length === 0) return undefined;
    }
    const firstEventId = this.state.lastEventId + 1;
    this.persist(changes, firstEventId + changes.events.length - 1);
    this.state.apply(changes);
    this.state.lastEventId += changes.events.length;
    const at = iso(now);
    const events: LifecycleEvent[] = changes.events.map((e, i) => {
      const id = firstEventId + i;
      // job and session events make their wire view when read (lazy-events.ts)
      if ('job' in e.ref) {
        const row = this.state.jobs.get(e.ref.job) ?? changes.jobs.get(e.ref.job)?.before;
        return jobEvent(id, e.type, at, row!);
      }
      if ('session' in e.ref) {
        const row = this.state.sessions.get(e.ref.session) ?? changes.sessions.get(e.ref.session)?.before;
        return sessionEvent(id, e.type, at, row!, this.eventExtras(row!));
      }
      const row = this.state.launchers.get(e.ref.launcher) ?? changes.launchers.get(e.ref.launcher)?.before;
      const held = [...(this.state.launcherActive.get(row!.id) ?? [])];
      return { id, type: e.type, at, launcher: toWireLauncher(row!, held, now) } as LifecycleEvent;
    });
    for (const c of changes.jobs.values()) if (c.kind === 'delete') this.outputs.delete(c.before.id);
    return { events, ...hintsOf(changes) };
  }

  /** Tell the listeners; one that fails is logged and never undoes the commit. */
  protected deliver(commit: Commit): void {
    for (const listener of this.#listeners) {
      try {
        listener(commit);
      } catch (err) {
        this.options.log.error({ err }, 'commit listener failed');
      }
    }
  }

  /** Write a change set through before it is applied (durable stores); throw to refuse it. */
  protected persist(_changes: ChangeSet, _lastEventId: number): void {}

  /** A session's derived view, synchronously. */
  protected extrasNow(s: SessionRow): SessionExtras {
    return this.state.sessionExtras(s, this.listMax);
  }

  /** MAX_SESSION_LIST_ITEMS: the entries of each list of a session's wire view */
  protected get listMax(): number {
    return this.options.sessionListMax ?? MAX_SESSION_LIST_ITEMS;
  }

  /** A session's derived view for an event of the commit being made (lazy-events.ts). */
  protected eventExtras(s: SessionRow): EventExtras {
    return this.extrasNow(s);
  }

  // --- reads -------------------------------------------------------------------------------

  async getJob(id: string): Promise<JobRow | undefined> {
    return this.state.job(id);
  }
  async jobBriefs(ids: readonly string[]): Promise<JobBrief[]> {
    const out: JobBrief[] = [];
    for (const id of ids) {
      const row = this.state.job(id);
      if (row) out.push({ id, status: row.status, size: jobTextSize(row) });
    }
    return out;
  }
  async getSession(name: string): Promise<SessionRow | undefined> {
    return this.state.session(name);
  }
  async sessionExtras(session: SessionRow): Promise<SessionExtras> {
    return this.extrasNow(session);
  }
  async sessionsExtras(sessions: readonly SessionRow[]): Promise<SessionExtras[]> {
    return sessions.map((s) => this.extrasNow(s));
  }
  async childNames(name: string): Promise<string[]> {
    return this.state.childNames(name);
  }
  async getLauncher(id: string): Promise<LauncherRow | undefined> {
    return this.state.launchers.get(id);
  }
  async listLaunchers(page?: LaunchersPage): Promise<LauncherRow[]> {
    const rows = [...this.state.launchers.values()];
    if (page === undefined) return rows;
    // the map is in insertion order, which a file read back (SQLite) need not keep: sorted here
    // (at most MAX_LAUNCHERS rows, a few milliseconds; a page leaves out those before it first)
    const { after, limit } = page;
    const list = (after === undefined ? rows : rows.filter((l) => compareLaunchers(l, after) > 0)).sort(compareLaunchers);
    if (limit !== undefined && list.length > limit) list.length = limit;
    return list;
  }
  async activeJobIdsOfLaunchers(ids: readonly string[]): Promise<Map<string, string[]>> {
    return new Map(ids.map((id) => [id, [...(this.state.launcherActive.get(id) ?? [])]]));
  }
  async activeJobIds(): Promise<string[]> {
    return [...this.state.active];
  }
  async listJobs(filter: ListJobsFilter): Promise<ListPage<JobRow>> {
    return { rows: this.state.listJobs(filter), cut: false };
  }
  async listSessions(filter: ListSessionsFilter): Promise<ListPage<SessionRow>> {
    return { rows: this.state.listSessions(filter), cut: false };
  }
  pendingPromptBytes(): number {
    return this.state.pendingBytes;
  }
  pendingMessageBytes(): number {
    return this.state.messageBytes;
  }
  heldOutcomeBytes(): number {
    return this.state.outcomeBytes;
  }
  async counts(): Promise<StoreCounts> {
    return { pending: this.state.pendingCount, active: this.state.active.size, pendingBytes: this.state.pendingBytes };
  }
  async countByStatus(): Promise<Partial<Record<JobStatus, number>>> {
    return this.state.statusCounts();
  }
  async readyBuckets(): Promise<ReadyBucket[]> {
    return this.state.ready.buckets().map(({ key, size, headReadySince }) => ({ key, size, headReadySince }));
  }
  async readyJobsIn(key: string, limit: number): Promise<JobRow[]> {
    const rows: JobRow[] = [];
    for (const id of this.state.ready.idsIn(key)) {
      if (rows.length >= limit) break;
      const job = this.state.jobs.get(id)!;
      if (!isDelivery(job)) rows.push(job);
    }
    return rows;
  }

  /** Whether `launcher` could claim something now (the dispatcher's cheap pre-check). */
  hasReadyFor(launcher: LauncherRow): boolean {
    return this.state.ready.hasFor(launcher);
  }

  async touchLauncher(id: string, now: number): Promise<void> {
    this.state.patchLauncher(id, { lastSeen: now });
  }

  // --- output ------------------------------------------------------------------------------

  protected buffer(jobId: string): OutputBuffer {
    let buf = this.outputs.get(jobId);
    if (!buf) this.outputs.set(jobId, (buf = this.loadOutput(jobId)));
    return buf;
  }

  async appendOutput(jobId: string, offset: number, data: string, holder?: string): Promise<number | null> {
    if (holder !== undefined && !this.holds(jobId, holder)) return null;
    const buf = this.buffer(jobId);
    const stored = buf.append(offset, data);
    if (stored > 0 || offset > (this.state.jobs.get(jobId)?.outputBytes ?? 0)) {
      this.state.patchJob(jobId, { outputBytes: buf.totalBytes });
    }
    return stored;
  }

  /**
   * Whether `launcherId` holds the job and is neither gone nor stale. A job not in memory (history
   * a durable store let go of, store/sqlite-store.ts) has ended: its holder no longer changes.
   */
  protected holds(jobId: string, launcherId: string): boolean {
    const job = this.state.jobs.get(jobId);
    if (job !== undefined && job.launcherId !== launcherId) return false;
    const launcher = this.state.launchers.get(launcherId);
    return launcher !== undefined && launcher.status !== 'stale';
  }

  async readOutput(jobId: string, from: number | null, limit: number): Promise<OutputSlice & OutputInfo> {
    const buf = this.outputs.get(jobId) ?? this.loadOutput(jobId);
    const slice = from === null ? buf.tail(limit) : buf.read(from, limit);
    return { ...slice, totalBytes: buf.totalBytes, retainedBytes: buf.retainedBytes, truncated: buf.truncated };
  }

  /** Output of a job not in memory (the durable stores read it back). */
  protected loadOutput(_jobId: string): OutputBuffer {
    return new OutputBuffer(this.options.outputMaxBytes);
  }

  whenOutput(jobId: string, signal: AbortSignal): Promise<void> {
    return this.buffer(jobId).whenAppended(signal);
  }

  // --- housekeeping ------------------------------------------------------------------------

  async dueTimeouts(now: number): Promise<string[]> {
    // once each: a job revived by an undone group commit may have its deadline twice (memory-state.ts)
    return [...new Set(this.state.deadlines.popDue(now))].filter((id) => {
      const job = this.state.jobs.get(id);
      return job !== undefined && !isTerminal(job.status);
    });
  }

  async expiredClaims(before: number): Promise<string[]> {
    const out: string[] = [];
    for (const id of this.state.active) {
      const job = this.state.jobs.get(id)!;
      if (job.startedAt === null && job.claimedAt !== null && job.claimedAt < before) out.push(id);
    }
    return out;
  }

  async historyDue(before: number, limit: number): Promise<{ jobs: string[]; sessions: string[] }> {
    const jobs: string[] = [];
    let consumed = 0;
    for (const id of this.state.endedIds()) {
      const job = this.state.jobs.get(id);
      if (job && (job.completedAt ?? 0) > before) break;
      consumed++;
      if (job) jobs.push(id);
      if (jobs.length >= limit) break;
    }
    this.state.dropEnded(consumed);
    const sessions: string[] = [];
    // the map's order is least recently changed first: stop at the first recent one
    for (const s of this.state.sessions.values()) {
      if (sessions.length >= limit || s.updatedAt > before) break;
      if (this.#sessionExpired(s, before)) sessions.push(s.name);
    }
    return { jobs, sessions };
  }

  #sessionExpired(s: SessionRow, before: number): boolean {
    return (
      s.updatedAt <= before &&
      !this.state.isBusy(s.name) &&
      !this.state.hasJobs(s.name) &&
      !this.state.hasChildren(s.name) &&
      holdsNoInput(s, this.state.sessions.get(s.rootName)) &&
      s.deliveryJobId === null
    );
  }

  async purgeIdempotency(before: number): Promise<void> {
    for (const [key, row] of this.state.idempotency) {
      if (row.createdAt >= before) break; // insertion order is creation order
      this.state.idempotency.delete(key);
    }
  }

  trimCache(): void {}

  async close(): Promise<void> {}
}
