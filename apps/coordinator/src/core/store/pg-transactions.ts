import { setTimeout as sleep } from 'node:timers/promises';
import type { LifecycleEvent } from '@agentq/protocol';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { CoordinatorError } from '../errors.js';
import { runAfterCommit } from './after-commit.js';
import { compactEvents, countReady, hintsOf } from './changes.js';
import { encodeEvents, encodeHints, hasHints, type CommitFeed, type EventDraft } from './pg-feed.js';
import { Pipeline } from './pg-pipeline.js';
import { eventDrafts, rowsOf, type Queryable } from './pg-queries.js';
import { isConnectionError, isQueryTimeout, isRetryable, isUniqueViolation, sqlLiteral, sqlState, unavailable, unreachable } from './pg-sql.js';
import { PgTx, type ServesCache } from './pg-tx.js';
import type { Commit, Tx } from './store.js';

/** Runs of one transaction after deadlocks and serialisation failures before giving up. */
const MAX_ATTEMPTS = 20;

/**
 * Whether a failed run of a transaction (attempt `attempt`) is run again from the start, on a
 * fresh connection: after a deadlock or serialisation failure; after a unique key taken by a
 * concurrent transaction (twice); and after its connection broke (twice: a pooled connection
 * may be dead without the pool knowing yet, just after the database restarted). Never once its
 * COMMIT was sent: its outcome is then unknown. Nor after a query timeout: the database that did
 * not answer would be waited for as long again.
 */
function runsAgain(err: unknown, attempt: number, commitSent: boolean, broken: boolean): boolean {
  if (commitSent || attempt >= MAX_ATTEMPTS || isQueryTimeout(err)) return false;
  return isRetryable(err) || (isUniqueViolation(err) && attempt < 3) || (broken && attempt < 3);
}

/**
 * The 503 of a change whose connection broke or timed out: applied: false unless its COMMIT was
 * sent; a query timeout as StoreUnreachableError (a sync stops there: the next report would wait
 * as long).
 */
function connectionFailure(err: unknown, commitSent: boolean): CoordinatorError {
  if (isQueryTimeout(err)) return unreachable(err, { commitSent });
  return commitSent ? unavailable(err) : unavailable(err, { applied: false });
}

/**
 * What made a run of a transaction fail: `thrown`, unless a write it sent before (pipelined, not
 * waited for: pg-pipeline.ts) failed, which came first. The body may throw its own error (a 409
 * it decided on) before its next read would have thrown the write's failure; that write aborted
 * the transaction, and its failure says whether the transaction runs again (a deadlock, a unique
 * key a concurrent transaction took) or what the caller is told. Not after COMMIT was sent (its
 * own settle read the writes' answers), nor after the connection broke (every write failed so).
 *
 * The body's error is set aside then, and said in the log: at debug for a coded refusal (one a
 * run that sees the write's outcome will decide again), at error for anything else: a bug (a
 * TypeError) met after a failed write would otherwise go unseen when the run after it succeeds.
 */
async function firstFailure(db: Pipeline | undefined, thrown: unknown, commitSent: boolean, log: Logger): Promise<unknown> {
  if (!db || commitSent || isConnectionError(thrown)) return thrown;
  const failed = await db.settle().then(
    () => undefined,
    (err: unknown) => ({ err }),
  );
  if (!failed || failed.err === thrown) return thrown;
  const fields = { err: thrown, write_error: describeFailure(failed.err) };
  const msg = "transaction threw after one of its writes had failed: the write's failure decides, this error is set aside";
  if (thrown instanceof CoordinatorError) log.debug(fields, msg);
  else log.error(fields, msg);
  return failed.err;
}

/** A failed write as a log field: its SQLSTATE and message (the error itself is the answer's). */
function describeFailure(err: unknown): { code: string | undefined; message: string } {
  return { code: sqlState(err), message: err instanceof Error ? err.message : String(err) };
}

/** A commit log entry before it has its id. */
interface LogDraft {
  drafts: EventDraft[];
  hints: string;
  at: number;
}

export interface PgTransactionsOptions {
  pool: pg.Pool;
  feed: CommitFeed;
  /** the NOTIFY channel of commits */
  channel: string;
  /** who commits (in the log, for people reading it) */
  origin: string;
  clock: Clock;
  log: Logger;
  serves: ServesCache;
  closed: () => boolean;
  /** MAX_SESSION_LIST_ITEMS: the entries of each list of a session in an event */
  sessionListMax: number;
}

/**
 * The PostgreSQL store's transactions: run one (again after a deadlock or serialisation
 * failure), append its commit log entry and COMMIT in one round trip, and hand the commit to the
 * feed (see postgres-store.ts for the whole picture).
 */
export class PgTransactions {
  readonly #o: PgTransactionsOptions;

  constructor(o: PgTransactionsOptions) {
    this.#o = o;
  }

  async run<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#connect();
      let released = false;
      const release = (destroy: boolean) => {
        if (released) return;
        released = true;
        client.release(destroy || undefined);
      };
      let db: Pipeline | undefined;
      let tx: PgTx | undefined;
      let commitSent = false;
      let broken = false;
      try {
        // BEGIN waits for no answer: it goes with the transaction's first read (pg-pipeline.ts)
        db = new Pipeline(client);
        db.send('BEGIN');
        tx = new PgTx(db, this.#o.clock.now(), this.#o.serves);
        const result = await fn(tx);
        await tx.holdAhead();
        tx.flush();
        const entry = await this.#entryOf(db, tx);
        const committing = this.#commit(db, entry?.log);
        // the writes not answered yet go with the COMMIT: one that failed aborted the transaction
        // (the COMMIT behind it rolled back), and the transaction may run again; a connection
        // lost meanwhile leaves the outcome unknown
        commitSent = true;
        try {
          await db.settle();
        } catch (err) {
          committing.catch(() => undefined);
          if (Pipeline.abortedBy(err)) commitSent = false;
          throw err;
        }
        const logged = await committing;
        // the connection goes back first: delivering may need one (to read earlier commits of
        // other coordinators), and so do the reactions it starts
        release(false);
        // listeners (dispatch, waits, SSE) see it before the caller does, as with a local store
        if (entry && logged) await this.#o.feed.committed(logged.id, entry.commit(logged.first));
        runAfterCommit(tx.committed, this.#o.log);
        return result;
      } catch (thrown) {
        if (released) throw thrown;
        const err = await firstFailure(db, thrown, commitSent, this.#o.log);
        if (isConnectionError(err)) broken = true;
        else await client.query('ROLLBACK').catch(() => (broken = true));
        // a COMMIT whose outcome is unknown: if it went through, the log has it
        if (commitSent) this.#o.feed.announce();
        const again = runsAgain(err, attempt, commitSent, broken);
        release(broken);
        if (!again && tx) {
          await tx.holdAhead();
          this.#rolledBack(tx);
        }
        if (again) {
          this.#o.log.debug({ err, attempt }, 'transaction conflicted; running it again');
          if (isRetryable(err)) await sleep(Math.random() * 5 * attempt);
          continue;
        }
        if (isConnectionError(err)) throw connectionFailure(err, commitSent);
        throw err;
      } finally {
        release(broken);
      }
    }
  }

  /**
   * A connection of the pool, or `unreachable`: none could be had (the database is down or hangs,
   * so that each attempt waits out DATABASE_CONNECT_TIMEOUT_MS; the pool stayed full that long).
   */
  async #connect(): Promise<pg.PoolClient> {
    if (this.#o.closed()) throw unreachable(new Error('the store is closed'));
    try {
      return await this.#o.pool.connect();
    } catch (err) {
      throw unreachable(err);
    }
  }

  /**
   * The pool as reads outside transactions use it: one statement on a connection of the pool,
   * which is released as broken (never used again) when the statement fails so (a query timeout
   * included). A connection that cannot be had is `unreachable`, as for a change.
   */
  readonly reads: Queryable = {
    query: async <R extends pg.QueryResultRow>(q: { name: string; text: string; values: unknown[] }): Promise<pg.QueryResult<R>> => {
      const client = await this.#connect();
      try {
        const result = await client.query<R>(q);
        client.release();
        return result;
      } catch (err) {
        client.release(isConnectionError(err) || undefined);
        throw err;
      }
    },
  };

  /**
   * A short transaction of the store's own (output appends): run again as `run` runs its
   * transactions (runsAgain), so a batch that meets a dead pooled connection is stored, not
   * answered 503, and `fn` must be safe to run again from the start.
   */
  async own<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#connect();
      let broken = false;
      let commitSent = false;
      try {
        await client.query('BEGIN');
        const result = await fn(client);
        commitSent = true;
        await client.query('COMMIT');
        client.release();
        return result;
      } catch (err) {
        if (isConnectionError(err)) broken = true;
        else await client.query('ROLLBACK').catch(() => (broken = true));
        client.release(broken || undefined);
        if (runsAgain(err, attempt, commitSent, broken)) {
          this.#o.log.debug({ err, attempt }, 'transaction failed; running it again');
          if (isRetryable(err)) await sleep(Math.random() * 5 * attempt);
          continue;
        }
        throw isConnectionError(err) ? connectionFailure(err, commitSent) : err;
      }
    }
  }

  /**
   * One statement on its own (no BEGIN: it commits as it runs), run again as `run` runs its
   * transactions (runsAgain): after a deadlock, or after its pooled connection broke (twice: a
   * connection may be dead without the pool knowing, just after the database restarted). Whether
   * it ran before the connection broke is unknown, so running it twice must do what once does.
   */
  async idempotent(text: string, values: unknown[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const client = await this.#connect();
      try {
        await rowsOf(client, text, values);
        client.release();
        return;
      } catch (err) {
        const broken = isConnectionError(err);
        client.release(broken || undefined);
        if (runsAgain(err, attempt, false, broken)) {
          this.#o.log.debug({ err, attempt }, 'statement failed; running it again');
          if (isRetryable(err)) await sleep(Math.random() * 5 * attempt);
          continue;
        }
        // it commits as it runs: sent, it may have been made
        throw broken ? connectionFailure(err, true) : err;
      }
    }
  }

  /** The commit log entry of a transaction (events and hints), if others must react to it. */
  async #entryOf(db: Pipeline, tx: PgTx): Promise<{ log: LogDraft; commit: (firstEventId: number) => Commit } | undefined> {
    const changes = tx.changes();
    changes.events = compactEvents(changes.events);
    const hints = hintsOf(changes);
    for (const key of tx.lockedReady(false)) countReady(hints.readyKeys, key);
    const drafts = changes.events.length > 0 ? await eventDrafts(db, changes, tx.cached(), tx.now, this.#o.sessionListMax) : [];
    if (drafts.length === 0 && !hasHints(hints)) return undefined;
    return {
      log: { drafts, hints: encodeHints(hints), at: tx.now },
      commit: (first) => ({ events: drafts.map((d, i) => ({ ...d, id: first + i }) as LifecycleEvent), ...hints }),
    };
  }

  /**
   * COMMIT, after appending the log entry if there is one: in one round trip, so the commit_head
   * row (which hands out the entry's id and event ids) stays locked only while the server runs
   * it. The next transaction to log waits for that lock, so entries commit in id order, without
   * gaps (a rollback undoes the head's update). Returns the entry's id and first event id.
   */
  async #commit(db: Pipeline, log: LogDraft | undefined): Promise<{ id: number; first: number } | undefined> {
    if (!log) {
      // not db.query: the answers sent before are waited for by the caller (a failure among them
      // means this COMMIT rolled back, which its answer says too)
      const done = await db.client.query('COMMIT');
      if (done.command === 'ROLLBACK') throw new Error('the transaction was rolled back at COMMIT (a statement of it failed)');
      return undefined;
    }
    const n = log.drafts.length;
    const lit = sqlLiteral;
    const results = (await db.client.query(
      `WITH h AS (UPDATE commit_head SET commit_id = commit_id + 1, event_id = event_id + ${n} RETURNING commit_id, event_id)
       INSERT INTO commit_log (id, first_event_id, last_event_id, origin, at, events, hints)
       SELECT commit_id, event_id - ${n} + 1, event_id, ${lit(this.#o.origin)}, ${Math.trunc(log.at)}, ${lit(encodeEvents(log.drafts))}, ${lit(log.hints)} FROM h
       RETURNING id, first_event_id;
       SELECT pg_notify(${lit(this.#o.channel)}, (SELECT commit_id::text FROM commit_head));
       COMMIT`,
    )) as unknown as pg.QueryResult<{ id: number; first_event_id: number }>[];
    const row = results[0]!.rows[0]!;
    return { id: row.id, first: row.first_event_id };
  }

  /**
   * A transaction failed after locking ready jobs it did not change: a claim may have skipped
   * them meanwhile, so say they are ready (a hint-only log entry), or a parked poll could wait
   * for its hold time although there is work.
   */
  #rolledBack(tx: PgTx): void {
    const ready = tx.lockedReady(true);
    if (ready.length === 0 || this.#o.closed()) return;
    const readyKeys = new Map<string, number>();
    for (const key of ready) countReady(readyKeys, key);
    const hints = {
      readyKeys,
      launchersToWake: new Set<string>(),
      ended: new Set<string>(),
      launchersChanged: false,
    };
    void (async () => {
      const client = await this.#connect();
      let broken = false;
      try {
        const db = new Pipeline(client);
        db.send('BEGIN');
        const logged = await this.#commit(db, { drafts: [], hints: encodeHints(hints), at: this.#o.clock.now() });
        await db.settle();
        await this.#o.feed.committed(logged!.id, { events: [], ...hints });
      } catch (err) {
        broken = true;
        this.#o.log.warn({ err }, 'could not announce ready jobs after a failed transaction');
      } finally {
        client.release(broken || undefined);
      }
    })().catch((err: unknown) => this.#o.log.warn({ err }, 'could not announce ready jobs after a failed transaction'));
  }
}
