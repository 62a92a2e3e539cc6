import { closeSync, fchmodSync, fstatSync, openSync, readlinkSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import Database, { type Database as Db, type Statement } from 'better-sqlite3';
import { isTerminal, type JobStatus } from '@agentq/protocol';
import { ConfigError } from '../../config.js';
import { jobTextSize } from '../answer-budget.js';
import { CoordinatorError } from '../errors.js';
import { OutputBuffer } from '../output-buffer.js';
import { COST_EPSILON_USD, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import type { SessionExtras } from '../wire.js';
import { emptyChangeSet, hintsOf, inverseOf, type ChangeSet } from './changes.js';
import { MemoryStore, type MemoryStoreOptions } from './memory-store.js';
import { SELECT_JOBS, withPrompt } from './sqlite-prompts.js';
import { Checkpointer, FALLBACK_AUTOCHECKPOINT, type CheckpointPacing } from './sqlite-checkpointer.js';
import { CommitGroups } from './sqlite-group.js';
import { placeholders, SqliteWriter } from './sqlite-writes.js';
import { migrate } from './sqlite-schema.js';
import { decode, HOST_BINDINGS, IDEMPOTENCY, JOBS, LAUNCHERS, SESSIONS, type Table } from './sql-rows.js';
import type { Commit, JobBrief, ListJobsFilter, ListPage, ListSessionsFilter } from './store.js';

export interface SqliteStoreOptions extends MemoryStoreOptions {
  /** terminal jobs kept in memory (the rest is read from the file) */
  hotJobs: number;
  /** idle sessions kept in memory */
  hotSessions: number;
  /** when WAL checkpoints run (tests make them run sooner) */
  checkpointPacing?: CheckpointPacing;
}

/** what the terminal jobs kept in memory may hold (see trimCache) */
const HOT_BYTES = 64 * 1024 * 1024;
/** Event ids reserved per write of the reservation (see #eventIdCeiling). */
const EVENT_ID_BLOCK = 10_000;
/** `meta` key: the last event id a run used and the end of its block, written when it stops cleanly */
const LAST_USED_KEY = 'last_event_id_used';

/**
 * The default store: SQLite in WAL mode through better-sqlite3. Dispatch works on the memory
 * store's indexes (every non-terminal job, every launcher, a bounded window of the rest); each
 * transaction's changes are written through — per row and per changed column — before they are
 * applied in memory, and committed (alone, or with the others of its event-loop turn:
 * sqlite-group.ts) before the request that caused them is answered. A write that fails (disk
 * full, file too large) is refused with 503 `storage_unavailable` and changes nothing; the next
 * one tries again. History (terminal jobs, idle sessions) is read from the file.
 */
export class SqliteStore extends MemoryStore {
  override readonly kind = 'sqlite' as const;
  readonly #db: Db;
  /** holds `<path>-lock` for the store's life: one coordinator per file (lockFile) */
  readonly #guard: Db;
  readonly #checkpointer: Checkpointer;
  readonly #o: SqliteStoreOptions;
  readonly #stmts = new Map<string, Statement>();
  /** set while a quiet checkpoint runs (`#quiet`) */
  #quieted: Promise<void> | undefined;
  /** closed: every read and write after it is refused as the shutdown (503 `shutting_down`) */
  #closed = false;
  /** writes outside transactions under way (`#unlockedWrite`), and who waits for none */
  #unlocked = 0;
  #noneUnlocked: (() => void) | undefined;

  static async open(path: string, o: SqliteStoreOptions): Promise<SqliteStore> {
    const guard = lockFile(path);
    let db: Db;
    let sharedIndex = true;
    try {
      db = openDatabase(path, false);
    } catch (err) {
      // No room for the WAL's shared-memory index (`-shm`, 32 KiB, made again at every start after a
      // clean shutdown deleted it): a full disk must not stop a restart from reading its state. In
      // exclusive locking mode SQLite keeps that index in memory; the checkpointer thread, which
      // needs the shared one, is left out and checkpoints run in commits until a restart.
      if (!noRoom(err)) {
        guard.close();
        throw err;
      }
      try {
        db = openDatabase(path, true);
        sharedIndex = false;
        o.log.warn({ path, err: (err as { cause?: unknown }).cause }, 'database opened without room for its shared-memory index: checkpoints run in commits until a restart');
      } catch {
        guard.close();
        throw err;
      }
    }
    try {
      const from = migrate(db);
      if (from > 0 || db.pragma('user_version', { simple: true }) !== from) {
        o.log.info({ path, from_version: from, version: db.pragma('user_version', { simple: true }) }, 'database opened');
      }
      return new SqliteStore(db, guard, path, sharedIndex, o);
    } catch (err) {
      // a store that could not open lets go of the file (another attempt may follow in this process)
      db.close();
      guard.close();
      throw err;
    }
  }

  private constructor(db: Db, guard: Db, path: string, sharedIndex: boolean, o: SqliteStoreOptions) {
    const loader = {
      job: (id: string) => this.#jobs(`${SELECT_JOBS} WHERE jobs.id = ?`, id)[0],
      session: (name: string) => this.#one(SESSIONS, 'SELECT * FROM sessions WHERE name = ?', name),
      idempotency: (key: string) => this.#one(IDEMPOTENCY, 'SELECT * FROM idempotency WHERE key = ?', key),
      hostBinding: (hostId: string) => this.#one(HOST_BINDINGS, 'SELECT * FROM host_bindings WHERE host_id = ?', hostId),
    };
    super(o, { fullHistory: false, loader });
    this.#db = db;
    this.#guard = guard;
    this.#o = o;
    this.#load();
    this.#checkpointer = new Checkpointer(sharedIndex ? path : null, { db: () => this.#db, log: o.log, quiet: (fn) => this.#quiet(fn) }, o.checkpointPacing);
  }

  #stmt(sql: string): Statement {
    if (this.#closed) throw closedError();
    let s = this.#stmts.get(sql);
    if (!s) this.#stmts.set(sql, (s = this.#db.prepare(sql)));
    return s;
  }

  #one<T>(table: Table<T>, sql: string, ...args: unknown[]): T | undefined {
    const raw = this.#stmt(sql).get(...args) as Record<string, unknown> | undefined;
    return raw ? decode(table, raw) : undefined;
  }

  #all<T>(table: Table<T>, sql: string, ...args: unknown[]): T[] {
    return (this.#stmt(sql).all(...args) as Record<string, unknown>[]).map((raw) => decode(table, raw));
  }

  /** Whole jobs, prompts joined in (`sql` is SELECT_JOBS with its conditions). */
  #jobs(sql: string, ...args: unknown[]): JobRow[] {
    return (this.#stmt(sql).all(...args) as Record<string, unknown>[]).map((raw) => decode(JOBS, withPrompt(raw)));
  }

  /** Rebuild the hot state from the file: launchers, every non-terminal job and its session. */
  #load(): void {
    const now = this.options.clock.now();
    const changes = emptyChangeSet(0, 0);
    // the highest number given, even when retention has deleted its row since (sqlite-writes.ts)
    const seqs = this.#db
      .prepare(
        `SELECT max(coalesce((SELECT MAX(seq) FROM jobs), 0), coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'job_seq_floor'), 0)) AS j,
                max(coalesce((SELECT MAX(seq) FROM sessions), 0), coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'session_seq_floor'), 0)) AS s`,
      )
      .get() as { j: number | null; s: number | null };
    changes.jobSeq = seqs.j ?? 0;
    changes.sessionSeq = seqs.s ?? 0;
    for (const l of this.#all(LAUNCHERS, 'SELECT * FROM launchers')) {
      // a launcher gets a whole heartbeat timeout to come back after a restart; a stale one keeps
      // its last heartbeat and the time it went stale (it is forgotten an hour after that)
      const row: LauncherRow = l.status === 'stale' ? { ...l, staleAt: l.staleAt ?? now } : { ...l, lastSeen: now, staleAt: null };
      changes.launchers.set(row.id, { kind: 'insert', before: undefined, after: row, patch: row });
    }
    // a job has completed_at exactly when its status is terminal (context.ts, transition)
    const live = this.#jobs(`${SELECT_JOBS} WHERE jobs.completed_at IS NULL ORDER BY jobs.seq`);
    const names = new Set(live.map((j) => j.sessionName));
    const sessions = this.#all(
      SESSIONS,
      `SELECT * FROM sessions WHERE delivery_job_id IS NOT NULL OR callbacks != '[]' OR messages != '[]' OR name IN (
         SELECT session_name FROM jobs WHERE completed_at IS NULL)`,
    );
    for (const s of sessions) {
      names.delete(s.name);
      changes.sessions.set(s.name, { kind: 'insert', before: undefined, after: s, patch: s });
    }
    for (const j of live) changes.jobs.set(j.id, { kind: 'insert', before: undefined, after: j, patch: j });
    // the ended jobs by status, counted once here (an index-only scan of jobs_ended): from now on
    // commits and retention keep the counts, and a scrape of /metrics reads them from memory
    this.state.addStatusCounts(
      this.#db.prepare('SELECT status, COUNT(*) AS n FROM jobs WHERE completed_at IS NOT NULL GROUP BY status').all() as { status: JobStatus; n: number }[],
    );
    this.state.apply(changes);
    const meta = this.#db.prepare("SELECT value FROM meta WHERE key = 'last_event_id'").get() as { value: string } | undefined;
    // the end of the block of event ids the last run had reserved: no id it used is above it
    this.state.lastEventId = this.#eventIdCeiling = Number(meta?.value ?? 0);
    // the last id it used, if it stopped cleanly: written with the block it was in, and true only
    // while that block is still the last reserved (a run since that used an id reserved another,
    // and may have crashed). Read, never written here: a start needs no free space
    const used = this.#db.prepare(`SELECT value FROM meta WHERE key = '${LAST_USED_KEY}'`).get() as { value: string } | undefined;
    const [usedId, inBlock] = (used?.value ?? '').split(' ').map(Number);
    if (inBlock === this.#eventIdCeiling && Number.isSafeInteger(usedId)) this.lastEventIdUsed = usedId;
  }

  /**
   * Event ids are reserved in blocks of EVENT_ID_BLOCK, and the file holds the end of the current
   * block: one write of `meta` per block instead of one per commit (a page of its own in every
   * commit). After a restart numbering goes on above the block's end, so ids only grow; a client
   * resuming with an older Last-Event-ID gets `stream.gap` as it would anyway (the replay window
   * is in memory).
   */
  #eventIdCeiling = 0;

  /** A PRAGMA on the store's connection (tests make the database "full" with max_page_count). */
  pragma(source: string): unknown {
    return this.#db.pragma(source, { simple: true });
  }

  /** The store's event numbering continues here after a restart. */
  get lastEventId(): number {
    return this.state.lastEventId;
  }

  /** The last event id the previous run used, when it stopped cleanly (Store.lastEventIdUsed). */
  lastEventIdUsed: number | undefined;

  // --- writing through -----------------------------------------------------------------------

  readonly #writer = new SqliteWriter((sql) => this.#stmt(sql));
  /** concurrent transactions share commits (sqlite-group.ts) */
  readonly #groups = new CommitGroups({
    db: () => this.#db,
    lock: () => this.lock(),
    unlock: () => this.unlock(),
    deliver: (commit) => this.deliver(commit),
    undo: (changes) => {
      const inverse = inverseOf(changes);
      this.state.apply(inverse);
      for (const row of changes.idempotency) this.state.idempotency.delete(row.key);
      for (const row of changes.hostBindings) this.state.hostBindings.delete(row.hostId);
      // jobs ready again (an undone claim): parked polls hear of them as of a commit
      this.deliver({ events: [], ...hintsOf(inverse) });
    },
    snapshot: () => {
      const { lastEventId } = this.state;
      const ceiling = this.#eventIdCeiling;
      return () => {
        this.state.lastEventId = lastEventId;
        this.#eventIdCeiling = ceiling;
      };
    },
    wrote: () => this.#wrote(),
    refused: (err) => this.#refused(err),
  });

  override settled(): Promise<void> | undefined {
    return this.#groups.settled;
  }

  protected override committed(commit: Commit): void {
    this.#groups.committed(commit);
  }

  protected override persist(changes: ChangeSet, lastEventId: number): void {
    // a transaction that comes after the close (a timer, a request the server still finishes)
    // is refused as the shutdown it is, not logged as a failing disk
    if (this.#closed) throw closedError();
    // better-sqlite3's wrapper is made once, not per write; inside a group it is a savepoint
    this.#persistTx ??= this.#db.transaction((c: ChangeSet, ceiling: number | undefined) => this.#writer.writeChanges(c, ceiling));
    const ceiling = lastEventId > this.#eventIdCeiling ? lastEventId + EVENT_ID_BLOCK : undefined;
    let group: ReturnType<CommitGroups['join']>;
    try {
      group = this.#groups.join();
      this.#persistTx(changes, ceiling);
    } catch (err) {
      throw this.#groups.failed(err);
    }
    if (ceiling !== undefined) this.#eventIdCeiling = ceiling;
    this.#groups.written(group, changes);
    this.#checkpointer.wrote(walBytesOf(changes));
  }

  #persistTx: ((changes: ChangeSet, eventIdCeiling: number | undefined) => void) | undefined;

  /** Writes refused since the last one that succeeded (0: the database takes writes). */
  #refusedSince = 0;

  /**
   * A write failed (disk full, file too large, I/O error): the change is refused with 503
   * `storage_unavailable`. Logged once when writes start failing and once when they work again,
   * not per request: a full disk under load would otherwise flood the log.
   */
  #refused(err: unknown): CoordinatorError {
    if (err instanceof CoordinatorError && err.code === 'shutting_down') return err;
    const error = unavailable(err);
    if (this.#refusedSince++ === 0) {
      this.#o.log.error({ err, sqlite_code: error.details?.sqlite_code }, 'database write failed: changes are refused (503 storage_unavailable) until it works again');
    }
    return error;
  }

  #wrote(): void {
    if (this.#refusedSince === 0) return;
    this.#o.log.warn({ refused_writes: this.#refusedSince }, 'database writes work again');
    this.#refusedSince = 0;
  }

  // --- reads of history ------------------------------------------------------------------------

  protected override extrasNow(s: SessionRow): SessionExtras {
    return this.eventExtras(s)();
  }

  /**
   * For an event: the lists are read when the event is (if ever), as they were at its commit. Jobs
   * and child sessions are only ever added, each with the next sequence number, so "those with a
   * number up to the commit's" is the list as it was then (less what history has deleted since).
   */
  protected override eventExtras(s: SessionRow): () => SessionExtras {
    const { jobSeq, sessionSeq } = this.state;
    const activeJobId = this.state.sessionActive.get(s.name) ?? null;
    const busy = this.state.isBusy(s.name);
    const max = this.listMax;
    // the newest `max` by the index (session, seq) walked backwards, and a count of the index's
    // entries: never the whole list read to cut it
    return () => ({
      activeJobId,
      busy,
      jobIds: this.#stmt('SELECT id FROM (SELECT id, seq FROM jobs WHERE session_name = ? AND seq <= ? ORDER BY seq DESC LIMIT ?) ORDER BY seq')
        .pluck()
        .all(s.name, jobSeq, max) as string[],
      jobCount: this.#stmt('SELECT count(*) FROM jobs WHERE session_name = ? AND seq <= ?').pluck().get(s.name, jobSeq) as number,
      children: this.#stmt(
        'SELECT name FROM (SELECT name, seq FROM sessions WHERE parent_name = ? AND seq <= ? ORDER BY seq DESC LIMIT ?) ORDER BY seq',
      )
        .pluck()
        .all(s.name, sessionSeq, max) as string[],
      childCount: this.#stmt('SELECT count(*) FROM sessions WHERE parent_name = ? AND seq <= ?').pluck().get(s.name, sessionSeq) as number,
    });
  }

  override async childNames(name: string): Promise<string[]> {
    return this.#stmt('SELECT name FROM sessions WHERE parent_name = ? ORDER BY seq').pluck().all(name) as string[];
  }

  /** Jobs in memory as they are; the others' sizes from the file, without reading their text. */
  override async jobBriefs(ids: readonly string[]): Promise<JobBrief[]> {
    const out: JobBrief[] = [];
    const onFile: string[] = [];
    for (const id of ids) {
      const row = this.state.jobs.get(id);
      if (row) out.push({ id, status: row.status, size: jobTextSize(row) });
      else onFile.push(id);
    }
    if (onFile.length === 0) return out;
    const rows = this.#stmt(
      `SELECT jobs.id, jobs.status, ${JOB_TEXT_BYTES} AS size
       FROM jobs JOIN job_prompts ON job_prompts.job_id = jobs.id WHERE jobs.id IN (SELECT value FROM json_each(?))`,
    ).all(JSON.stringify(onFile)) as JobBrief[];
    return out.concat(rows);
  }

  /**
   * Jobs newest first. The file indexes jobs by session, launcher and sequence, and ended jobs by
   * status (migration 5); every non-terminal job is held in memory. A status filter without a
   * session or launcher therefore takes the live jobs from memory, the ended ones from the file,
   * and merges the two.
   */
  override async listJobs(f: ListJobsFilter): Promise<ListPage<JobRow>> {
    if (f.sessionName !== undefined || f.launcherId !== undefined || (f.statuses === undefined && f.terminal === undefined)) {
      return this.#fileJobs(f);
    }
    const statuses = f.statuses ? [...f.statuses] : undefined;
    const live = f.terminal !== true && (statuses === undefined || statuses.some((s) => !isTerminal(s)));
    const ended = f.terminal !== false && (statuses === undefined || statuses.some(isTerminal));
    const fromMemory = live ? this.state.listJobs({ ...f, terminal: false }) : [];
    const fromFile = ended ? this.#fileJobs({ ...f, terminal: true }) : { rows: [], cut: false };
    if (fromMemory.length === 0) return fromFile;
    if (fromFile.rows.length === 0) return { rows: fromMemory, cut: false };
    let merged = [...fromMemory, ...fromFile.rows].sort((a, b) => b.seq - a.seq);
    // the file's rows stopped at the budget: the live ones older than its last are not next
    const oldest = fromFile.rows[fromFile.rows.length - 1]!.seq;
    if (fromFile.cut) merged = merged.filter((j) => j.seq >= oldest);
    return { rows: merged.slice(0, f.limit), cut: fromFile.cut };
  }

  #fileJobs(f: ListJobsFilter): ListPage<JobRow> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (f.before !== undefined) {
      where.push('seq < ?');
      args.push(f.before);
    }
    if (f.sessionName !== undefined) {
      where.push('session_name = ?');
      args.push(f.sessionName);
    }
    if (f.launcherId !== undefined) {
      where.push('launcher_id = ?');
      args.push(f.launcherId);
    }
    if (f.statuses) {
      where.push(`status IN (${placeholders(f.statuses.size)})`);
      args.push(...f.statuses);
    }
    if (f.terminal !== undefined) where.push(`completed_at IS ${f.terminal ? 'NOT ' : ''}NULL`);
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    if (f.maxBytes === undefined) return { rows: this.#jobs(`${SELECT_JOBS} ${filter} ORDER BY jobs.seq DESC LIMIT ?`, ...args, f.limit), cut: false };
    // the page's sizes first: prompts past the budget are not read (ListJobsFilter.maxBytes)
    const raw = this.#stmt(
      `WITH page AS (
         SELECT jobs.seq, ${JOB_TEXT_BYTES} AS size
         FROM jobs JOIN job_prompts ON job_prompts.job_id = jobs.id ${filter} ORDER BY jobs.seq DESC LIMIT ?),
       counted AS (SELECT seq, row_number() OVER w AS n, sum(size) OVER w AS used, count(*) OVER () AS page_rows FROM page WINDOW w AS (ORDER BY seq DESC))
       SELECT jobs.*, job_prompts.prompt AS stored_prompt, counted.page_rows
       FROM counted JOIN jobs ON jobs.seq = counted.seq JOIN job_prompts ON job_prompts.job_id = jobs.id
       WHERE counted.n = 1 OR counted.used <= ? ORDER BY jobs.seq DESC`,
    ).all(...args, f.limit, f.maxBytes) as Record<string, unknown>[];
    const cut = raw.length > 0 && Number(raw[0]!['page_rows']) > raw.length;
    return { rows: raw.map((r) => decode(JOBS, withPrompt(r))), cut };
  }

  override async listSessions(f: ListSessionsFilter): Promise<ListPage<SessionRow>> {
    // the page's names and sizes first (busy or idle is known in memory), then whole rows of
    // those it keeps: up to the last whose results fit in `maxBytes` (ListJobsFilter.maxBytes)
    const chosen: { seq: number; name: string }[] = [];
    let used = 0;
    let cut = false;
    let before = f.before ?? Number.MAX_SAFE_INTEGER;
    const page = Math.max(f.limit, 100);
    // with the outcomes and messages it holds (their JSON: a little more than their texts)
    const size = `${bytes('last_result')} + ${bytes('last_error')} + ${bytes('callbacks')} + ${bytes('messages')} AS size`;
    // children of one parent, roots only, or every session (each through its own index)
    const [which, args]: [string, string[]] = f.parent !== undefined ? ['parent_name = ? AND ', [f.parent]] : f.root === true ? ['parent_name IS NULL AND ', []] : ['', []];
    const stmt = this.#stmt(`SELECT seq, name, ${size} FROM sessions WHERE ${which}seq < ? ORDER BY seq DESC LIMIT ?`);
    scan: for (;;) {
      const rows = stmt.all(...args, before, page) as { seq: number; name: string; size: number }[];
      for (const s of rows) {
        if (f.status !== undefined && (this.state.isBusy(s.name) ? 'busy' : 'idle') !== f.status) continue;
        used += s.size;
        if (chosen.length > 0 && f.maxBytes !== undefined && used > f.maxBytes) {
          cut = true;
          break scan;
        }
        chosen.push(s);
        if (chosen.length >= f.limit) break scan;
      }
      if (rows.length < page) break;
      before = rows[rows.length - 1]!.seq;
    }
    if (chosen.length === 0) return { rows: [], cut: false };
    const fromFile = new Map(
      this.#all(SESSIONS, 'SELECT * FROM sessions WHERE seq IN (SELECT value FROM json_each(?))', JSON.stringify(chosen.map((s) => s.seq))).map((s) => [
        s.name,
        s,
      ]),
    );
    const out: SessionRow[] = [];
    for (const { name } of chosen) {
      const row = this.state.sessions.get(name) ?? fromFile.get(name);
      if (row) out.push(row);
    }
    return { rows: out, cut };
  }

  override async historyDue(before: number, limit: number): Promise<{ jobs: string[]; sessions: string[] }> {
    const jobs = this.#stmt('SELECT id FROM jobs WHERE completed_at IS NOT NULL AND completed_at <= ? ORDER BY completed_at LIMIT ?')
      .pluck()
      .all(before, limit) as string[];
    const sessions = (
      this.#stmt(
        `SELECT name FROM sessions s WHERE updated_at <= ? AND ((callbacks = '[]' AND messages = '[]') OR accepts_input = 0
             OR (s.parent_name IS NOT NULL AND EXISTS (SELECT 1 FROM sessions r WHERE r.name = s.root_name AND r.budget_usd IS NOT NULL AND r.tree_cost_usd >= r.budget_usd - ${COST_EPSILON_USD}))) AND delivery_job_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.session_name = s.name)
           AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_name = s.name)
         ORDER BY updated_at LIMIT ?`,
      )
        .pluck()
        .all(before, limit) as string[]
    ).filter((name) => !this.state.isBusy(name));
    return { jobs, sessions };
  }

  override purgeIdempotency(before: number): Promise<void> {
    return this.#unlockedWrite(async () => {
      await super.purgeIdempotency(before);
      try {
        this.#stmt('DELETE FROM idempotency WHERE created_at < ?').run(before);
      } catch (err) {
        throw this.#groups.failed(err);
      }
    });
  }

  async unservedSince(): Promise<Map<string, number>> {
    const raw = this.#stmt("SELECT value FROM meta WHERE key = 'unserved_since'").pluck().get() as string | undefined;
    return new Map(Object.entries(raw === undefined ? {} : (JSON.parse(raw) as Record<string, number>)));
  }

  keepUnservedSince(routes: ReadonlyMap<string, number>): Promise<void> {
    return this.#unlockedWrite(async () => {
      try {
        this.#stmt("INSERT INTO meta (key, value) VALUES ('unserved_since', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(
          JSON.stringify(Object.fromEntries(routes)),
        );
      } catch (err) {
        throw this.#groups.failed(err);
      }
    });
  }

  // --- output ----------------------------------------------------------------------------------

  override appendOutput(jobId: string, offset: number, data: string, holder?: string): Promise<number | null> {
    return this.#unlockedWrite(() => this.#appendOutput(jobId, offset, data, holder));
  }

  async #appendOutput(jobId: string, offset: number, data: string, holder?: string): Promise<number | null> {
    if (holder !== undefined && !this.holds(jobId, holder)) return null;
    const buf = this.buffer(jobId);
    const totalBefore = buf.totalBytes;
    const stored = (await super.appendOutput(jobId, offset, data))!;
    if (stored === 0 && offset <= totalBefore) return 0;
    // the batch is not kept: forget the buffer (it is read back from the file next time) so the
    // launcher's retry of the same offset is stored rather than taken for a duplicate
    const forget = () => {
      this.outputs.delete(jobId);
      this.state.patchJob(jobId, { outputBytes: totalBefore });
    };
    try {
      this.#db.transaction(() => {
        if (offset > totalBefore) this.#stmt('DELETE FROM job_output WHERE job_id = ?').run(jobId); // a gap: what came before is dropped
        if (stored > 0) {
          const bytes = Buffer.from(data, 'utf8');
          this.#stmt('INSERT OR IGNORE INTO job_output (job_id, byte_offset, data) VALUES (?, ?, ?)').run(
            jobId,
            buf.totalBytes - stored,
            bytes.subarray(bytes.length - stored),
          );
        }
        this.#stmt('DELETE FROM job_output WHERE job_id = ? AND byte_offset + length(data) <= ?').run(jobId, buf.totalBytes - this.#o.outputMaxBytes);
        this.#stmt('UPDATE jobs SET output_bytes = ? WHERE id = ?').run(buf.totalBytes, jobId);
      })();
    } catch (err) {
      forget();
      throw this.#groups.failed(err);
    }
    // inside an open group the statements joined it, and go with it if it cannot be written
    if (!this.#groups.onUndo(forget)) this.#wrote();
    this.#checkpointer.wrote(PAGE + stored);
    return stored;
  }

  protected override loadOutput(jobId: string): OutputBuffer {
    const buf = new OutputBuffer(this.#o.outputMaxBytes);
    const rows = this.#stmt('SELECT byte_offset, data FROM job_output WHERE job_id = ? ORDER BY byte_offset').all(jobId) as {
      byte_offset: number;
      data: Buffer;
    }[];
    for (const r of rows) buf.append(r.byte_offset, r.data);
    return buf;
  }

  // --- memory bound ------------------------------------------------------------------------------

  /** How many terminal jobs and sessions are held in memory (the rest is in the file). */
  hotWindow(): { endedJobs: number; sessions: number } {
    let endedJobs = 0;
    for (const id of this.state.endedIds()) if (this.state.jobs.has(id)) endedJobs++;
    return { endedJobs, sessions: this.state.sessions.size };
  }

  /**
   * Forget history beyond the hot window from memory (it stays in the file): the oldest terminal
   * jobs go while more than `hotJobs` are held, or while they hold more than HOT_BYTES of prompts,
   * results and output (a thousand jobs with 1 MiB prompts and results would be 2 GiB).
   */
  override trimCache(): void {
    const sizeOf = (id: string) => {
      const j = this.state.jobs.get(id);
      if (!j) return 0;
      return j.prompt.length + (j.result?.length ?? 0) + (j.error?.length ?? 0) + (this.outputs.get(id)?.retainedBytes ?? 0);
    };
    let count = this.state.endedCount;
    let bytes = 0;
    for (const id of this.state.endedIds()) bytes += sizeOf(id);
    let n = 0;
    for (const id of this.state.endedIds()) {
      if (count <= this.#o.hotJobs && bytes <= HOT_BYTES) break;
      bytes -= sizeOf(id);
      count--;
      n++;
      // live again (an undone group commit revived it): it stays; it is listed again when it ends
      const job = this.state.jobs.get(id);
      if (job && !isTerminal(job.status)) continue;
      this.state.evictJob(id);
      this.outputs.delete(id);
    }
    this.state.dropEnded(n);
    // an idle session holds its last result: those count too
    this.state.evictSessions(this.#o.hotSessions, HOT_BYTES, (s) => (s.lastResult?.length ?? 0) + (s.lastError?.length ?? 0));
  }

  /**
   * Run `fn` while no write transaction runs or begins: it holds the store's lock, with no group
   * of commits open (a group commits under the lock, so one still open is let through first).
   * Transactions wait for it without blocking the event loop (sqlite-checkpointer.ts); so do the
   * writes made outside transactions (output, the idempotency purge: `#unlockedWrite`).
   */
  async #quiet(fn: () => Promise<void>): Promise<void> {
    for (;;) {
      const open = this.#groups.settled;
      if (open) await open.catch(() => undefined);
      const wait = this.lock();
      if (wait) await wait;
      if (!this.#groups.settled) break;
      this.unlock();
    }
    let reopen!: () => void;
    this.#quieted = new Promise((resolve) => (reopen = resolve));
    try {
      // writes outside transactions that began before it finish first
      while (this.#unlocked > 0) await new Promise<void>((resolve) => (this.#noneUnlocked = resolve));
      await fn();
    } finally {
      this.#quieted = undefined;
      reopen();
      this.unlock();
    }
  }

  /**
   * A write outside transactions (output, the idempotency purge): it waits while a quiet
   * checkpoint holds writes back, and a quiet checkpoint waits for it (`#quiet`).
   */
  async #unlockedWrite<T>(fn: () => Promise<T>): Promise<T> {
    while (this.#quieted) await this.#quieted;
    if (this.#closed) throw closedError();
    this.#unlocked++;
    try {
      return await fn();
    } finally {
      if (--this.#unlocked === 0) {
        this.#noneUnlocked?.();
        this.#noneUnlocked = undefined;
      }
    }
  }

  /** WAL checkpoints (sqlite-checkpointer.ts): what they did, and one now (tests). */
  get checkpoints(): Checkpointer {
    return this.#checkpointer;
  }

  override async close(): Promise<void> {
    await this.#groups.close();
    await this.#checkpointer.close();
    this.#closed = true;
    // the last event id used: the next start knows the rest of the reserved block was never sent
    try {
      if (this.#db.open) {
        this.#db
          .prepare(`INSERT INTO meta (key, value) VALUES ('${LAST_USED_KEY}', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`)
          .run(`${this.state.lastEventId} ${this.#eventIdCeiling}`);
      }
    } catch {
      // a full disk: the next start counts the reserved block as missed, as after a crash
    }
    if (this.#db.open) this.#db.close();
    if (this.#guard.open) this.#guard.close();
  }
}

/**
 * An SQL expression: a text column's UTF-8 bytes (0 for NULL), for answer budgets: never less
 * than the characters JavaScript counts, and read without reading the text (length() would).
 */
function bytes(column: string): string {
  return `coalesce(octet_length(${column}), 0)`;
}

/** A job's text (prompt, result, error) in UTF-8 bytes, over `jobs` joined with `job_prompts`. */
const JOB_TEXT_BYTES = `${bytes('job_prompts.prompt')} + ${bytes('jobs.result')} + ${bytes('jobs.error')}`;

/** What a read or write of a closed store answers: the coordinator is shutting down (503, retry soon). */
function closedError(): CoordinatorError {
  return new CoordinatorError('shutting_down', 'the store is closed: the coordinator is shutting down', { retry_after_seconds: 1 });
}

/**
 * The store's connection to `path`, in WAL mode. `exclusive`: the WAL index in this process's
 * memory instead of the shared `-shm` file (no other connection can read the file then).
 */
function openDatabase(path: string, exclusive: boolean): Db {
  createPrivately(path);
  const db = new Database(path);
  try {
    db.pragma('busy_timeout = 1000');
    if (exclusive) db.pragma('locking_mode = EXCLUSIVE');
    refuseForeign(db, path);
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode: a commit survives the process being killed (the WAL is written before
    // the answer); only a power loss can take the last commits. See docs/operations.md.
    db.pragma('synchronous = NORMAL');
    // checkpoints run on a thread of their own (sqlite-checkpointer.ts), never in a commit; without
    // it (exclusive), SQLite's own in commits
    db.pragma(`wal_autocheckpoint = ${exclusive ? FALLBACK_AUTOCHECKPOINT : 0}`);
    // the WAL file is cut back to this when it starts over (else it stays at its largest)
    db.pragma(`journal_size_limit = ${64 * 1024 * 1024}`);
    refuseReadOnly(db, path);
    return db;
  } catch (err) {
    db.close();
    if (err instanceof ConfigError) throw err;
    throw new Error(`cannot open ${path}: not a database, or not writable (${String(err)})`, { cause: err });
  }
}

/**
 * A database the first start makes is readable and writable by its owner only (0600): it holds
 * every prompt, result and output, which the API shows only to a token holder, and SQLite gives
 * its `-wal` and `-shm` files the mode of the database. An existing file keeps its mode (an
 * operator may have chosen another); a file that cannot be made here is left to SQLite, which
 * says why.
 */
function createPrivately(path: string): void {
  try {
    // 'a' creates the file (through a symbolic link too) and never truncates or re-modes one
    closeSync(openSync(path, 'a', 0o600));
  } catch {
    // SQLite's own open reports it
  }
}

/**
 * The lock file, made or kept readable by its owner only: unlike the database, whose mode an
 * operator may choose, it holds nothing to share, and one an earlier version left readable by all
 * (0644) would let any local user keep coordinators from starting.
 */
function makeLockPrivate(path: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'a', 0o600);
    if (fstatSync(fd).uid === process.getuid?.()) fchmodSync(fd, 0o600);
  } catch {
    // opening it as the lock reports it
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Refuse, before anything is written, a database that other software made (DATABASE_URL naming
 * the wrong file): migrations would add agentq's tables to it and turn it to WAL mode. An agentq
 * database is empty before its first migration and has its `jobs` table after it.
 */
function refuseForeign(db: Db, path: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  const objects = db.prepare("SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").pluck().all() as string[];
  if (version === 0 ? objects.length === 0 : objects.includes('jobs')) return;
  throw new ConfigError(
    'DATABASE_URL',
    `cannot open ${path}: not an agentq database (schema version ${version}, tables ${objects.slice(0, 5).join(', ') || 'none'}); give agentq a file of its own, e.g. DATABASE_URL=sqlite:./data/agentq.db`,
  );
}

/**
 * A file this process may read but not write (its mode, its owner, a read-only mount) is refused
 * at start: SQLite opens it read-only without a word, and every change would be 503 for ever.
 * A change to the header, rolled back, finds out without writing (a full disk still opens: the
 * change never reaches the file).
 */
function refuseReadOnly(db: Db, path: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  try {
    db.exec('BEGIN IMMEDIATE');
    db.pragma(`user_version = ${version}`);
  } catch (err) {
    const code = String((err as { code?: unknown }).code ?? '');
    if (!code.startsWith('SQLITE_READONLY')) throw err;
    throw new ConfigError(
      'DATABASE_URL',
      `cannot open ${path}: the database is read-only for this process (${code}); give the coordinator's user write access to the file and its directory`,
    );
  } finally {
    if (db.inTransaction) db.exec('ROLLBACK');
  }
}

/**
 * An open refused for want of room: a full disk, or the WAL's shared-memory index (`-shm`) that
 * could not be made (SQLITE_IOERR_SHM*). Other I/O errors are what they say.
 */
function noRoom(err: unknown): boolean {
  const code = ((err as { cause?: { code?: unknown } }).cause?.code ?? '') as string;
  return code === 'SQLITE_FULL' || code.startsWith('SQLITE_IOERR_SHM');
}

/**
 * One coordinator per file: several share state through PostgreSQL, not a file. The store's own
 * connection cannot hold the file exclusively (the checkpointer thread needs a connection of its
 * own), so a second file beside it, `<path>-lock`, is held exclusively for the store's life. The
 * operating system releases it with the process, however that ends.
 */
function lockFile(path: string): Db {
  // the file itself, not the name it was given: a symbolic link to it is the same file
  const file = realFile(path);
  refuseHardLinks(path, file);
  const lock = `${file}-lock`;
  // its owner's only, whatever the database's mode: another user who may read it could hold a
  // shared lock on it, and no coordinator could start on the database
  makeLockPrivate(lock);
  let guard: Db;
  try {
    guard = new Database(lock, { timeout: 0 });
  } catch (err) {
    // not another coordinator: the directory does not let this process make the file
    const refusal = new ConfigError(
      'DATABASE_URL',
      `cannot open ${path}: its lock file ${lock} cannot be opened (${String(err)}); give the coordinator's user write access to the directory`,
    );
    throw Object.assign(refusal, { cause: err });
  }
  try {
    guard.pragma('locking_mode = EXCLUSIVE');
    guard.exec('BEGIN EXCLUSIVE; COMMIT');
    return guard;
  } catch (err) {
    guard.close();
    // the set-up's mistake (two coordinators on one file), not a crash: said as a configuration error
    const refusal = new ConfigError(
      'DATABASE_URL',
      `cannot open ${path}: it is in use by another coordinator (${String(err)}); give this one a database of its own, e.g. DATABASE_URL=sqlite:./data/second.db`,
    );
    throw Object.assign(refusal, { cause: err });
  }
}

/**
 * A database file with several hard links is refused: the lock file, the WAL and its index are
 * named after the path, so a coordinator on each name would write the one file through a WAL of its
 * own (SQLite's own warning: "multiple links to the same file" corrupt it), and neither lock
 * would see the other.
 */
function refuseHardLinks(path: string, file: string): void {
  let links: number;
  try {
    links = statSync(file).nlink;
  } catch {
    return; // not there yet: the first start makes it
  }
  if (links > 1) {
    throw new ConfigError(
      'DATABASE_URL',
      `cannot open ${path}: the file has ${links} hard links, and SQLite corrupts a database written through more than one name; remove the other links (a symbolic link is fine)`,
    );
  }
}

/**
 * `path` with symbolic links resolved, also a link whose target does not exist yet (the database
 * a first start will create there): the lock must be the same for every name of the file.
 */
function realFile(path: string): string {
  for (let hops = 0; hops < 40; hops++) {
    try {
      return realpathSync(path);
    } catch {
      let target: string;
      try {
        target = readlinkSync(path);
      } catch {
        // not a link (not there yet): its directory may still be reached through links
        try {
          return join(realpathSync(dirname(path)), basename(path));
        } catch {
          return path;
        }
      }
      path = resolve(dirname(path), target);
    }
  }
  return path;
}

const PAGE = 4096;

/** Roughly what a change set adds to the WAL: a page per row, plus its large text (checkpoint pacing only). */
function walBytesOf(c: ChangeSet): number {
  let bytes = PAGE;
  for (const j of c.jobs.values()) bytes += PAGE + (j.kind === 'insert' ? j.after.prompt.length : 0) + (j.patch?.result?.length ?? 0);
  for (const s of c.sessions.values()) bytes += PAGE + (s.patch?.lastResult?.length ?? 0);
  return bytes + c.launchers.size * PAGE;
}

function unavailable(err: unknown): CoordinatorError {
  const e = err instanceof Error ? err : new Error(String(err));
  const error = new CoordinatorError('storage_unavailable', `the database refused the change: ${e.message}`, {
    sqlite_code: (e as { code?: string }).code ?? null,
    retry_after_seconds: 5,
  });
  (error as { cause?: unknown }).cause = e;
  return error;
}
