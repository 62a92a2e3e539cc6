export interface BackoffOptions {
  /** delay before the first retry */
  baseMs?: number;
  /** no delay is longer than this */
  maxMs?: number;
  /** source of randomness in [0, 1), injectable for tests */
  random?: () => number;
}

/**
 * Capped exponential backoff with "full jitter": attempt n (0-based) waits a random time in
 * [d/2, d] where d = min(maxMs, baseMs * 2^n). Half the delay is kept so retries never stampede
 * at 0 ms, the other half spreads clients that failed together.
 */
export function backoffDelay(attempt: number, options: BackoffOptions = {}): number {
  const base = options.baseMs ?? 200;
  const max = options.maxMs ?? 30_000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/**
 * Resolve after `ms`, or reject with the signal's reason as soon as it aborts. Hand-written
 * rather than `timers/promises` `setTimeout`: that one rejects with a generic AbortError, and the
 * callers need the signal's own reason (a shutdown, a caller's timeout) to say why they stopped.
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
