import { createHash } from 'node:crypto';
import { isTerminal, type EventType } from '@agentq/protocol';
import type { QueryResultRow } from 'pg';
import { CoordinatorError } from '../errors.js';
import { routeFromKey, serves } from '../routing.js';
import { isActive, type HostBindingRow, type IdempotencyRow, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import { emptyChangeSet, record, type ChangeSet } from './changes.js';
import type { Pipeline } from './pg-pipeline.js';
import { insertSql, JOB_TEXT_BYTES, lookupOfNul, updateSql } from './pg-sql.js';
import { decode, HOST_BINDINGS, IDEMPOTENCY, JOBS, LAUNCHERS, SESSIONS, type Table } from './sql-rows.js';
import type { CreateAhead, EntityRef, Tx } from './store.js';

const missing = (what: string) => new CoordinatorError('internal_error', `transaction: ${what} is missing`);
const ACTIVE = `('claimed', 'running', 'stopping')`;

/** Prepared-statement names by SQL text: each connection plans a statement once. */
const names = new Map<string, string>();
export function statementName(text: string): string {
  let name = names.get(text);
  if (!name) names.set(text, (name = `agentq_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`));
  return name;
}

/**
 * PostgreSQL text cannot hold NUL, which separates the token name from the key in an
 * Idempotency-Key's row key: a space stands in (neither token names nor keys may contain one).
 */
const pgText = (s: string): string => s.replaceAll('\u0000', ' ');

/** Route key -> launcher id -> whether it serves the key (labels and roots never change for an id). */
export type ServesCache = Map<string, Map<string, boolean>>;

const LOCK_SESSION = 'SELECT * FROM sessions WHERE name = $1 FOR UPDATE';
const LIVE_JOBS = 'SELECT * FROM jobs WHERE session_name = $1 AND completed_at IS NULL ORDER BY seq FOR UPDATE';
/** n job and m session sequence numbers, each list in the order taken */
const SEQS = `SELECT ARRAY(SELECT nextval('jobs_seq') FROM generate_series(1, $1::int) ORDER BY 1) AS jobs,
  ARRAY(SELECT nextval('sessions_seq') FROM generate_series(1, $2::int) ORDER BY 1) AS sessions`;

type Raw = Record<string, unknown>;

/** A statement that reads or writes the sessions table (see PgTx.#unwritten). */
const SESSIONS_TABLE = /\bsessions\b/;

/**
 * One transaction on one pooled connection (BEGIN .. COMMIT by the store), at READ COMMITTED.
 * Writes go straight to SQL, so queries see them, but without waiting for their answers (they
 * ride with the next read, or the COMMIT: pg-pipeline.ts); the rows this transaction locked are
 * kept here, so it reads each at most once.
 *
 * Locks (what the store relies on; see docs/architecture.md, "PostgreSQL"):
 * - every point read locks its row (`FOR UPDATE`) for the rest of the transaction;
 * - a parent session is locked before its children: a tree stop locks its sessions parents
 *   first, and a start (or its replay) locks its parent before its own session (#sendAhead,
 *   sessions.createJob). An agent's turn locks its own session first (checkTurnGoesOn locks its
 *   job), in order too: an agent acts only on its session's subtree (http/auth/agent-scope.ts),
 *   so that session is the parent, or an ancestor, of what it starts or messages. Two
 *   exceptions: a child's job ending gives its outcome to its parent (and its cost to every
 *   ancestor) after locking the child; and the budget check of a new job or a message on a child
 *   session (budget.ts) locks the tree's root after that session (for a start, after its parent
 *   too; for an agent's turn, after the turn's session). With a tree stop of that parent or root
 *   at that moment they may deadlock, and the store runs them again;
 * - a job is locked only after its session (job(id) locks the session first), and a session's
 *   live jobs (activeJobOf, pendingJobsOf) are read in one locking statement after the session:
 *   while a transaction holds a session, only a claim can change that session's jobs, and the
 *   single statement sees a claim either wholly or not at all;
 * - readyJobsFor locks only jobs, with SKIP LOCKED (it never waits), and the sessions of the jobs
 *   it returns are read without a lock: what a claim reads from a session (executor session id,
 *   affinity) changes only while the session has an active job, which a session with a ready job
 *   has not; nor does it lock the root session of a child job, whose budget it checks
 *   (peekSession). So a claim never waits for a lock and can take part in no deadlock, unless
 *   it finds a tree's budget spent: ending that job locks its session after the job (rare; the
 *   store runs a deadlock again);
 * - launchers are locked before sessions by polls and reports; the rare transactions that lock
 *   in another order (a sweep ending a job whose launcher polls at that moment) can deadlock,
 *   and the store runs them again.
 */
export class PgTx implements Tx {
  /** `jobs.id` is unique, and the store runs a transaction that hit a unique key again (pg-transactions.ts) */
  readonly refusesDuplicateJobIds = true;
  readonly #db: Pipeline;
  readonly #serves: ServesCache;
  readonly #changes: ChangeSet = emptyChangeSet(0, 0);
  /** rows this transaction holds a lock on (or created), as it sees them now */
  readonly #jobs = new Map<string, JobRow>();
  readonly #sessions = new Map<string, SessionRow>();
  readonly #launchers = new Map<string, LauncherRow>();
  /** sessions whose live jobs are all locked (and in #jobs) */
  readonly #liveLoaded = new Set<string>();
  /** ready jobs readyJobsFor locked but did not read (past its `maxBytes`): id → route key */
  readonly #lockedUnread = new Map<string, string>();
  /** sessions of jobs taken by readyJobsFor, and those of them read (without a lock) */
  readonly #claimSessions = new Set<string>();
  readonly #peeked = new Map<string, SessionRow>();
  /** Idempotency-Keys read here and found (a put replaces them) */
  readonly #idempotencyFound = new Set<string>();
  /** host bindings read here and found (a put replaces them) */
  readonly #bindingsFound = new Set<string>();
  /**
   * Session changes not written yet, by name: written before the next statement that reads or
   * writes sessions, and before the commit (`flush`). A parent that takes the outcomes of 20,000
   * children stopped with its tree is one UPDATE, not one per child of a list growing each time.
   */
  readonly #unwritten = new Map<string, Partial<SessionRow>>();
  /** the reads aheadOfCreates asked for, sent with the next read (#sendAhead) */
  #ahead: readonly CreateAhead[] = [];
  /** reads sent ahead and not taken yet: sessions' locking reads, their live jobs */
  readonly #aheadSessions = new Map<string, Promise<Raw[]>>();
  readonly #aheadLive = new Map<string, Promise<Raw[]>>();
  /** sequence numbers taken ahead, not used yet */
  #aheadSeqs: Promise<{ jobs: number[]; sessions: number[] }> | undefined;

  constructor(
    db: Pipeline,
    readonly now: number,
    serves: ServesCache,
  ) {
    this.#db = db;
    this.#serves = serves;
  }

  async #rows<R extends QueryResultRow = Record<string, unknown>>(text: string, values: unknown[]): Promise<R[]> {
    if (this.#unwritten.size > 0 && SESSIONS_TABLE.test(text)) this.flush();
    if (lookupOfNul(text, values)) return [];
    const answer = this.#db.query<R>({ name: statementName(text), text, values });
    if (this.#ahead.length > 0) this.#sendAhead();
    return (await answer).rows;
  }

  /** A read whose answer is taken later (or never): its failure is thrown where it is taken. */
  #readLater(text: string, values: unknown[]): Promise<Raw[]> {
    const answer = this.#db.query<Raw>({ name: statementName(text), text, values }).then((r) => r.rows);
    answer.catch(() => undefined);
    return answer;
  }

  aheadOfCreates(creates: readonly CreateAhead[]): void {
    this.#ahead = [...this.#ahead, ...creates];
  }

  /**
   * Send the reads of the creates announced (aheadOfCreates), in the order the creates make them:
   * a start's parent locked, then its live jobs (a job is locked after its session), then the
   * session the same way; then the sequence numbers. A name holding NUL is left to the create,
   * which refuses it. The parent comes first as in a tree stop (parents before their children):
   * a replay of a child's start (the child exists, and is locked) that locked the child first and
   * then waited for the parent could deadlock with a tree stop of that parent.
   */
  #sendAhead(): void {
    const creates = this.#ahead;
    this.#ahead = [];
    const lock = (name: string | null) => {
      if (name === null || name.includes('\u0000') || this.#sessions.has(name) || this.#aheadSessions.has(name)) return;
      this.#aheadSessions.set(name, this.#readLater(LOCK_SESSION, [name]));
      if (!this.#liveLoaded.has(name)) this.#aheadLive.set(name, this.#readLater(LIVE_JOBS, [name]));
    };
    for (const c of creates) {
      if (c.start) lock(c.parent);
      lock(c.session);
    }
    const starts = creates.filter((c) => c.start).length;
    if (this.#aheadSeqs) return;
    this.#aheadSeqs = this.#readLater(SEQS, [creates.length, starts]).then(([r]) => ({
      jobs: (r!['jobs'] as number[]).map(Number),
      sessions: (r!['sessions'] as number[]).map(Number),
    }));
    this.#aheadSeqs.catch(() => undefined);
  }

  /**
   * Hold the live jobs read ahead that no create took (a replay answered from its key, a create
   * refused): their read locked them all the same, so lockedReady must count the ready ones (a
   * claim skipped them meanwhile, and is told only by the hint this transaction leaves). A read
   * that failed locked nothing (its failure is the transaction's, thrown by the pipeline).
   */
  async holdAhead(): Promise<void> {
    const ahead = [...this.#aheadLive.values()];
    this.#aheadLive.clear();
    for (const answer of ahead) for (const raw of await answer.catch((): Raw[] => [])) this.#holdJob(raw);
  }

  /** A write: sent now, its answer waited for with the next read or the COMMIT (pg-pipeline.ts). */
  #exec(q: { text: string; values: unknown[] } | null): void {
    if (!q) return;
    if (this.#unwritten.size > 0 && SESSIONS_TABLE.test(q.text)) this.flush();
    this.#db.send({ name: statementName(q.text), text: q.text, values: q.values });
  }

  /** Send the session changes held back (see #unwritten). */
  flush(): void {
    const writes = [...this.#unwritten];
    this.#unwritten.clear();
    for (const [name, patch] of writes) this.#exec(updateSql(SESSIONS, name, patch));
  }

  changes(): ChangeSet {
    return this.#changes;
  }

  /** What to run once this transaction is committed (Tx.afterCommit). */
  readonly committed: (() => void)[] = [];

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  /** The rows as this transaction leaves them (for the events of its commit). */
  cached(): { jobs: ReadonlyMap<string, JobRow>; sessions: ReadonlyMap<string, SessionRow>; launchers: ReadonlyMap<string, LauncherRow> } {
    return { jobs: this.#jobs, sessions: this.#sessions, launchers: this.#launchers };
  }

  /**
   * The route keys of ready jobs this transaction held locked and did not make ready itself: a
   * claim running at the same time skipped them, so the commit (or the rollback) says they are
   * ready, waking the polls that may have missed them. `committed`: as they were before this
   * transaction (a rollback).
   */
  lockedReady(committed: boolean): string[] {
    const out: string[] = [];
    for (const [id, row] of this.#jobs) {
      const c = this.#changes.jobs.get(id);
      if (c?.kind === 'insert') continue;
      const before = c ? c.before : row;
      if (before?.readySince == null) continue;
      const now = committed ? before : row;
      if (now.readySince != null && now.routeKey !== null) out.push(now.routeKey);
    }
    for (const [id, key] of this.#lockedUnread) if (!this.#jobs.has(id)) out.push(key);
    return out;
  }

  // --- reads -------------------------------------------------------------------------------

  async #lockSession(name: string): Promise<SessionRow | undefined> {
    const held = this.#sessions.get(name);
    if (held) return held;
    if (this.#ahead.length > 0) this.#sendAhead();
    const ahead = this.#aheadSessions.get(name);
    this.#aheadSessions.delete(name);
    const [raw] = ahead ? await ahead : await this.#rows(LOCK_SESSION, [name]);
    if (this.#sessions.has(name)) return this.#sessions.get(name); // read meanwhile
    if (!raw) return undefined;
    const row = decode(SESSIONS, raw);
    this.#sessions.set(name, row);
    this.#peeked.delete(name);
    return row;
  }

  #holdJob(raw: Record<string, unknown>): JobRow {
    const row = decode(JOBS, raw);
    const held = this.#jobs.get(row.id);
    if (held) return held; // the same, as this transaction wrote it
    this.#jobs.set(row.id, row);
    return row;
  }

  async job(id: string): Promise<JobRow | undefined> {
    const held = this.#jobs.get(id);
    if (held) return held;
    // the session first (see the class comment), in the same round trip as finding it; the job's
    // own locking read goes right behind it (#rows has sent its statement when it first waits)
    const session = this.#rows('SELECT s.* FROM sessions s JOIN jobs j ON j.session_name = s.name WHERE j.id = $1 FOR UPDATE OF s', [id]);
    const job = lookupOfNul('SELECT', [id]) ? Promise.resolve([]) : this.#readLater('SELECT * FROM jobs WHERE id = $1 FOR UPDATE', [id]);
    const [s] = await session;
    if (!s) return undefined;
    if (!this.#sessions.has(s['name'] as string)) {
      this.#sessions.set(s['name'] as string, decode(SESSIONS, s));
      this.#peeked.delete(s['name'] as string);
    }
    const [raw] = await job;
    return raw ? this.#holdJob(raw) : undefined;
  }

  async session(name: string): Promise<SessionRow | undefined> {
    const held = this.#sessions.get(name) ?? this.#peeked.get(name);
    if (held) return held;
    if (!this.#claimSessions.has(name)) return this.#lockSession(name);
    const [raw] = await this.#rows('SELECT * FROM sessions WHERE name = $1', [name]);
    if (!raw) return undefined;
    const row = decode(SESSIONS, raw);
    this.#peeked.set(name, row);
    return row;
  }

  async peekSession(name: string): Promise<SessionRow | undefined> {
    const held = this.#sessions.get(name) ?? this.#peeked.get(name);
    if (held) return held;
    // not kept in #peeked: a later session(name) must lock it
    const [raw] = await this.#rows('SELECT * FROM sessions WHERE name = $1', [name]);
    return raw ? decode(SESSIONS, raw) : undefined;
  }

  async launcher(id: string): Promise<LauncherRow | undefined> {
    const held = this.#launchers.get(id);
    if (held) return held;
    const [raw] = await this.#rows('SELECT * FROM launchers WHERE id = $1 FOR UPDATE', [id]);
    if (!raw) return undefined;
    const row = decode(LAUNCHERS, raw);
    this.#launchers.set(id, row);
    return row;
  }

  async launchers(): Promise<LauncherRow[]> {
    return (await this.#rows('SELECT * FROM launchers ORDER BY registered_at, id', [])).map((r) => decode(LAUNCHERS, r));
  }

  async launcherCount(): Promise<number> {
    const [row] = await this.#rows('SELECT count(*)::int AS n FROM launchers', []);
    return Number(row?.['n'] ?? 0);
  }

  async launcherByRegistrationKey(key: string): Promise<LauncherRow | undefined> {
    // this transaction's own writes are in the table already (statements run as they are made)
    const [raw] = await this.#rows('SELECT * FROM launchers WHERE registration_key = $1 FOR UPDATE', [key]);
    if (!raw) return undefined;
    const row = decode(LAUNCHERS, raw);
    const held = this.#launchers.get(row.id);
    if (held) return held;
    this.#launchers.set(row.id, row);
    return row;
  }

  /** The session's non-terminal jobs, oldest first, all locked (after the session). */
  async #live(sessionName: string): Promise<JobRow[]> {
    if (!this.#liveLoaded.has(sessionName)) {
      await this.#lockSession(sessionName);
      const ahead = this.#aheadLive.get(sessionName);
      this.#aheadLive.delete(sessionName);
      const rows = ahead ? await ahead : await this.#rows(LIVE_JOBS, [sessionName]);
      // read ahead, before this transaction's own jobs of the session: those are held here
      for (const raw of rows) this.#holdJob(raw);
      this.#liveLoaded.add(sessionName);
    }
    const out: JobRow[] = [];
    for (const job of this.#jobs.values()) if (job.sessionName === sessionName && !isTerminal(job.status)) out.push(job);
    return out.sort((a, b) => a.seq - b.seq);
  }

  async activeJobOf(sessionName: string): Promise<JobRow | undefined> {
    return (await this.#live(sessionName)).find((j) => isActive(j.status));
  }

  async pendingJobsOf(sessionName: string): Promise<JobRow[]> {
    return (await this.#live(sessionName)).filter((j) => j.status === 'pending');
  }

  async activeJobsOfLauncher(launcherId: string): Promise<JobRow[]> {
    const rows = await this.#rows(`SELECT * FROM jobs WHERE launcher_id = $1 AND status IN ${ACTIVE} ORDER BY seq FOR UPDATE`, [launcherId]);
    return rows.map((raw) => this.#holdJob(raw));
  }

  async pendingStopsOf(launcherId: string): Promise<JobRow[]> {
    const rows = await this.#rows('SELECT * FROM jobs WHERE launcher_id = $1 AND stop_pending ORDER BY seq FOR UPDATE', [launcherId]);
    return rows.map((raw) => this.#holdJob(raw));
  }

  async readyJobsFor(launcher: LauncherRow, max: number, maxBytes: number): Promise<JobRow[]> {
    if (max <= 0) return [];
    const keys = await this.#servedKeys(launcher);
    if (keys.length === 0) return [];
    // Lock up to `max`, but read whole rows only while their text fits in `maxBytes` (the first
    // always): 1,000 ready jobs of 1 MiB would otherwise be a 1 GiB answer from the server, for a
    // claim that hands out 8 MiB. Sizes are UTF-8 bytes (octet_length reads a stored value's size
    // without decompressing it), never fewer than the characters the claim counts, so what is
    // read here is never more than it keeps. The rest stay locked and are announced at the end.
    // The rows come from the locking statement itself: at READ COMMITTED it returns the version
    // it locked, which may be newer than the statement's snapshot (another scan would read that).
    const rows = await this.#rows(
      `WITH locked AS (
         SELECT *, ${JOB_TEXT_BYTES} AS text_size
         FROM jobs WHERE ready_since IS NOT NULL AND route_key = ANY($1) ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED),
       counted AS (SELECT *, row_number() OVER w AS n, sum(text_size) OVER w AS used FROM locked WINDOW w AS (ORDER BY seq))
       SELECT counted.id AS locked_id, counted.route_key AS locked_route_key, whole.*
       FROM counted LEFT JOIN LATERAL (SELECT counted.* WHERE counted.n = 1 OR counted.used <= $3) AS whole ON true
       ORDER BY counted.seq`,
      [keys, max, maxBytes],
    );
    const out: JobRow[] = [];
    for (const raw of rows) {
      if (raw['id'] === null) {
        this.#lockedUnread.set(raw['locked_id'] as string, raw['locked_route_key'] as string);
        continue;
      }
      const job = this.#holdJob(raw);
      if (!this.#sessions.has(job.sessionName)) this.#claimSessions.add(job.sessionName);
      out.push(job);
    }
    return out;
  }

  /** The route keys of ready jobs that `launcher` serves (a skip scan over the ready index). */
  async #servedKeys(launcher: LauncherRow): Promise<string[]> {
    const rows = await this.#rows<{ route_key: string | null }>(
      `WITH RECURSIVE k AS (
         (SELECT route_key FROM jobs WHERE ready_since IS NOT NULL ORDER BY route_key LIMIT 1)
         UNION ALL
         SELECT (SELECT route_key FROM jobs WHERE ready_since IS NOT NULL AND route_key > k.route_key ORDER BY route_key LIMIT 1)
         FROM k WHERE k.route_key IS NOT NULL)
       SELECT route_key FROM k WHERE route_key IS NOT NULL`,
      [],
    );
    const out: string[] = [];
    for (const { route_key: key } of rows) {
      if (key === null) continue;
      let byLauncher = this.#serves.get(key);
      if (!byLauncher) {
        if (this.#serves.size > 10_000) this.#serves.clear();
        this.#serves.set(key, (byLauncher = new Map()));
      }
      let ok = byLauncher.get(launcher.id);
      if (ok === undefined) byLauncher.set(launcher.id, (ok = serves(launcher, routeFromKey(key))));
      if (ok) out.push(key);
    }
    return out;
  }

  async idempotency(key: string): Promise<IdempotencyRow | undefined> {
    // locked, as every point read: a keyed tree stop carries its key on pass by pass (stops.ts),
    // and two copies of it in flight at once must each add to the key as the other left it, not
    // both to what they read before either wrote (the second's write lost the first's jobs)
    const [raw] = await this.#rows('SELECT * FROM idempotency WHERE key = $1 FOR UPDATE', [pgText(key)]);
    if (!raw) return undefined;
    this.#idempotencyFound.add(key);
    return { ...decode(IDEMPOTENCY, raw), key };
  }

  async hostBinding(hostId: string): Promise<HostBindingRow | undefined> {
    // locked: a registration that moves the binding off a revoked token must not overwrite the
    // binding another coordinator's registration just moved (both read the revoked one, both
    // wrote: two tokens would each think they hold the host). Locked, the second reads the first's
    // binding once it commits, and is refused
    const [raw] = await this.#rows('SELECT * FROM host_bindings WHERE host_id = $1 FOR UPDATE', [hostId]);
    if (!raw) return undefined;
    this.#bindingsFound.add(hostId);
    return decode(HOST_BINDINGS, raw);
  }

  // --- writes ------------------------------------------------------------------------------

  async nextJobSeq(): Promise<number> {
    const ahead = await this.#seqAhead('jobs');
    if (ahead !== undefined) return ahead;
    const [r] = await this.#rows<{ v: number }>("SELECT nextval('jobs_seq') AS v", []);
    return r!.v;
  }

  async nextSessionSeq(): Promise<number> {
    const ahead = await this.#seqAhead('sessions');
    if (ahead !== undefined) return ahead;
    const [r] = await this.#rows<{ v: number }>("SELECT nextval('sessions_seq') AS v", []);
    return r!.v;
  }

  /** A sequence number taken ahead (aheadOfCreates), if one is left. */
  async #seqAhead(which: 'jobs' | 'sessions'): Promise<number | undefined> {
    if (this.#ahead.length > 0) this.#sendAhead();
    if (!this.#aheadSeqs) return undefined;
    return (await this.#aheadSeqs)[which].shift();
  }

  async insertJob(row: JobRow): Promise<void> {
    this.#exec(insertSql(JOBS, row));
    record(this.#changes.jobs, row.id, undefined, row, row);
    this.#jobs.set(row.id, row);
  }

  async updateJob(id: string, patch: Partial<JobRow>): Promise<JobRow> {
    const current = await this.job(id);
    if (!current) throw missing(`job ${id}`);
    return this.#update(JOBS, this.#jobs, this.#changes.jobs, id, current, patch);
  }

  async deleteJob(id: string): Promise<void> {
    const current = await this.job(id);
    if (!current) return;
    this.#exec({ text: 'DELETE FROM job_output WHERE job_id = $1', values: [id] });
    this.#exec({ text: 'DELETE FROM jobs WHERE id = $1', values: [id] });
    record(this.#changes.jobs, id, current, undefined, null);
    this.#jobs.delete(id);
  }

  /**
   * A transaction that writes sessions (a claim that ends a job of a spent tree) reads every
   * session locked from then on: a row it peeked may be older than a commit made since (a
   * sibling's outcome added to the parent), and a patch made from it would undo that commit.
   */
  #stopPeeking(): void {
    this.#peeked.clear();
    this.#claimSessions.clear();
  }

  async insertSession(row: SessionRow): Promise<void> {
    this.#stopPeeking();
    this.#exec(insertSql(SESSIONS, row));
    record(this.#changes.sessions, row.name, undefined, row, row);
    this.#sessions.set(row.name, row);
    this.#liveLoaded.add(row.name); // a new session has no jobs but the ones this transaction adds
  }

  async updateSession(name: string, patch: Partial<SessionRow>): Promise<SessionRow> {
    this.#stopPeeking();
    const current = await this.#lockSession(name);
    if (!current) throw missing(`session ${name}`);
    const next = { ...current, ...patch };
    this.#unwritten.set(name, { ...this.#unwritten.get(name), ...patch });
    record(this.#changes.sessions, name, current, next, patch);
    this.#sessions.set(name, next);
    return next;
  }

  async deleteSession(name: string): Promise<void> {
    this.#stopPeeking();
    const current = await this.#lockSession(name);
    if (!current) return;
    this.#exec({ text: 'DELETE FROM sessions WHERE name = $1', values: [name] });
    record(this.#changes.sessions, name, current, undefined, null);
    this.#sessions.delete(name);
  }

  async insertLauncher(row: LauncherRow): Promise<void> {
    this.#exec(insertSql(LAUNCHERS, row));
    record(this.#changes.launchers, row.id, undefined, row, row);
    this.#launchers.set(row.id, row);
  }

  async updateLauncher(id: string, patch: Partial<LauncherRow>): Promise<LauncherRow> {
    const current = await this.launcher(id);
    if (!current) throw missing(`launcher ${id}`);
    return this.#update(LAUNCHERS, this.#launchers, this.#changes.launchers, id, current, patch);
  }

  async deleteLauncher(id: string): Promise<void> {
    const current = await this.launcher(id);
    if (!current) return;
    this.#exec({ text: 'DELETE FROM launchers WHERE id = $1', values: [id] });
    record(this.#changes.launchers, id, current, undefined, null);
    this.#launchers.delete(id);
  }

  async putIdempotency(row: IdempotencyRow): Promise<void> {
    const stored = { ...row, key: pgText(row.key) };
    if (this.#idempotencyFound.has(row.key)) {
      this.#exec(updateSql(IDEMPOTENCY, stored.key, stored));
    } else {
      // a concurrent request with the same key inserted first: unique violation, and the store
      // runs this transaction again, which then finds that request's job
      this.#exec(insertSql(IDEMPOTENCY, stored));
    }
    this.#changes.idempotency.push(row);
  }

  async putHostBinding(row: HostBindingRow): Promise<void> {
    if (this.#bindingsFound.has(row.hostId)) {
      this.#exec(updateSql(HOST_BINDINGS, row.hostId, row));
    } else {
      // another coordinator bound the host meanwhile: unique violation, and the store runs this
      // transaction again, which then finds that binding
      this.#exec(insertSql(HOST_BINDINGS, row));
      this.#bindingsFound.add(row.hostId);
    }
    this.#changes.hostBindings.push(row);
  }

  emit(type: EventType, ref: EntityRef): void {
    this.#changes.events.push({ type, ref });
  }

  async #update<T>(
    table: Table<T>,
    held: Map<string, T>,
    changes: Map<string, import('./changes.js').RowChange<T>>,
    key: string,
    current: T,
    patch: Partial<T>,
  ): Promise<T> {
    const next = { ...current, ...patch };
    this.#exec(updateSql(table, key, patch));
    // `current` is the committed row on the first write (record keeps the first `before`)
    record(changes, key, current, next, patch);
    held.set(key, next);
    return next;
  }
}
