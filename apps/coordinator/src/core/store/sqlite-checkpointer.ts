import { EventEmitter } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { Database as Db } from 'better-sqlite3';
import type { Logger } from 'pino';

/*
 * WAL checkpoints off the thread that answers requests.
 *
 * In WAL mode every commit appends pages to the WAL; a checkpoint copies them back into the
 * database file and syncs both, so the WAL can start over. SQLite runs it inside the commit that
 * crosses `wal_autocheckpoint`, on the committing thread: with tens of megabytes in the WAL (large
 * prompts and results) that held the coordinator's only event loop for 80–200 ms every few
 * seconds, and every request waited (docs/benchmarks.md, soak). So automatic checkpoints are off
 * (`wal_autocheckpoint = 0`) and a worker thread with a connection of its own runs PASSIVE
 * checkpoints instead (sqlite-checkpoint-worker.ts): they never block a writer.
 *
 * What a PASSIVE checkpoint cannot do under a steady stream of writes is let the WAL start over:
 * SQLite restarts it at a write that finds every frame already copied, and while writes keep
 * coming during every pass, none does. So once the WAL has grown past `restartFrames`, the next
 * pass is a quiet one: the store holds its writes back (`quiet`: transactions wait for the store's
 * lock, the event loop goes on serving everything else) while the thread copies what is left, and
 * the first write after it starts the WAL over. No checkpoint, and no fsync, ever runs on the
 * event loop.
 */

export interface CheckpointPacing {
  /** bytes written (estimated) past which a pass is asked for at once */
  nudgeBytes: number;
  /** with less written, one is asked for this long after the first write since the last one */
  nudgeDelayMs: number;
  /** WAL frames (pages) past which the next pass is a quiet one, so that the WAL starts over */
  restartFrames: number;
}

/** 8 MiB, a quarter of a second, 16 MiB of WAL. */
export const DEFAULT_PACING: CheckpointPacing = { nudgeBytes: 8 * 1024 * 1024, nudgeDelayMs: 250, restartFrames: 4096 };
/** `wal_autocheckpoint` if the thread is lost (SQLite's default is 1,000 pages) */
export const FALLBACK_AUTOCHECKPOINT = 10_000;

export type CheckpointRequest = 'checkpoint' | 'close';

export type CheckpointResult =
  | { ok: true; frames: number; checkpointed: number; ms: number }
  | { ok: false; error: string; code: string | null; ms: number };

export interface CheckpointStats {
  /** PASSIVE checkpoints the thread completed / that failed */
  checkpoints: number;
  failures: number;
  /** quiet passes (writes held back so the WAL could start over) */
  quiet: number;
  /** seconds the thread spent checkpointing */
  seconds: number;
}

export interface CheckpointHost {
  db(): Db;
  log: Logger;
  /** run `fn` while no write transaction runs or begins (the store's writes wait, asynchronously) */
  quiet(fn: () => Promise<void>): Promise<void>;
}

export class Checkpointer {
  /** none when the store's connection holds the file exclusively (no thread can read it then) */
  readonly #worker: Worker | undefined;
  readonly #host: CheckpointHost;
  /** estimated bytes written since the last pass began */
  #dirty = 0;
  /** the pass in progress; one at a time */
  #running: Promise<CheckpointResult> | undefined;
  /** its answer, when the thread sends it (the thread answers requests in order, one at a time) */
  #resolve: ((r: CheckpointResult) => void) | undefined;
  #closed = false;
  /** a quiet pass was asked for (it may still wait for the store) */
  #quieting = false;
  /** the quiet pass holds the store: no other pass starts */
  #quietHeld = false;
  #timer: NodeJS.Timeout | undefined;
  #failing = false;
  readonly stats: CheckpointStats = { checkpoints: 0, failures: 0, quiet: 0, seconds: 0 };
  /** Internal signals for tests (not on the wire): each pass that ended, and whether it was a quiet one. */
  readonly signals = new EventEmitter<{ pass: [CheckpointResult, boolean] }>();

  readonly #pacing: CheckpointPacing;

  /** `path` null: no thread; SQLite checkpoints in commits (the store set `wal_autocheckpoint`) */
  constructor(path: string | null, host: CheckpointHost, pacing: CheckpointPacing = DEFAULT_PACING) {
    this.#host = host;
    this.#pacing = pacing;
    if (path === null) {
      this.#worker = undefined;
      this.#closed = true;
      return;
    }
    this.#worker = new Worker(new URL('./sqlite-checkpoint-worker.js', import.meta.url), { workerData: { path } });
    this.#worker.on('message', (r: CheckpointResult) => {
      const resolve = this.#resolve;
      this.#running = this.#resolve = undefined;
      resolve?.(r);
    });
    this.#worker.on('error', (err) => host.log.error({ err }, 'the SQLite checkpointer thread failed'));
    this.#worker.on('exit', () => this.#lost());
    // it must not keep a process alive; whoever waits for it refs it (#pass, close)
    this.#worker.unref();
  }

  /** A commit wrote about `bytes` to the WAL. */
  wrote(bytes: number): void {
    this.#dirty += bytes;
    this.#schedule();
  }

  /** One pass now, after the one running (tests). */
  async checkpoint(): Promise<CheckpointResult | undefined> {
    while (this.#running) await this.#running;
    return this.#closed ? undefined : this.#pass();
  }

  async close(): Promise<void> {
    const worker = this.#worker;
    if (this.#closed || !worker) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    worker.ref();
    if (this.#running) await this.#running;
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    worker.postMessage('close' satisfies CheckpointRequest);
    await exited;
  }

  /** Start a pass for what was written, and a quiet one after it when the WAL has grown. */
  #next(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#running || this.#closed || this.#quietHeld || this.#dirty === 0) return;
    void this.#pass().then((r) => {
      if (this.#closed) return;
      if (r.ok && r.frames >= this.#pacing.restartFrames && !this.#quieting) {
        this.#quieting = true;
        void this.#host
          .quiet(async () => {
            // normal passes go on while it waits for the store; once it holds it, none starts
            this.#quietHeld = true;
            while (this.#running) await this.#running;
            if (this.#closed) return;
            this.stats.quiet++;
            await this.#pass(true);
          })
          .catch((err: unknown) => this.#host.log.error({ err }, 'a quiet WAL checkpoint failed'))
          .finally(() => {
            this.#quieting = this.#quietHeld = false;
            this.#schedule();
          });
        return;
      }
      this.#schedule();
    });
  }

  /**
   * A pass for what was written: now, or after the delay. Not while one runs (what follows it is
   * scheduled after it), nor while a quiet pass holds the store (it copies this too).
   */
  #schedule(): void {
    if (this.#closed || this.#running || this.#quietHeld || this.#dirty === 0) return;
    if (this.#dirty >= this.#pacing.nudgeBytes) this.#next();
    else this.#timer ??= setTimeout(() => this.#next(), this.#pacing.nudgeDelayMs).unref();
  }

  /** One pass; only when none is running (each answer goes to the pass that asked for it). */
  #pass(quiet = false): Promise<CheckpointResult> {
    if (this.#running) throw new Error('a WAL checkpoint is already running');
    const worker = this.#worker;
    if (!worker) throw new Error('no checkpointer thread');
    this.#dirty = 0;
    worker.ref();
    const running = new Promise<CheckpointResult>((resolve) => (this.#resolve = resolve)).then((r) => {
      if (!this.#closed) worker.unref();
      this.#account(r);
      this.signals.emit('pass', r, quiet);
      return r;
    });
    this.#running = running;
    worker.postMessage('checkpoint' satisfies CheckpointRequest);
    return running;
  }

  #account(r: CheckpointResult): void {
    this.stats.seconds += r.ms / 1000;
    if (r.ok) {
      this.stats.checkpoints++;
      if (this.#failing) this.#host.log.warn('WAL checkpoints work again');
      this.#failing = false;
    } else {
      this.stats.failures++;
      if (!this.#failing) this.#host.log.error({ error: r.error, sqlite_code: r.code }, 'WAL checkpoint failed: the WAL grows until one works');
      this.#failing = true;
    }
  }

  /** The thread is gone before close (it could not open the file, or it crashed): SQLite checkpoints on the store's connection again. */
  #lost(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearTimeout(this.#timer);
    const resolve = this.#resolve;
    this.#running = this.#resolve = undefined;
    resolve?.({ ok: false, error: 'the checkpointer thread exited', code: null, ms: 0 });
    const db = this.#host.db();
    if (db.open) db.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT}`);
    this.#host.log.error('the SQLite checkpointer thread exited: checkpoints run on the main thread again');
  }
}
