import { EventEmitter } from 'node:events';

/**
 * Waits on jobs reaching a terminal status (`GET /jobs/{id}/wait`, `POST /jobs/wait`, output
 * follow): each waiter is woken by a commit that ended one of its jobs, by its timeout, by its
 * signal, or when the server closes. No polling: the caller re-reads and decides whether to wait
 * again.
 */
export class JobWatchers {
  /** Internal signal for tests (not on the wire): `watching` once a waiter is registered on its jobs. */
  readonly signals = new EventEmitter<{ watching: [readonly string[]] }>();
  readonly #byJob = new Map<string, Set<() => void>>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  /** Resolve when one of `jobIds` ends, or on timeout, abort or close. */
  next(jobIds: readonly string[], timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || signal?.aborted || timeoutMs <= 0 || jobIds.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        for (const id of jobIds) {
          const set = this.#byJob.get(id);
          set?.delete(done);
          if (set?.size === 0) this.#byJob.delete(id);
        }
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      for (const id of jobIds) {
        let set = this.#byJob.get(id);
        if (!set) this.#byJob.set(id, (set = new Set()));
        set.add(done);
      }
      this.signals.emit('watching', jobIds);
    });
  }

  /** The jobs reached a terminal status. */
  ended(jobIds: Iterable<string>): void {
    for (const id of jobIds) {
      const set = this.#byJob.get(id);
      if (set) for (const done of [...set]) done();
    }
  }

  /** Answer every waiter (the server is closing); `reopen` undoes it. */
  close(): void {
    this.#closed = true;
    for (const set of [...this.#byJob.values()]) for (const done of [...set]) done();
  }

  reopen(): void {
    this.#closed = false;
  }
}
