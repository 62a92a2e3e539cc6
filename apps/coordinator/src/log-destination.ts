import { write as fsWrite } from 'node:fs';

/**
 * A pino destination that never blocks the event loop. Logging to stdout synchronously (pino's
 * default) stops the whole coordinator the moment stdout stops draining: a pipe nobody reads, a
 * full disk, a file over its size limit. Here lines are queued in memory and written by one
 * asynchronous write at a time; while the queue holds `maxBufferedBytes`, further lines are
 * dropped and counted (`agentq_log_lines_dropped_total`). A write that fails (EAGAIN, ENOSPC,
 * EFBIG, EPIPE, ...) is retried after a pause, so logging resumes by itself when the
 * destination drains or space returns.
 *
 * Each `write` call is one log line (pino writes whole lines), so `dropped` counts lines.
 */
export class DroppingDestination {
  /**
   * Lines not yet handed to a write, as text: they are encoded together when the next write
   * starts (one Buffer for all of them, not one per line and then a copy of all into one).
   */
  #lines: string[] = [];
  /** what the write in flight (or the retry) writes, or what is left of it after a short write */
  #chunk: Buffer | undefined;
  #queuedBytes = 0;
  #writing = false;
  #retryMs = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  #flushWaiters: (() => void)[] = [];
  /** lines dropped because the queue was full */
  dropped = 0;
  /** write errors seen (each is retried) */
  errors = 0;

  constructor(
    private readonly fd: number,
    private readonly maxBufferedBytes: number,
  ) {}

  /** Bytes waiting to be written. */
  get bufferedBytes(): number {
    return this.#queuedBytes;
  }

  write(line: string): void {
    const bytes = Buffer.byteLength(line, 'utf8');
    if (this.#queuedBytes + bytes > this.maxBufferedBytes) {
      this.dropped++;
      return;
    }
    this.#lines.push(line);
    this.#queuedBytes += bytes;
    if (!this.#writing && this.#retryTimer === undefined) this.#writeNext();
  }

  /** Resolve when everything queued is written, or after `timeoutMs` (never blocks). */
  flush(timeoutMs: number): Promise<void> {
    if (this.#queuedBytes === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.#flushWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  #writeNext(): void {
    if (this.#chunk === undefined) {
      if (this.#lines.length === 0) {
        for (const w of this.#flushWaiters.splice(0)) w();
        return;
      }
      // one write of everything queued (bounded by the queue's own limit)
      this.#chunk = Buffer.from(this.#lines.length === 1 ? this.#lines[0]! : this.#lines.join(''), 'utf8');
      this.#lines = [];
    }
    const chunk = this.#chunk;
    this.#writing = true;
    fsWrite(this.fd, chunk, 0, chunk.length, null, (err, written) => {
      this.#writing = false;
      if (err) {
        this.errors++;
        // back off: 10 ms doubling to 1 s, while lines keep queueing (and dropping past the cap)
        this.#retryMs = Math.min(1000, Math.max(10, this.#retryMs * 2));
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = undefined;
          this.#writeNext();
        }, this.#retryMs);
        this.#retryTimer.unref();
        return;
      }
      this.#retryMs = 0;
      this.#queuedBytes -= written;
      this.#chunk = written >= chunk.length ? undefined : chunk.subarray(written);
      this.#writeNext();
    });
  }
}

let stdout: DroppingDestination | undefined;

/** The process's stdout as a non-blocking log destination (one per process: stdout is one). */
export function stdoutDestination(maxBufferedBytes: number): DroppingDestination {
  stdout ??= new DroppingDestination(1, maxBufferedBytes);
  return stdout;
}

/** Log lines dropped on stdout so far (0 when nothing logged to it). */
export function logLinesDropped(): number {
  return stdout?.dropped ?? 0;
}
