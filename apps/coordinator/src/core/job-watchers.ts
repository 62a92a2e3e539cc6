/**
 * Waits on jobs reaching a terminal status (`GET /jobs/{id}/wait`, `POST /jobs/wait`, output
 * follow): each waiter is woken by the status change itself, by its timeout, by its signal, or
 * when the server closes. No polling.
 */
export class JobWatchers {
  readonly #byJob = new Map<string, Set<() => void>>();
  #closed = false;

  /** Resolve when `met()` holds after one of `jobIds` ended, or on timeout, abort or close. */
  until(jobIds: readonly string[], met: () => boolean, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (met() || this.#closed || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        for (const id of jobIds) {
          const set = this.#byJob.get(id);
          set?.delete(check);
          if (set?.size === 0) this.#byJob.delete(id);
        }
        resolve();
      };
      const check = () => {
        if (met() || this.#closed) done();
      };
      const timer = setTimeout(done, timeoutMs);
      signal?.addEventListener('abort', done, { once: true });
      for (const id of jobIds) {
        let set = this.#byJob.get(id);
        if (!set) this.#byJob.set(id, (set = new Set()));
        set.add(check);
      }
    });
  }

  /** The job reached a terminal status. */
  ended(jobId: string): void {
    const set = this.#byJob.get(jobId);
    if (set) for (const check of [...set]) check();
  }

  /** Answer every waiter (the server is closing); `reopen` undoes it. */
  close(): void {
    this.#closed = true;
    for (const set of [...this.#byJob.values()]) for (const check of [...set]) check();
  }

  reopen(): void {
    this.#closed = false;
  }
}
