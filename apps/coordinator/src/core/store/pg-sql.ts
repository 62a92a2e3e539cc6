import pg from 'pg';
import { CoordinatorError, StoreUnreachableError } from '../errors.js';
import { column, encode, type Table } from './sql-rows.js';

/*
 * Small helpers of the PostgreSQL store: how values come back from the driver, SQL for rows
 * (through the column map in sql-rows.ts), and what an error from the database means.
 */

const INT8 = 20;
const parseInt8 = (v: string): number => Number(v);

/**
 * The driver's type parsers with bigint as a JavaScript number: every bigint column holds a
 * millisecond timestamp, a byte count or a sequence number, all far below 2^53.
 */
export const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === INT8 && format !== 'binary' ? parseInt8 : pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * A field's value as a parameter. PostgreSQL text cannot hold the NUL character (SQLite can):
 * such a value is refused with 400 naming the field, rather than failing the statement (500).
 * JSON columns are safe: JSON escapes it.
 */
function param<T>(table: Table<T>, field: string, value: unknown): unknown {
  const v = encode(table, field, value);
  if (typeof v === 'string' && v.includes('\u0000')) {
    // the request's field: a session's name is its session_name
    const name = table.name === 'sessions' && field === 'name' ? 'session_name' : column(field);
    throw new CoordinatorError('validation_failed', `${name}: contains the NUL character (\\u0000), which cannot be stored`, { field: name });
  }
  return v;
}

/** `INSERT INTO table (...) VALUES ($1, ...)` and its values for a whole row. */
export function insertSql<T>(table: Table<T>, row: T): { text: string; values: unknown[] } {
  const cols = table.fields.map(([f]) => column(f));
  const r = row as Record<string, unknown>;
  return {
    text: `INSERT INTO ${table.name} (${cols.join(', ')}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`,
    values: table.fields.map(([f]) => param(table, f, r[f])),
  };
}

/** `UPDATE table SET col = $n, ... WHERE key = $1` for the changed fields; null when none changed. */
export function updateSql<T>(table: Table<T>, key: unknown, patch: Partial<T>): { text: string; values: unknown[] } | null {
  const fields = Object.keys(patch).filter((f) => f !== table.key).sort();
  if (fields.length === 0) return null;
  const p = patch as Record<string, unknown>;
  return {
    text: `UPDATE ${table.name} SET ${fields.map((f, i) => `${column(f)} = $${i + 2}`).join(', ')} WHERE ${column(table.key)} = $1`,
    values: [key, ...fields.map((f) => param(table, f, p[f]))],
  };
}

/** SQLSTATEs after which the whole transaction is run again from the start. */
const RETRY = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);
/**
 * A unique key taken by a concurrent transaction (two starts of one session name, two creates
 * with one Idempotency-Key): run again, the second run sees the first's row and answers as a
 * sequential one would (409 session_exists, the first job).
 */
const UNIQUE_VIOLATION = '23505';

export const sqlState = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
};

export const isRetryable = (err: unknown): boolean => RETRY.has(sqlState(err) ?? '');
export const isUniqueViolation = (err: unknown): boolean => sqlState(err) === UNIQUE_VIOLATION;

/**
 * Sets `settings` for the session of `client`, those the server knows only (a server refuses a
 * setting it does not know, at connect as in SET, and some are PostgreSQL 14 or later): the
 * set_config of each one pg_settings lists, in one statement.
 */
export function setKnownSettings(client: pg.ClientBase, settings: Readonly<Record<string, number | string>>): Promise<pg.QueryResult> {
  const entries = Object.entries(settings);
  return client.query(
    `SELECT set_config(name, value, false) FROM (VALUES ${entries.map((_, i) => `($${2 * i + 1}, $${2 * i + 2})`).join(', ')}) AS s(name, value)
     WHERE name IN (SELECT name FROM pg_settings)`,
    entries.flatMap(([name, value]) => [name, String(value)]),
  );
}

/**
 * node-postgres' error for a query not answered within `query_timeout` (DATABASE_QUERY_TIMEOUT_MS):
 * the database host hangs (frozen, or the network drops packets without resetting), or a
 * statement ran that long. In pipeline mode node-postgres then destroys the connection (its
 * protocol state is half-answered); the store also releases it as broken, never to be reused.
 */
export const isQueryTimeout = (err: unknown): boolean => err instanceof Error && err.message === 'Query read timeout';

/**
 * The database could not be reached or is going away (connection errors, classes 08 and 57, a
 * query not answered in time): the request gets 503, and the connection is not used again.
 */
export function isConnectionError(err: unknown): boolean {
  const state = sqlState(err);
  if (state !== undefined) return state.startsWith('08') || state.startsWith('57') || state === '53300';
  if (isQueryTimeout(err)) return true;
  const e = err as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) return true; // ECONNREFUSED, ECONNRESET, ...
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error|not queryable|timeout exceeded when trying to connect/i.test(
    message,
  );
}

/** What a failed statement is said to be in the answer's message. */
function describe(e: Error): string {
  return isQueryTimeout(e) ? 'it did not answer within DATABASE_QUERY_TIMEOUT_MS' : e.message;
}

/**
 * A database failure as the 503 every endpoint answers when the store cannot serve. `applied:
 * false` (details.applied on the wire) when the store knows that nothing of the change was
 * committed: its COMMIT was never sent.
 */
export function unavailable(err: unknown, o: { applied?: false } = {}): CoordinatorError {
  const e = err instanceof Error ? err : new Error(String(err));
  const error = new CoordinatorError('storage_unavailable', `the database is unavailable: ${describe(e)}`, {
    sql_state: sqlState(err) ?? null,
    ...o,
  });
  (error as { cause?: unknown }).cause = e;
  return error;
}

/**
 * No connection could be had for a change (the pool's connect failed or timed out, or the store is
 * closed), or the database stopped answering one (a query timeout): the same 503 as `unavailable`,
 * marked so that a sync stops at its first such report instead of waiting out the timeout once
 * per report (sync.ts). `applied: false` unless the COMMIT was sent (`commitSent`): then the
 * change may have been made.
 */
export function unreachable(err: unknown, o: { commitSent?: boolean } = {}): StoreUnreachableError {
  const e = err instanceof Error ? err : new Error(String(err));
  const details = { sql_state: sqlState(err) ?? null, ...(o.commitSent ? {} : { applied: false }) };
  const message = o.commitSent ? `the database is unavailable: ${describe(e)} (the COMMIT was sent: the change may have been made)` : `the database is unavailable: ${describe(e)}`;
  return new StoreUnreachableError(message, details, { cause: e });
}

/**
 * Whether a lookup's parameters hold the NUL character: nothing stored can match (it is refused
 * on the way in), and PostgreSQL would reject the statement, so such a lookup finds nothing.
 */
export function lookupOfNul(text: string, values: readonly unknown[]): boolean {
  if (!/^\s*(SELECT|WITH)\b/i.test(text)) return false;
  return values.some((v) => (typeof v === 'string' ? v.includes('\u0000') : Array.isArray(v) && v.some((x) => typeof x === 'string' && x.includes('\u0000'))));
}

/**
 * `s` as an SQL string literal, for the statements sent as one simple query (no parameters):
 * what `pg.escapeLiteral` makes, with the engine's own replace instead of a loop over every
 * character (the commit log's events can be megabytes).
 */
export function sqlLiteral(s: string): string {
  const quoted = `'${s.replaceAll("'", "''")}'`;
  return s.includes('\\') ? ` E${quoted.replaceAll('\\', '\\\\')}` : quoted;
}

/**
 * A job's text (prompt, result, error) in UTF-8 bytes, for answer budgets: never less than the
 * characters `jobTextSize` counts, and octet_length reads a stored value's size without
 * decompressing it.
 */
export const JOB_TEXT_BYTES = 'octet_length(prompt) + coalesce(octet_length(result), 0) + coalesce(octet_length(error), 0)';
