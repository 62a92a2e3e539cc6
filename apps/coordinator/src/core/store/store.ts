import type { EventType, JobStatus, LifecycleEvent } from '@agentq/protocol';
import type { HostBindingRow, IdempotencyRow, JobRow, LauncherRow, SessionRow } from '../rows.js';
import type { SessionExtras } from '../wire.js';

/*
 * The Store seam: what is persisted and read back. Three implementations:
 *   memory-store.ts   everything in memory (DATABASE_URL=memory:)
 *   sqlite-store.ts   the memory store as a hot cache, every change written through to SQLite
 *   postgres-store.ts all state in PostgreSQL, shared by several coordinators
 *
 * The lifecycle modules (jobs.ts, claims.ts, launchers.ts, sessions.ts, callbacks.ts) change state
 * only inside `transaction(fn)`, through the named operations of Tx. A transaction is atomic:
 * either all its changes are committed (and persisted, before the promise resolves) or none are.
 * After a commit the store reports what changed (`Commit`) to the core's reactions (dispatch of
 * parked polls, job watchers, events).
 */

export type EntityRef = { job: string } | { session: string } | { launcher: string };

/** A create announced to Tx.aheadOfCreates. */
export interface CreateAhead {
  session: string;
  parent: string | null;
  start: boolean;
}

export interface Tx {
  /** the transaction's clock reading: every timestamp it writes */
  readonly now: number;
  /**
   * The store refuses a second job with the same id itself, and runs the transaction again then
   * (PostgreSQL: a unique key), so a new random id need not be looked up first (a round trip).
   */
  readonly refusesDuplicateJobIds?: boolean;
  /**
   * A hint: this transaction creates jobs on these sessions next, in this order (`start`: a
   * start_session job, whose parent it reads first). A store that waits a round trip for every read
   * (PostgreSQL) sends the reads the creates will make (each session locked, its live jobs, the
   * sequence numbers) behind its next read, so they take no round trip of their own; they lock
   * what the creates would lock, in the order they would. Stores that answer from memory need
   * not implement it.
   */
  aheadOfCreates?(creates: readonly CreateAhead[]): void;

  // --- reads (a row read here is locked for the rest of the transaction, where that matters) ---
  job(id: string): Promise<JobRow | undefined>;
  session(name: string): Promise<SessionRow | undefined>;
  /**
   * A session without a lock (PostgreSQL): as last committed, or as this transaction holds it. For
   * a check a row a moment old cannot make wrong (a claim reading a tree's budget); a later
   * `session` of the same name still locks it.
   */
  peekSession(name: string): Promise<SessionRow | undefined>;
  launcher(id: string): Promise<LauncherRow | undefined>;
  /**
   * Every launcher as this transaction sees it, unlocked. Read on the transaction's own
   * connection: a read through the store would wait for another of the pool (PostgreSQL), and
   * with every connection held by a transaction doing the same, none would come.
   */
  launchers(): Promise<LauncherRow[]>;
  /** How many launchers this transaction sees (`launchers().length`, without reading them). */
  launcherCount(): Promise<number>;
  /** The launcher holding this (scoped) registration key, locked (LauncherRow.registrationKey). */
  launcherByRegistrationKey(key: string): Promise<LauncherRow | undefined>;
  /** the session's claimed, running or stopping job */
  activeJobOf(sessionName: string): Promise<JobRow | undefined>;
  /** the session's pending jobs, oldest first */
  pendingJobsOf(sessionName: string): Promise<JobRow[]>;
  /** jobs the launcher holds (claimed, running or stopping) */
  activeJobsOfLauncher(launcherId: string): Promise<JobRow[]>;
  /** the launcher's jobs with a stop it has not been told about (`stopPending`), oldest first */
  pendingStopsOf(launcherId: string): Promise<JobRow[]>;
  /**
   * Up to `max` ready jobs that `launcher` may take, oldest first, locked for this transaction
   * (another transaction's claim skips them). The caller must claim them (clear `readySince`).
   * A store that must read the rows from elsewhere (PostgreSQL) may stop once their text passes
   * `maxBytes` (the first job always): the claim would not hand out more in one answer.
   */
  readyJobsFor(launcher: LauncherRow, max: number, maxBytes: number): Promise<JobRow[]>;
  idempotency(key: string): Promise<IdempotencyRow | undefined>;
  /** the token a host identity is bound to, if any */
  hostBinding(hostId: string): Promise<HostBindingRow | undefined>;

  // --- writes ---
  nextJobSeq(): Promise<number>;
  nextSessionSeq(): Promise<number>;
  insertJob(row: JobRow): Promise<void>;
  updateJob(id: string, patch: Partial<JobRow>): Promise<JobRow>;
  insertSession(row: SessionRow): Promise<void>;
  updateSession(name: string, patch: Partial<SessionRow>): Promise<SessionRow>;
  insertLauncher(row: LauncherRow): Promise<void>;
  updateLauncher(id: string, patch: Partial<LauncherRow>): Promise<LauncherRow>;
  deleteLauncher(id: string): Promise<void>;
  putIdempotency(row: IdempotencyRow): Promise<void>;
  /** bind a host identity (again: a binding read in this transaction is replaced) */
  putHostBinding(row: HostBindingRow): Promise<void>;
  /** history retention: the job's events still carry its last version */
  deleteJob(id: string): Promise<void>;
  deleteSession(name: string): Promise<void>;

  /** A lifecycle event, sent after the commit with the entity as committed. */
  emit(type: EventType, ref: EntityRef): void;
  /**
   * Run `fn` once the transaction is committed (on disk, with its events sent); never when it is
   * rolled back or refused (a full disk), nor once per attempt of a transaction run again. For the
   * log lines that tell what a transaction did: written before the commit, they told of changes
   * that never happened.
   */
  afterCommit(fn: () => void): void;
}

/** What a committed transaction changed, for the core's reactions. */
export interface Commit {
  events: LifecycleEvent[];
  /** route keys of jobs that became ready, each with how many of its jobs did */
  readyKeys: Map<string, number>;
  /** launchers with a stop to be told, or a deregistration notice (or that were removed) */
  launchersToWake: Set<string>;
  /** jobs that reached a terminal status */
  ended: Set<string>;
  /** a launcher registered, changed status or left: routing answers may change */
  launchersChanged: boolean;
}

/** Rows of a list, newest first; `cut`: rows past `maxBytes` were left out (there are more). */
export interface ListPage<T> {
  rows: T[];
  cut: boolean;
}

export interface JobBrief {
  id: string;
  status: JobStatus;
  size: number;
}

export interface ListJobsFilter {
  statuses?: ReadonlySet<JobStatus>;
  sessionName?: string;
  launcherId?: string;
  terminal?: boolean;
  limit: number;
  /** seq: jobs older than this */
  before?: number;
  /**
   * The answer's text budget (MAX_ANSWER_BYTES). A store that reads rows from a file or a server
   * may stop before the first row whose text, with the rows' before it, passes it (the first row
   * always), and says so (`ListPage.cut`): the caller cannot keep more in one answer. Counted in
   * UTF-8 bytes of prompt, result and error, never less than `jobTextSize` counts.
   */
  maxBytes?: number;
}

/** A page of `listLaunchers`: keyset paging on the registration order, so that no launcher is skipped or listed twice. */
export interface LaunchersPage {
  /** the previous page's last launcher: the page starts after it */
  after?: LauncherKey;
  limit?: number;
}
export interface LauncherKey {
  registeredAt: number;
  id: string;
}

/** The registration order of launchers (listLaunchers): negative when `a` comes before `b`. */
export function compareLaunchers(a: LauncherKey, b: LauncherKey): number {
  if (a.registeredAt !== b.registeredAt) return a.registeredAt - b.registeredAt;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export interface ListSessionsFilter {
  parent?: string;
  /** only sessions without a parent */
  root?: boolean;
  status?: 'idle' | 'busy';
  limit: number;
  before?: number;
  /** as ListJobsFilter.maxBytes, over the sessions' last results and errors */
  maxBytes?: number;
}

export interface OutputSlice {
  text: string;
  offset: number;
  end: number;
}

export interface OutputInfo {
  totalBytes: number;
  retainedBytes: number;
  truncated: boolean;
}

export interface StoreCounts {
  pending: number;
  active: number;
  /**
   * UTF-8 bytes of the prompts of pending jobs, for admission (MAX_QUEUED_BYTES). A store that
   * does not keep pending prompts in memory may leave it out: no byte limit is applied then.
   */
  pendingBytes?: number;
}

/** A ready bucket, for schedule timeouts, pending reasons and metrics. */
export interface ReadyBucket {
  key: string;
  size: number;
  /** when its oldest job (by creation) became ready */
  headReadySince: number;
}

export interface Store {
  readonly kind: 'memory' | 'sqlite' | 'postgres';
  /** whether several coordinators may share it (changes by others arrive through onCommit) */
  readonly shared: boolean;
  /**
   * Whether the store can be reached now, as far as it knows without asking (`GET /ready`): false
   * while PostgreSQL's control connection is lost (it reconnects by itself). SQLite is always
   * available: a full disk refuses writes, but reads go on and there is no other coordinator to
   * send clients to (and a coordinator taken out of rotation would get no write to find that the
   * disk has room again).
   */
  readonly available: boolean;

  /** Run `fn` atomically. Its changes are persisted before the returned promise resolves. */
  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T>;
  /** Called after every commit (also, for a shared store, the commits of other coordinators). */
  onCommit(listener: (commit: Commit) => void): void;
  /**
   * Resolves once everything the store has applied so far is on disk (rejects with 503
   * `storage_unavailable` if it could not be written); undefined when it already is. A store that
   * commits several transactions together (SQLite) applies each at once but writes them as a
   * group: an answer that may show any of them waits for this first.
   */
  settled?(): Promise<void> | undefined;

  // --- reads outside transactions (a committed view) ---
  getJob(id: string): Promise<JobRow | undefined>;
  /**
   * The status and text size of each of the jobs (unknown ids left out; in no particular order):
   * what a wait checks on each commit, without reading prompts. `size` is never less than
   * `jobTextSize` counts (UTF-8 bytes, in the stores that read rows from a file or a server).
   */
  jobBriefs(ids: readonly string[]): Promise<JobBrief[]>;
  getSession(name: string): Promise<SessionRow | undefined>;
  /**
   * A session's derived view: its active job, whether it is busy, and the newest of its jobs and
   * of its children (at most MAX_SESSION_LIST_ITEMS of each, read with a LIMIT) with their counts.
   */
  sessionExtras(session: SessionRow): Promise<SessionExtras>;
  /** sessionExtras of each (PostgreSQL: in one round trip) */
  sessionsExtras(sessions: readonly SessionRow[]): Promise<SessionExtras[]>;
  /** Every child session of a session, oldest first: for walking a tree, never for a wire view. */
  childNames(name: string): Promise<string[]>;
  getLauncher(id: string): Promise<LauncherRow | undefined>;
  /**
   * Every launcher, in no particular order (health, sweeps); with `page` (`GET /launchers`), in
   * registration order (`registeredAt`, then `id` as plain code points: launchers registered at
   * the same instant), those after `page.after` (the last of the previous page), at most
   * `page.limit`.
   */
  listLaunchers(page?: LaunchersPage): Promise<LauncherRow[]>;
  /**
   * The launchers whose status is `online` (what `pending_reason` and the schedule timeout judge
   * by), when the store can answer it without reading every launcher (PostgreSQL: a copy kept
   * until a commit changes a launcher's status). Without it, `listLaunchers` filtered.
   */
  onlineLaunchers?(): Promise<LauncherRow[]>;
  /**
   * The jobs each of `ids` holds (claimed, running, stopping), oldest first; a launcher that holds
   * none may be missing. One read for a page of launchers (PostgreSQL: one query, not one each).
   */
  activeJobIdsOfLaunchers(ids: readonly string[]): Promise<Map<string, string[]>>;
  /** every claimed, running or stopping job */
  activeJobIds(): Promise<string[]>;
  /** newest first */
  listJobs(filter: ListJobsFilter): Promise<ListPage<JobRow>>;
  listSessions(filter: ListSessionsFilter): Promise<ListPage<SessionRow>>;
  counts(): Promise<StoreCounts>;
  /**
   * UTF-8 bytes of the prompts of pending jobs, for a store that holds them in memory (admission,
   * MAX_QUEUED_BYTES). Read without I/O, because admission runs inside the creating transaction,
   * where a store with a connection pool must not wait for a second connection. A store without
   * it (PostgreSQL: prompts stay in the database) gets no byte limit.
   */
  pendingPromptBytes?(): number;
  /** UTF-8 bytes of the messages sessions hold for their next turn, alongside pendingPromptBytes */
  pendingMessageBytes?(): number;
  /**
   * UTF-8 bytes of the results and errors of the child outcomes sessions hold for a delivery
   * (queued, or carried by one in flight), alongside pendingPromptBytes
   */
  heldOutcomeBytes?(): number;
  /**
   * Jobs held, by status (history included), read at every scrape of /metrics: from counts the
   * commits keep (memory, SQLite: in memory; PostgreSQL: tables a trigger keeps), never a
   * count over the jobs of the whole retention period.
   */
  countByStatus(): Promise<Partial<Record<JobStatus, number>>>;
  readyBuckets(): Promise<ReadyBucket[]>;
  /**
   * Ready jobs of one bucket that JOB_SCHEDULE_TIMEOUT may fail, oldest first: deliveries (they
   * wait for their host, rows.isDelivery) are left out, so that however many wait at the head of
   * a bucket, the jobs behind them are reached.
   */
  readyJobsIn(key: string, limit: number): Promise<JobRow[]>;

  /** A sign of life of a launcher (not transactional; may be coarse in a shared store). */
  touchLauncher(id: string, now: number): Promise<void>;

  // --- output: batches at byte offsets; the newest `outputMaxBytes` per job are kept ---
  /**
   * Store a batch; returns the number of new bytes stored. `holder`: the launcher the batch comes
   * from, checked as the batch is stored (atomically with it): null, and nothing stored, when that
   * launcher no longer holds the job or is gone or stale (the caller's earlier check is not
   * enough: another coordinator may requeue the job, or declare its launcher stale, in between).
   */
  appendOutput(jobId: string, offset: number, data: string, holder?: string): Promise<number | null>;
  /**
   * Whether appendOutput(…, holder) refuses (null) a job the store does not have as well, so that
   * its own check is all a batch needs on its way in, and the caller looks for the refusal's
   * reason only once it refused: PostgreSQL (the job's row is read and locked with its holder).
   * Memory and SQLite: no, their check lets through a job that is not in memory (an ended job
   * SQLite let go of, whose holder no longer changes), and so an id of no job at all: the caller
   * checks first.
   */
  readonly appendOutputChecksJob: boolean;
  readOutput(jobId: string, from: number | null, limit: number): Promise<OutputSlice & OutputInfo>;
  /**
   * Resolves when output arrives for the job (or the signal aborts). `after`: the stream length
   * the caller has seen; a shared store, told of appends by other coordinators with a delay,
   * resolves only for output beyond it (and at once if there already is).
   */
  whenOutput(jobId: string, signal: AbortSignal, after?: number): Promise<void>;

  // --- housekeeping for the sweeper ---
  /** non-terminal jobs whose timeout is due at `now` */
  dueTimeouts(now: number): Promise<string[]>;
  /** claimed jobs not started whose claim is older than `before` */
  expiredClaims(before: number): Promise<string[]>;
  /**
   * History past retention, at most `limit` of each: terminal jobs that ended at or before
   * `before`, and idle sessions last changed by then with no jobs, children, callbacks or messages
   * left.
   */
  historyDue(before: number, limit: number): Promise<{ jobs: string[]; sessions: string[] }>;
  /** forget Idempotency-Keys older than `before` */
  purgeIdempotency(before: number): Promise<void>;
  /** let go of memory held for history (the durable stores keep a bounded hot window) */
  trimCache(): void;
  /**
   * The sweeper's record of routes no online launcher serves, and since when (JOB_SCHEDULE_TIMEOUT
   * counts from it): kept by a durable store so a restart (or, on PostgreSQL, another coordinator
   * taking over the sweeping) does not start the timeout over.
   * Absent: kept in memory only.
   */
  unservedSince?(): Promise<Map<string, number>>;
  /** replace that record */
  keepUnservedSince?(routes: ReadonlyMap<string, number>): Promise<void>;

  // --- shared stores (several coordinators): optional, absent = one coordinator ---
  /** the last event id committed when the store opened: event numbering continues after it */
  readonly lastEventId?: number;
  /**
   * The last event id the previous run used, when it is known (SQLite, after a clean stop): the
   * ids between it and `lastEventId` were reserved but never used, so a client that saw it has
   * missed nothing.
   */
  readonly lastEventIdUsed?: number;
  /**
   * Whether this coordinator runs the sweeper now: it holds the store's sweeper lock, or takes
   * it if free. At most one coordinator holds it; another takes over when its holder dies.
   */
  sweeperLease?(): Promise<boolean>;
  /**
   * Committed events with afterId < id < beforeId still kept, oldest first (SSE replay): the
   * newest of them, from at most `limit` commits whose logged events take at most `maxBytes`
   * (the newest commit always).
   */
  eventsSince?(afterId: number, beforeId: number, limit: number, maxBytes: number): Promise<LifecycleEvent[]>;
  /** forget old committed events (retention, by the sweeper) */
  purgeEvents?(now: number): Promise<void>;
  /** fold the job status changes a trigger recorded into the counts by status (PostgreSQL) */
  foldJobCounts?(): Promise<void>;

  close(): Promise<void>;
}
