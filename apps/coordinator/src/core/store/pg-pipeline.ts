import type pg from 'pg';
import { isConnectionError, sqlState } from './pg-sql.js';

/** A statement with its parameters (a named prepared statement), or simple-query text. */
export type Statement = { name: string; text: string; values: unknown[] } | string;

/**
 * One transaction's connection, in node-postgres' pipeline mode (the pool's `pipeline: true`): a
 * statement is written to the server at once, without waiting for the answers to the ones before
 * it, which the server runs in order. A transaction waits only where it needs an answer:
 *
 * - `send` (BEGIN, INSERT, UPDATE, DELETE: no answer needed) writes and goes on; its failure is
 *   kept and thrown by the next `query` or `settle`, as a unique violation on INSERT was thrown
 *   by the INSERT before, so the store runs the transaction again just the same (a transaction
 *   that throws before either settles first: the write's failure came first, pg-transactions.ts);
 * - `query` writes and waits for its answer, and for those of everything sent before it (the same
 *   round trip): so a create sends BEGIN with its first read, and its writes with its COMMIT.
 *
 * Every statement after a failed one fails too (the transaction is aborted: 25P02), so the first
 * failure is the one that says what happened; nothing after it can commit.
 */
export class Pipeline {
  readonly client: pg.PoolClient;
  /** statements sent and not waited for yet */
  #pending: Promise<void>[] = [];
  /** the first failure among them (a sticky one: the transaction is aborted from there) */
  #failed: { err: unknown } | undefined;

  constructor(client: pg.PoolClient) {
    this.client = client;
  }

  /** Write `statement` without waiting for its answer (see the class comment). */
  send(statement: Statement): void {
    this.#pending.push(this.#track(this.client.query(statement as pg.QueryConfig)).then(() => undefined, () => undefined));
  }

  /**
   * Write `statement` and wait for its answer. A failure of a statement sent before it comes
   * first; so does one of a read whose answer nobody took (the statements after it all failed).
   */
  async query<R extends pg.QueryResultRow = Record<string, unknown>>(statement: Statement): Promise<pg.QueryResult<R>> {
    const answer = this.#track(this.client.query<R>(statement as pg.QueryConfig));
    try {
      await this.settle();
      return await answer;
    } catch (err) {
      answer.catch(() => undefined);
      throw this.#failed?.err ?? err;
    }
  }

  /** Wait for the statements sent so far without their answers; throws the first statement that failed. */
  async settle(): Promise<void> {
    if (this.#pending.length > 0) {
      const pending = this.#pending;
      this.#pending = [];
      await Promise.all(pending);
    }
    if (this.#failed) throw this.#failed.err;
  }

  /** Keep the first failure (answers come in the order the statements were sent). */
  #track<T>(sent: Promise<T>): Promise<T> {
    sent.catch((err: unknown) => {
      this.#failed ??= { err };
    });
    return sent;
  }

  /**
   * Whether an error thrown by `settle` (or `query`) means the transaction cannot have committed
   * whatever was sent after the failed statement: the server answered it with an error, which
   * aborts the transaction (a COMMIT behind it rolls back). A lost connection says nothing of the
   * kind: what was written may all have been run.
   */
  static abortedBy(err: unknown): boolean {
    return sqlState(err) !== undefined && !isConnectionError(err);
  }
}
