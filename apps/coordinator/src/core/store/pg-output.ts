import type pg from 'pg';
import { OutputBuffer } from '../output-buffer.js';
import type { Queryable } from './pg-queries.js';
import { lookupOfNul } from './pg-sql.js';
import { statementName } from './pg-tx.js';
import type { OutputInfo, OutputSlice } from './store.js';

/**
 * Job output in PostgreSQL: batches at their byte offsets in `job_output`, the newest
 * `maxBytes` per job kept, the stream's length in `jobs.output_bytes` — the same semantics as the
 * in-memory OutputBuffer (a retried batch is stored once; a batch past the end drops what came
 * before). Each append NOTIFYs, so a reader following the output on any coordinator wakes.
 */
export class PgOutput {
  /** job id -> its followers: each wakes for a stream length above its own threshold */
  readonly #waiters = new Map<string, Set<(length: number) => void>>();

  constructor(
    /** reads outside transactions (PgTransactions.reads) */
    private readonly pool: Queryable,
    private readonly maxBytes: number,
    private readonly channel: string,
    private readonly run: <T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>,
  ) {}

  /**
   * Append a batch; returns the number of new bytes stored, or null (nothing stored) when
   * `holder` no longer holds the job, or is gone or stale (Store.appendOutput).
   */
  async append(jobId: string, offset: number, data: string, holder?: string): Promise<number | null> {
    // a lookup of an id holding the NUL character finds nothing, as in a transaction (pg-tx.ts):
    // PostgreSQL would refuse the statement, and the batch be answered 500, not refused
    const q = async (client: pg.PoolClient, text: string, values: unknown[]): Promise<Pick<pg.QueryResult, 'rows'>> =>
      lookupOfNul(text, values) ? { rows: [] } : client.query({ name: statementName(text), text, values });
    const stored = await this.run(async (client) => {
      // the job's row serialises appends to its output (a launcher may retry through another
      // coordinator), and holds off whatever would move the job until the batch is stored
      const { rows } = await q(client, 'SELECT output_bytes, launcher_id FROM jobs WHERE id = $1 FOR UPDATE', [jobId]);
      if (holder !== undefined) {
        if (rows[0]?.launcher_id !== holder) return null;
        // read once the job is locked, not in the same statement (whose snapshot predates the
        // lock): a launcher declared stale or removed releases its jobs under their locks, so a
        // launcher seen live here cannot have let this job go before the batch is stored
        const live = await q(client, "SELECT 1 FROM launchers WHERE id = $1 AND status <> 'stale'", [holder]);
        if (live.rows.length === 0) return null;
      }
      if (rows.length === 0) return { stored: 0, total: 0 };
      let total = Number(rows[0]!.output_bytes);
      const before = total;
      let bytes = Buffer.from(data, 'utf8');
      if (offset > total) {
        // a gap: bytes the coordinators never got; what came before leaves the retained window
        await q(client, 'DELETE FROM job_output WHERE job_id = $1', [jobId]);
        total = offset;
      }
      if (offset < total) bytes = bytes.subarray(Math.min(bytes.length, total - offset));
      if (bytes.length > 0) {
        await q(client, 'INSERT INTO job_output (job_id, byte_offset, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
          jobId,
          total,
          bytes,
        ]);
        total += bytes.length;
        await q(client, 'DELETE FROM job_output WHERE job_id = $1 AND byte_offset + length(data) <= $2', [jobId, total - this.maxBytes]);
      }
      if (total !== before) {
        await q(client, 'UPDATE jobs SET output_bytes = $2 WHERE id = $1', [jobId, total]);
        await q(client, 'SELECT pg_notify($1, $2)', [this.channel, `${total} ${jobId}`]);
      }
      return { stored: bytes.length, total };
    });
    if (stored === null) return null;
    if (stored.stored > 0) this.appended(jobId, stored.total);
    return stored.stored;
  }

  async read(jobId: string, from: number | null, limit: number): Promise<OutputSlice & OutputInfo> {
    const text = `SELECT o.byte_offset, o.data, j.output_bytes FROM jobs j LEFT JOIN job_output o ON o.job_id = j.id
                  WHERE j.id = $1 ORDER BY o.byte_offset`;
    const { rows } = await this.pool.query<{ byte_offset: number | null; data: Buffer | null; output_bytes: number }>({
      name: statementName(text),
      text,
      values: [jobId],
    });
    const buf = new OutputBuffer(this.maxBytes);
    for (const r of rows) if (r.data !== null && r.byte_offset !== null) buf.append(r.byte_offset, r.data);
    // output that ended in a gap (nothing stored after it) still counts in the stream's length
    const length = rows[0]?.output_bytes ?? 0;
    if (buf.totalBytes < length && buf.retainedBytes === 0) buf.append(length, Buffer.alloc(0));
    const slice = from === null ? buf.tail(limit) : buf.read(from, limit);
    return { ...slice, totalBytes: buf.totalBytes, retainedBytes: buf.retainedBytes, truncated: buf.truncated };
  }

  /**
   * Resolves when output arrives for the job on any coordinator (or `signal` aborts): with
   * `after` (the stream length the caller has seen), only when the stream grows past it, and at
   * once if it already has. Notifications of other coordinators arrive late and in any number,
   * so a length is what tells new output from old news.
   */
  when(jobId: string, signal: AbortSignal, after?: number): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      let set = this.#waiters.get(jobId);
      if (!set) this.#waiters.set(jobId, (set = new Set()));
      const waiters = set;
      const done = () => {
        signal.removeEventListener('abort', done);
        waiters.delete(wake);
        if (waiters.size === 0 && this.#waiters.get(jobId) === waiters) this.#waiters.delete(jobId);
        resolve();
      };
      const wake = (length: number) => {
        if (after === undefined || length > after) done();
      };
      waiters.add(wake);
      signal.addEventListener('abort', done, { once: true });
      if (after !== undefined) {
        // output that came between the caller's read and this registration
        const text = 'SELECT output_bytes FROM jobs WHERE id = $1';
        this.pool.query<{ output_bytes: number }>({ name: statementName(text), text, values: [jobId] }).then(
          ({ rows }) => wake(rows[0]?.output_bytes ?? 0),
          () => done(),
        );
      }
    });
  }

  /**
   * Wake the followers whose job's output grew while this coordinator could not hear of it (its
   * LISTEN connection was down: the NOTIFYs of that time are lost), from the lengths stored now.
   */
  async recheck(): Promise<void> {
    const ids = [...this.#waiters.keys()];
    if (ids.length === 0) return;
    const text = 'SELECT id, output_bytes FROM jobs WHERE id = ANY($1)';
    const { rows } = await this.pool.query<{ id: string; output_bytes: number }>({ name: statementName(text), text, values: [ids] });
    for (const r of rows) this.appended(r.id, Number(r.output_bytes));
  }

  /** A NOTIFY of the output channel: `<stream length> <job id>`. */
  notified(payload: string): void {
    const space = payload.indexOf(' ');
    if (space > 0) this.appended(payload.slice(space + 1), Number(payload.slice(0, space)));
  }

  /** Job `jobId`'s output stream is now `length` bytes long (an append here or elsewhere). */
  appended(jobId: string, length: number): void {
    const set = this.#waiters.get(jobId);
    if (set) for (const wake of [...set]) wake(length);
  }
}
