import { randomBytes, createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { MAX_SESSION_LIST_ITEMS, TERMINAL_STATUSES, type JobStatus, type LifecycleEvent } from '@agentq/protocol';
import pg from 'pg';
import type { Logger } from 'pino';
import { ConfigError, StartupError } from '../../config.js';
import { CoordinatorError } from '../errors.js';
import type { Clock } from '../clock.js';
import { COST_EPSILON_USD, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import type { SessionExtras } from '../wire.js';
import { redactDatabaseUrl } from './database-url.js';
import { CLOSE_GRACE_MS, endPoolWithin, endWithin, trackedClients } from './pg-close.js';
import { CONTROL_KEEPALIVE, PgControl } from './pg-control.js';
import { CommitFeed, type LogRow } from './pg-feed.js';
import { whileAnswering } from './pg-liveness.js';
import { PgOutput } from './pg-output.js';
import { ACTIVE, childNamesOf, extrasOf, heldBy, logEvents, promptsOf, rowsOf } from './pg-queries.js';
import { migratePg } from './pg-schema.js';
import { isConnectionError, JOB_TEXT_BYTES, pgTypes, setKnownSettings, unavailable } from './pg-sql.js';
import { PgTransactions } from './pg-transactions.js';
import { decode, JOBS, LAUNCHERS, SESSIONS, type Table } from './sql-rows.js';
import type {
  Commit,
  JobBrief,
  LaunchersPage,
  ListJobsFilter,
  ListPage,
  ListSessionsFilter,
  OutputInfo,
  OutputSlice,
  ReadyBucket,
  Store,
  StoreCounts,
  Tx,
} from './store.js';

export interface PostgresStoreOptions {
  clock: Clock;
  log: Logger;
  outputMaxBytes: number;
  pollTimeoutSeconds: number;
  /** SSE events kept for Last-Event-ID: the commit log keeps at least as many */
  eventReplaySize?: number;
  /** connections in the pool (transactions and reads run on them) */
  poolSize?: number;
  /**
   * how long a connection to the database may take to open, and a transaction may wait for a
   * free one of the pool (DATABASE_CONNECT_TIMEOUT_MS; 30 s by default)
   */
  connectTimeoutMs?: number;
  /**
   * how long a statement on a pooled connection may go unanswered before the connection is
   * given up on (destroyed) and the request answered 503 (DATABASE_QUERY_TIMEOUT_MS; 30 s by default)
   */
  queryTimeoutMs?: number;
  /** entries of `job_ids` and `children` a session's wire view carries at most (MAX_SESSION_LIST_ITEMS) */
  sessionListMax?: number;
}

/**
 * Settings of the pool's sessions (those the server knows). A statement whose connection this end
 * gave up on (DATABASE_QUERY_TIMEOUT_MS destroys it) may still be running on the server, or
 * waiting for a row lock, with a COMMIT sent behind it: the server would only notice the
 * connection gone when it next writes to it, so the transaction could hold its locks and commit
 * minutes later. `client_connection_check_interval` (PostgreSQL 14 and later) has the server check
 * the connection every second while a statement runs and end the session (rolling its transaction
 * back) once it is closed; the keepalives (as on the control connection) make a connection whose
 * peer went silent, without closing it, fail that check too within about 25 s.
 */
export const POOLED_SETTINGS = {
  client_connection_check_interval: 1000,
  tcp_keepalives_idle: CONTROL_KEEPALIVE.tcp_keepalives_idle,
  tcp_keepalives_interval: CONTROL_KEEPALIVE.tcp_keepalives_interval,
  tcp_keepalives_count: CONTROL_KEEPALIVE.tcp_keepalives_count,
} as const;

/**
 * POOLED_SETTINGS in the statements that set them: the check in its own, as a server whose
 * platform cannot see a closed connection (Windows; PostgreSQL 14 off Linux) refuses any value
 * but 0, failing the statement that sets it, and the keepalives must not go with it.
 */
const POOLED_STATEMENTS: readonly Readonly<Record<string, number>>[] = (() => {
  const { client_connection_check_interval, ...keepalives } = POOLED_SETTINGS;
  return [keepalives, { client_connection_check_interval }];
})();

/** Commit log entries younger than this are kept (a coordinator cut off for less catches up). */
const LOG_KEEP_MS = 10 * 60 * 1000;
/** A launcher's last sign of life is written at most this often per launcher and coordinator. */
const TOUCH_EVERY_MS = 1000;
const TERMINAL = [...TERMINAL_STATUSES];

/**
 * All state in PostgreSQL (DATABASE_URL=postgres://…), shared by any number of coordinators
 * (`shared`: recovery after a restart is not run, other coordinators' commits arrive through
 * onCommit). The driver is node-postgres (`pg`) with its pool.
 *
 * - A transaction runs on one pooled connection, BEGIN … COMMIT at READ COMMITTED, with row locks
 *   (pg-tx.ts says which and in what order); deadlocks and serialisation failures run it again
 *   (pg-transactions.ts). Its statements are pipelined: it waits for the server only where it
 *   reads, and its writes go with the next read or the COMMIT (pg-pipeline.ts).
 * - A commit that others must react to (lifecycle events, or hints: jobs made ready, launchers to
 *   wake, jobs ended) appends one row to `commit_log` and NOTIFYs its id, in the same round trip
 *   as its COMMIT. The ids come from a row update of `commit_head` whose lock is held until
 *   COMMIT, so ids (and event ids) are handed out in commit order, without gaps. Every coordinator
 *   LISTENs (pg-control.ts) and hands each entry to its listeners in id order (pg-feed.ts): its
 *   own as it commits them, the others' read from the log.
 * - One coordinator sweeps at a time: the one whose control connection holds an advisory lock.
 * - Output: pg-output.ts. Schema and migrations: pg-schema.ts.
 */
/** How long an own commit's NOTIFY is left to its transaction before the log is read for it. */
const OWN_COMMIT_GRACE_MS = 1000;

/** How long onlineLaunchers' copy is used at most (a commit that changed a launcher ends it sooner). */
const ONLINE_COPY_MS = 1000;

export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly shared = true;
  /** the job's row is read with its holder: a job there is not refuses the batch (pg-output.ts) */
  readonly appendOutputChecksJob = true;
  /** the control connection (LISTEN, the sweeper's lock) is up: it reconnects when it can */
  get available(): boolean {
    return this.#control.connected;
  }
  readonly lastEventId: number;
  readonly #pool: pg.Pool;
  /** the pool's connections whose sockets are still open */
  readonly #poolClients: ReadonlySet<pg.Client>;
  readonly #o: PostgresStoreOptions;
  readonly #log: Logger;
  readonly #control: PgControl;
  readonly #feed: CommitFeed;
  readonly #output: PgOutput;
  readonly #channels: { commits: string; output: string };
  readonly #transactions: PgTransactions;
  readonly #listeners: ((commit: Commit) => void)[] = [];
  /** onlineLaunchers' copy, and the count of commits that changed a launcher's status */
  #online: { at: number; rows: LauncherRow[] } | undefined;
  #launcherChanges = 0;
  readonly #touched = new Map<string, number>();
  #closed = false;

  static async open(url: string, o: PostgresStoreOptions): Promise<PostgresStore> {
    const config: pg.ClientConfig = {
      connectionString: url,
      types: pgTypes,
      application_name: 'agentq-coordinator',
      keepAlive: true,
      // an idle connection whose peer went silent (no RST: a partition, a frozen host) is probed
      // after 10 s idle rather than the operating system's 2 h, and dropped when it fails
      keepAliveInitialDelayMillis: 10_000,
      // also how long a transaction may wait for a free connection of the pool under load
      connectionTimeoutMillis: o.connectTimeoutMs ?? 30_000,
    };
    // a transaction left open by a bug must not hold its locks for ever
    // pipeline mode: a transaction sends its writes without waiting for their answers (pg-pipeline.ts)
    // query_timeout: a database host that freezes (stops answering, no RST) would hold a request,
    // and with the pool full every request, until TCP gives up (minutes to hours): a statement
    // unanswered this long fails with 503 instead, its connection destroyed (node-postgres does so
    // in pipeline mode, and the store releases it as broken). It also bounds a wait for a row lock
    // (transactions hold them for milliseconds; one left open by a bug, 60 s at most, below)
    // its connections are kept track of until their sockets close: close() destroys what a frozen
    // host leaves open (pg-close.ts)
    const clients = trackedClients();
    const pool = new pg.Pool({
      ...config,
      Client: clients.Client,
      max: o.poolSize ?? 10,
      idle_in_transaction_session_timeout: 60_000,
      pipeline: true,
      query_timeout: o.queryTimeoutMs ?? 30_000,
    });
    pool.on('error', (err) => o.log.warn({ err }, 'idle PostgreSQL connection failed'));
    // a connection that breaks while a transaction holds it fails that transaction's query (and
    // every later one on it): node-postgres also emits 'error' on the client, which the pool
    // listens for only while the client is idle, and an unheard 'error' ends the process
    pool.on('connect', (client) => {
      client.on('error', () => undefined);
      // the first statements on the connection (pipeline mode sends them, and the first
      // transaction's behind them, without waiting); a failure is the connection's, which that
      // transaction meets too, or the server's refusal of a setting (POOLED_STATEMENTS)
      for (const settings of POOLED_STATEMENTS) {
        setKnownSettings(client, settings).catch((err: unknown) => o.log.debug({ err }, 'could not set the settings of a pooled PostgreSQL connection'));
      }
    });
    const backends = poolBackends(pool);
    const queryTimeoutMs = o.queryTimeoutMs ?? 30_000;
    let namespace: string;
    let head: { commit_id: number; event_id: number } | undefined;
    try {
      // not a connection of the pool: a migration may take minutes (an index built over millions
      // of rows, or waiting for another coordinator's migration), which no query timeout may cut.
      // Its connecting is bounded (connectionTimeoutMillis), and its statements by the database
      // answering checks on connections of their own meanwhile (whileAnswering): a host that
      // freezes under the migration fails the start rather than holding it for ever
      const client = new pg.Client(config);
      client.on('error', () => undefined); // a failure also fails the query under way
      await client.connect();
      try {
        namespace = await whileAnswering(client, config, queryTimeoutMs, 'its schema was checked and migrated', async () => {
          const [where] = await rowsOf<{ db: string; schema: string | null }>(client, 'SELECT current_database() AS db, current_schema() AS schema');
          if (!where?.schema) throw new Error('no schema to create tables in: create it, or fix search_path (?options=-c search_path=NAME)');
          const within = `${where.db}.${where.schema}`;
          const from = await migratePg(client, `agentq:migrate:${within}`);
          o.log.info({ database: redactDatabaseUrl(url), schema: where.schema, from_version: from }, 'PostgreSQL store opened');
          return within;
        });
      } finally {
        // not a bare end(): it would wait for a frozen host to close the socket
        await endWithin(client, CLOSE_GRACE_MS);
      }
      // on the pool: bounded by its query timeout
      [head] = await rowsOf<{ commit_id: number; event_id: number }>(pool, 'SELECT commit_id, event_id FROM commit_head');
    } catch (err) {
      await endPoolWithin(pool, clients.open, CLOSE_GRACE_MS);
      if (err instanceof ConfigError) throw err;
      throw new StartupError(`cannot open the PostgreSQL database ${redactDatabaseUrl(url)}: ${(err as Error).message}`, { cause: err });
    }
    const store = new PostgresStore(pool, clients.open, config, namespace, head!, o, backends);
    try {
      await store.#control.start();
    } catch (err) {
      await store.close();
      throw new StartupError(`cannot listen on the PostgreSQL database ${redactDatabaseUrl(url)}: ${(err as Error).message}`, { cause: err });
    }
    return store;
  }

  private constructor(
    pool: pg.Pool,
    poolClients: ReadonlySet<pg.Client>,
    config: pg.ClientConfig,
    namespace: string,
    head: { commit_id: number; event_id: number },
    o: PostgresStoreOptions,
    /** the server processes of this store's pool: see the control's commit handler */
    backends: ReadonlySet<number>,
  ) {
    this.#pool = pool;
    this.#poolClients = poolClients;
    this.#o = o;
    this.#log = o.log;
    this.lastEventId = head.event_id;
    // channels and locks are per database and schema: deployments sharing a server stay apart
    const ns = createHash('sha1').update(namespace).digest('hex').slice(0, 12);
    this.#channels = { commits: `agentq_commits_${ns}`, output: `agentq_output_${ns}` };
    this.#feed = new CommitFeed(
      (afterId, limit) =>
        rowsOf<LogRow>(this.#transactions.reads, 'SELECT id, first_event_id, events, hints FROM commit_log WHERE id > $1 ORDER BY id LIMIT $2', [afterId, limit]),
      (jobIds) => promptsOf(this.#transactions.reads, jobIds),
      (commit) => {
        if (commit.launchersChanged) {
          this.#online = undefined;
          this.#launcherChanges++;
        }
        for (const listener of this.#listeners) listener(commit);
      },
      o.log,
    );
    this.#feed.start(head.commit_id);
    this.#transactions = new PgTransactions({
      pool,
      feed: this.#feed,
      channel: this.#channels.commits,
      origin: `${hostname()}/${process.pid}/${randomBytes(3).toString('hex')}`,
      clock: o.clock,
      log: o.log,
      serves: new Map(),
      closed: () => this.#closed,
      sessionListMax: o.sessionListMax ?? MAX_SESSION_LIST_ITEMS,
    });
    this.#output = new PgOutput(this.#transactions.reads, o.outputMaxBytes, this.#channels.output, (fn) => this.#transactions.own(fn));
    this.#control = new PgControl(
      config,
      this.#channels,
      `agentq:sweeper:${namespace}`,
      {
        // a commit of this coordinator's own is handed to the feed by its transaction (or, when its
        // outcome is unknown, announced then): its NOTIFY, which may come first, would only make
        // the feed read the log for it. Unless it is not delivered a second later: a server process
        // of this pool that died may have had its id given to another coordinator's connection
        commit: (id, from) => {
          if (!backends.has(from)) return this.#feed.announce(id);
          setTimeout(() => {
            if (this.#feed.delivered < id) this.#feed.announce(id);
          }, OWN_COMMIT_GRACE_MS).unref();
        },
        output: (payload) => this.#output.notified(payload),
        // catch up with what was committed meanwhile, and with output appended meanwhile
        connected: () => {
          this.#feed.announce();
          this.#output.recheck().catch((err: unknown) => o.log.warn({ err }, 'could not read output lengths after reconnecting'));
        },
      },
      o.log,
      // a database that answers no query on it within the query timeout is taken for lost too
      o.queryTimeoutMs ?? 30_000,
    );
  }

  onCommit(listener: (commit: Commit) => void): void {
    this.#listeners.push(listener);
  }

  transaction<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.#transactions.run(fn);
  }

  // --- reads outside transactions (a committed view) ----------------------------------------

  async #rows<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values: unknown[] = []): Promise<R[]> {
    try {
      return await rowsOf<R>(this.#transactions.reads, text, values);
    } catch (err) {
      throw readFailure(err);
    }
  }

  async getJob(id: string): Promise<JobRow | undefined> {
    const [raw] = await this.#rows('SELECT * FROM jobs WHERE id = $1', [id]);
    return raw ? decode(JOBS, raw) : undefined;
  }
  async getSession(name: string): Promise<SessionRow | undefined> {
    const [raw] = await this.#rows('SELECT * FROM sessions WHERE name = $1', [name]);
    return raw ? decode(SESSIONS, raw) : undefined;
  }
  async sessionExtras(session: SessionRow): Promise<SessionExtras> {
    return (await this.sessionsExtras([session]))[0]!;
  }
  async sessionsExtras(sessions: readonly SessionRow[]): Promise<SessionExtras[]> {
    if (sessions.length === 0) return [];
    const extras = await extrasOf(
      this.#transactions.reads,
      sessions.map((s) => s.name),
      this.#o.sessionListMax ?? MAX_SESSION_LIST_ITEMS,
    ).catch((err: unknown) => {
      throw readFailure(err);
    });
    return sessions.map((s) => extras.get(s.name)!);
  }
  async childNames(name: string): Promise<string[]> {
    return childNamesOf(this.#transactions.reads, name).catch((err: unknown) => {
      throw readFailure(err);
    });
  }
  async jobBriefs(ids: readonly string[]): Promise<JobBrief[]> {
    // an id with a NUL cannot be stored (and would fail the lookup of the others)
    const lookup = ids.filter((id) => !id.includes('\u0000'));
    if (lookup.length === 0) return [];
    return this.#rows<JobBrief>(`SELECT id, status, ${JOB_TEXT_BYTES} AS size FROM jobs WHERE id = ANY($1)`, [lookup]);
  }
  async getLauncher(id: string): Promise<LauncherRow | undefined> {
    const [raw] = await this.#rows('SELECT * FROM launchers WHERE id = $1', [id]);
    return raw ? decode(LAUNCHERS, raw) : undefined;
  }
  async listLaunchers(page?: LaunchersPage): Promise<LauncherRow[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => `$${args.push(v)}`;
    // ids compared as plain bytes (COLLATE "C"), as the other stores compare them, whatever the
    // database's collation: a page's cursor must follow the order the pages are read in
    if (page?.after !== undefined) where.push(`(registered_at, id COLLATE "C") > (${arg(page.after.registeredAt)}, ${arg(page.after.id)} COLLATE "C")`);
    const sql =
      `SELECT * FROM launchers${where.length > 0 ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY registered_at, id COLLATE "C"` +
      (page?.limit !== undefined ? ` LIMIT ${arg(page.limit)}` : '');
    return (await this.#rows(sql, args)).map((r) => decode(LAUNCHERS, r));
  }

  /**
   * The online launchers, read again once a commit (of any coordinator) changed a launcher's
   * status, or after ONLINE_COPY_MS: a create or a read of a pending job names why it waits from
   * them, and reading every launcher each time costs as much as the rest of the request.
   */
  async onlineLaunchers(): Promise<LauncherRow[]> {
    const now = this.#o.clock.now();
    if (this.#online && now - this.#online.at < ONLINE_COPY_MS) return this.#online.rows;
    const changes = this.#launcherChanges;
    const rows = (await this.#rows("SELECT * FROM launchers WHERE status = 'online' ORDER BY registered_at, id")).map((r) => decode(LAUNCHERS, r));
    // kept only if no commit changed a launcher while it was read (the read may predate it)
    if (changes === this.#launcherChanges) this.#online = { at: now, rows };
    return rows;
  }
  async activeJobIdsOfLaunchers(ids: readonly string[]): Promise<Map<string, string[]>> {
    // one query for a page (GET /launchers): one per launcher was 1,000 queries for limit=1000
    return heldBy(this.#transactions.reads, ids).catch((err: unknown) => {
      throw readFailure(err);
    });
  }
  async activeJobIds(): Promise<string[]> {
    return (await this.#rows<{ id: string }>(`SELECT id FROM jobs WHERE status IN ${ACTIVE} ORDER BY seq`)).map((r) => r.id);
  }

  async listJobs(f: ListJobsFilter): Promise<ListPage<JobRow>> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => `$${args.push(v)}`;
    if (f.before !== undefined) where.push(`seq < ${arg(f.before)}`);
    if (f.sessionName !== undefined) where.push(`session_name = ${arg(f.sessionName)}`);
    if (f.launcherId !== undefined) where.push(`launcher_id = ${arg(f.launcherId)}`);
    if (f.statuses) where.push(`status = ANY(${arg([...f.statuses])}::text[])`);
    if (f.terminal !== undefined) where.push(`${f.terminal ? '' : 'NOT '}(status = ANY(${arg(TERMINAL)}::text[]))`);
    return this.#page(JOBS, 'jobs', JOB_TEXT_BYTES, where, args, f);
  }

  async listSessions(f: ListSessionsFilter): Promise<ListPage<SessionRow>> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => `$${args.push(v)}`;
    if (f.before !== undefined) where.push(`s.seq < ${arg(f.before)}`);
    if (f.parent !== undefined) where.push(`s.parent_name = ${arg(f.parent)}`);
    if (f.root === true) where.push('s.parent_name IS NULL');
    if (f.status !== undefined) {
      where.push(`${f.status === 'busy' ? '' : 'NOT '}EXISTS (SELECT 1 FROM jobs j WHERE j.session_name = s.name AND j.completed_at IS NULL)`);
    }
    return this.#page(SESSIONS, 'sessions s', 'coalesce(octet_length(last_result), 0) + coalesce(octet_length(last_error), 0) + octet_length(callbacks) + octet_length(messages)', where, args, f);
  }

  /**
   * A page of `from` (newest first), up to `f.limit` rows; with `f.maxBytes`, the rows' sizes are
   * summed first (a window over the page), and whole rows are read up to the last that fits.
   */
  async #page<T>(
    table: Table<T>,
    from: string,
    size: string,
    where: string[],
    args: unknown[],
    f: { limit: number; maxBytes?: number },
  ): Promise<ListPage<T>> {
    const filter = where.length ? `WHERE ${where.join(' AND ')}` : '';
    args.push(f.limit);
    if (f.maxBytes === undefined) {
      const rows = await this.#rows(`SELECT * FROM ${from} ${filter} ORDER BY seq DESC LIMIT $${args.length}`, args);
      return { rows: rows.map((r) => decode(table, r)), cut: false };
    }
    args.push(f.maxBytes);
    const rows = await this.#rows(
      `WITH page AS (SELECT *, ${size} AS text_size FROM ${from} ${filter} ORDER BY seq DESC LIMIT $${args.length - 1}),
         counted AS (SELECT *, row_number() OVER w AS n, sum(text_size) OVER w AS used, count(*) OVER () AS page_rows FROM page WINDOW w AS (ORDER BY seq DESC))
       SELECT * FROM counted WHERE n = 1 OR used <= $${args.length} ORDER BY seq DESC`,
      args,
    );
    return { rows: rows.map((r) => decode(table, r)), cut: rows.length > 0 && Number(rows[0]!['page_rows']) > rows.length };
  }

  async counts(): Promise<StoreCounts> {
    const rows = await this.#rows<{ status: string; n: number }>(
      `SELECT status, count(*) AS n FROM jobs WHERE status IN ('pending', 'claimed', 'running', 'stopping') GROUP BY status`,
    );
    let pending = 0;
    let active = 0;
    for (const r of rows) {
      if (r.status === 'pending') pending += r.n;
      else active += r.n;
    }
    return { pending, active };
  }

  /**
   * From the counts the trigger keeps (migration 5): job_counts, plus the changes the sweeper has
   * not folded into it yet (about one sweep interval of them), whatever the history.
   */
  async countByStatus(): Promise<Partial<Record<JobStatus, number>>> {
    const rows = await this.#rows<{ status: JobStatus; n: number }>(
      `SELECT status, sum(n)::bigint AS n FROM (
         SELECT status, n FROM job_counts
         UNION ALL SELECT c.status, c.n FROM job_count_changes, LATERAL (VALUES (became, 1), (was, -1)) AS c (status, n)
       ) AS counted WHERE status IS NOT NULL GROUP BY status HAVING sum(n) <> 0`,
    );
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  }

  /**
   * Fold the job status changes the trigger appended into job_counts, in one statement: a change
   * is either still listed or counted, never both. Changes of transactions not committed yet are
   * not seen, and wait for the next fold; two folds at once delete each change once (the second
   * waits for the first), and write job_counts in status order, so they cannot deadlock.
   */
  async foldJobCounts(): Promise<void> {
    await this.#rows(
      `WITH folded AS (DELETE FROM job_count_changes RETURNING was, became),
         changes AS (SELECT c.status, c.n FROM folded, LATERAL (VALUES (became, 1), (was, -1)) AS c (status, n) WHERE c.status IS NOT NULL)
       INSERT INTO job_counts (status, n) SELECT status, sum(n) FROM changes GROUP BY status ORDER BY status
       ON CONFLICT (status) DO UPDATE SET n = job_counts.n + excluded.n`,
    );
  }

  async readyBuckets(): Promise<ReadyBucket[]> {
    return this.#rows<ReadyBucket>(
      `SELECT route_key AS key, count(*) AS size, (array_agg(ready_since ORDER BY seq))[1] AS "headReadySince"
       FROM jobs WHERE ready_since IS NOT NULL GROUP BY route_key`,
    );
  }

  async readyJobsIn(key: string, limit: number): Promise<JobRow[]> {
    // not deliveries (rows.isDelivery): they wait for their host
    const rows = await this.#rows(
      'SELECT * FROM jobs WHERE ready_since IS NOT NULL AND route_key = $1 AND callback_of IS NULL AND message_ids IS NULL ORDER BY seq LIMIT $2',
      [key, limit],
    );
    return rows.map((r) => decode(JOBS, r));
  }

  /**
   * A sign of life, written at most once a second per launcher by this coordinator (the stale
   * timeout is counted in tens of seconds). Run again on a fresh connection when its pooled one
   * broke, as transactions are (PgTransactions.idempotent: GREATEST makes a second run the same as
   * one). Never throws: a poll's claims must still be answered; a failure that stays is logged,
   * and the next sign of life writes it.
   */
  async touchLauncher(id: string, now: number): Promise<void> {
    const last = this.#touched.get(id);
    if (last !== undefined && now - last < TOUCH_EVERY_MS && now >= last) return;
    this.#touched.set(id, now);
    if (this.#touched.size > 100_000) this.#touched.clear();
    try {
      await this.#transactions.idempotent('UPDATE launchers SET last_seen = GREATEST(last_seen, $2) WHERE id = $1', [id, now]);
    } catch (err) {
      this.#touched.delete(id);
      this.#log.warn({ err, launcher_id: id }, 'could not record a launcher sign of life');
    }
  }

  // --- output ----------------------------------------------------------------------------------

  appendOutput(jobId: string, offset: number, data: string, holder?: string): Promise<number | null> {
    return this.#output.append(jobId, offset, data, holder);
  }
  readOutput(jobId: string, from: number | null, limit: number): Promise<OutputSlice & OutputInfo> {
    return this.#output.read(jobId, from, limit).catch((err: unknown) => {
      throw readFailure(err);
    });
  }
  whenOutput(jobId: string, signal: AbortSignal, after?: number): Promise<void> {
    return this.#output.when(jobId, signal, after);
  }

  // --- housekeeping (run by the coordinator that holds the sweeper lock) ------------------------

  sweeperLease(): Promise<boolean> {
    return this.#control.sweeperLease();
  }

  async unservedSince(): Promise<Map<string, number>> {
    const [row] = await this.#rows<{ value: string }>("SELECT value FROM meta WHERE key = 'unserved_since'");
    return new Map(Object.entries(row ? (JSON.parse(row.value) as Record<string, number>) : {}));
  }

  async keepUnservedSince(routes: ReadonlyMap<string, number>): Promise<void> {
    await this.#rows(
      "INSERT INTO meta (key, value) VALUES ('unserved_since', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      [JSON.stringify(Object.fromEntries(routes))],
    );
  }

  async dueTimeouts(now: number): Promise<string[]> {
    const rows = await this.#rows<{ id: string }>(
      `SELECT id FROM jobs WHERE timeout_ms IS NOT NULL AND completed_at IS NULL AND created_at + timeout_ms <= $1 AND status <> 'stopping'
       AND NOT (status = 'pending' AND (callback_of IS NOT NULL OR message_ids IS NOT NULL))
       ORDER BY created_at + timeout_ms LIMIT 1000`,
      [now],
    );
    return rows.map((r) => r.id);
  }

  async expiredClaims(before: number): Promise<string[]> {
    const rows = await this.#rows<{ id: string }>(
      `SELECT id FROM jobs WHERE status IN ${ACTIVE} AND started_at IS NULL AND claimed_at < $1 ORDER BY seq`,
      [before],
    );
    return rows.map((r) => r.id);
  }

  async historyDue(before: number, limit: number): Promise<{ jobs: string[]; sessions: string[] }> {
    const jobs = await this.#rows<{ id: string }>(
      'SELECT id FROM jobs WHERE completed_at IS NOT NULL AND completed_at <= $1 ORDER BY completed_at LIMIT $2',
      [before, limit],
    );
    const sessions = await this.#rows<{ name: string }>(
      `SELECT name FROM sessions s WHERE updated_at <= $1 AND ((callbacks = '[]' AND messages = '[]') OR NOT accepts_input
             OR (s.parent_name IS NOT NULL AND EXISTS (SELECT 1 FROM sessions r WHERE r.name = s.root_name AND r.budget_usd IS NOT NULL AND r.tree_cost_usd >= r.budget_usd - ${COST_EPSILON_USD}))) AND delivery_job_id IS NULL
         AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.session_name = s.name)
         AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent_name = s.name)
       ORDER BY updated_at LIMIT $2`,
      [before, limit],
    );
    return { jobs: jobs.map((r) => r.id), sessions: sessions.map((r) => r.name) };
  }

  async purgeIdempotency(before: number): Promise<void> {
    await this.#rows('DELETE FROM idempotency WHERE created_at < $1', [before]);
  }

  /** Forget commit log entries older than LOG_KEEP_MS, keeping at least the newest replay window of events. */
  async purgeEvents(now: number): Promise<void> {
    await this.#rows(
      'DELETE FROM commit_log WHERE at < $1 AND last_event_id <= (SELECT event_id FROM commit_head) - $2',
      [now - LOG_KEEP_MS, this.#o.eventReplaySize ?? 1000],
    );
  }

  async eventsSince(afterId: number, beforeId: number, limit: number, maxBytes: number): Promise<LifecycleEvent[]> {
    return logEvents(this.#transactions.reads, afterId, beforeId, limit, maxBytes).catch((err: unknown) => {
      throw readFailure(err);
    });
  }

  trimCache(): void {}

  /**
   * Refuses new work, closes the control connection and the pool: bounded (CLOSE_GRACE_MS each)
   * whatever the database does. A statement still unanswered then (a sweep's, a request's on a
   * frozen host) fails as on a broken connection, rather than holding the shutdown for
   * DATABASE_QUERY_TIMEOUT_MS; its transaction, never committed, is rolled back by the server.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#feed.close();
    await this.#control.close();
    await endPoolWithin(this.#pool, this.#poolClients, CLOSE_GRACE_MS);
  }
}

/**
 * A read's failure as its answer: a connection that cannot be had is already the store's 503
 * (StoreUnreachableError), a connection that breaks or times out becomes it.
 */
function readFailure(err: unknown): unknown {
  if (err instanceof CoordinatorError) return err;
  return isConnectionError(err) ? unavailable(err) : err;
}

/** The process ids of the server sessions of `pool`'s connections, kept up to date. */
function poolBackends(pool: pg.Pool): ReadonlySet<number> {
  const pids = new Set<number>();
  // a client's processID is known once it is connected, which is when the pool says so
  const pidOf = (client: pg.PoolClient) => (client as unknown as { processID: number | null }).processID;
  pool.on('connect', (client) => {
    const pid = pidOf(client);
    if (pid !== null) pids.add(pid);
  });
  pool.on('remove', (client) => {
    const pid = pidOf(client);
    if (pid !== null) pids.delete(pid);
  });
  return pids;
}
