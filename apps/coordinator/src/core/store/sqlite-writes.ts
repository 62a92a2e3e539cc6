import type { Statement } from 'better-sqlite3';
import type { JobRow } from '../rows.js';
import type { ChangeSet, RowChange } from './changes.js';
import { DELETE_PROMPT, PUT_PROMPT } from './sqlite-prompts.js';
import { column, encode, HOST_BINDINGS, IDEMPOTENCY, JOBS, LAUNCHERS, SESSIONS, type Table } from './sql-rows.js';

/** `?, ?, ...`: n parameters */
export const placeholders = (n: number) => Array.from({ length: n }, () => '?').join(', ');

/**
 * How a change set becomes SQLite statements: per row and per changed column; a row found by its
 * rowid where the table has one. The statements are prepared once each (`stmt` caches them).
 */
export class SqliteWriter {
  readonly #stmt: (sql: string) => Statement;

  constructor(stmt: (sql: string) => Statement) {
    this.#stmt = stmt;
  }

  /** A change set's statements (in the caller's SQLite transaction); `eventIdCeiling`: a new end of reserved event ids. */
  writeChanges(changes: ChangeSet, eventIdCeiling: number | undefined): void {
    let deletedSession = 0;
    let deletedJob = 0;
    for (const c of changes.sessions.values()) {
      this.#write(SESSIONS, c);
      if (c.kind === 'delete') deletedSession = Math.max(deletedSession, c.before.seq);
    }
    for (const c of changes.jobs.values()) {
      this.#writeJob(c);
      if (c.kind === 'delete') {
        this.#stmt('DELETE FROM job_output WHERE job_id = ?').run(c.before.id);
        deletedJob = Math.max(deletedJob, c.before.seq);
      }
    }
    // retention may delete the newest rows: the numbers they had are remembered, never given again
    if (deletedJob > 0) this.#seqFloor('job_seq_floor', deletedJob);
    if (deletedSession > 0) this.#seqFloor('session_seq_floor', deletedSession);
    for (const c of changes.launchers.values()) this.#write(LAUNCHERS, c);
    for (const row of changes.idempotency) this.#insert(IDEMPOTENCY, row, 'INSERT OR REPLACE');
    for (const row of changes.hostBindings) this.#insert(HOST_BINDINGS, row, 'INSERT OR REPLACE');
    if (eventIdCeiling !== undefined) {
      this.#stmt("INSERT INTO meta (key, value) VALUES ('last_event_id', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(
        String(eventIdCeiling),
      );
    }
  }

  #seqFloor(key: string, seq: number): void {
    this.#stmt(
      'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = max(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))',
    ).run(key, String(seq));
  }

  /**
   * The statements of the writes, by table and changed columns: a job's few kinds of updates
   * (claim, start, end, ...) each get one, built and prepared once instead of per write.
   */
  readonly #writes = new Map<string, Statement>();

  #write<T>(table: Table<T>, c: RowChange<T>): void {
    if (c.kind === 'insert') return this.#insert(table, c.after, 'INSERT');
    // by the rowid where the table has one (jobs, sessions: seq), which skips a search of the key's index
    const key = table.rowid ?? table.key;
    if (c.kind === 'delete') {
      this.#stmt(`DELETE FROM ${table.name} WHERE ${column(key)} = ?`).run(c.before[key] as unknown);
      return;
    }
    const fields = Object.keys(c.patch).filter((f) => f !== table.key && f !== key).sort();
    if (fields.length === 0) return;
    const id = `${table.name} ${fields.join(' ')}`;
    let stmt = this.#writes.get(id);
    if (!stmt) {
      const sql = `UPDATE ${table.name} SET ${fields.map((f) => `${column(f)} = ?`).join(', ')} WHERE ${column(key)} = ?`;
      this.#writes.set(id, (stmt = this.#stmt(sql)));
    }
    const patch = c.patch as Record<string, unknown>;
    stmt.run(...fields.map((f) => encode(table, f, patch[f])), c.before[key] as unknown);
  }

  /** A job's change: its prompt to job_prompts (written once: sqlite-prompts.ts), the rest to its row. */
  #writeJob(c: RowChange<JobRow>): void {
    if (c.kind === 'insert') {
      this.#stmt(PUT_PROMPT).run(c.after.id, c.after.prompt);
      return this.#insert(JOBS, { ...c.after, prompt: '' }, 'INSERT');
    }
    if (c.kind === 'delete') this.#stmt(DELETE_PROMPT).run(c.before.id);
    if (c.kind === 'update' && c.patch.prompt !== undefined) {
      this.#stmt(PUT_PROMPT).run(c.after.id, c.after.prompt);
      const { prompt: _kept, ...patch } = c.patch;
      return this.#write(JOBS, { ...c, patch });
    }
    this.#write(JOBS, c);
  }

  #insert<T>(table: Table<T>, row: T, verb: 'INSERT' | 'INSERT OR REPLACE'): void {
    const id = `${verb} ${table.name}`;
    let stmt = this.#writes.get(id);
    if (!stmt) {
      const cols = table.fields.map(([f]) => column(f));
      this.#writes.set(id, (stmt = this.#stmt(`${verb} INTO ${table.name} (${cols.join(', ')}) VALUES (${placeholders(cols.length)})`)));
    }
    const r = row as Record<string, unknown>;
    stmt.run(...table.fields.map(([f]) => encode(table, f, r[f])));
  }
}
