/**
 * How long a view waits for a read whose answer it buffers events for (a page of jobs, of
 * launchers) before it gives the read up and reads again: a read that never answers would
 * otherwise buffer every event for as long as the view is open.
 */
export const READ_TIMEOUT_MS = 30_000;

/** A read that did not come in time (see withTimeout). */
export class ReadTimeout extends Error {
  override readonly name = 'ReadTimeout';
}

/**
 * `call` with a signal that also aborts after `ms` (a timer, which the tests' clock moves);
 * ReadTimeout when that is why it failed. Without `ms`, just `call(signal)`.
 */
export async function withTimeout<T>(
  ms: number | undefined,
  signal: AbortSignal | undefined,
  what: string,
  call: (signal?: AbortSignal) => Promise<T>,
): Promise<T> {
  if (ms === undefined) return call(signal);
  // a signal aborted already fires no 'abort' event: `call` would run as if it had none
  signal?.throwIfAborted();
  const ac = new AbortController();
  const stop = () => ac.abort();
  signal?.addEventListener('abort', stop, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    ac.abort();
  }, ms);
  try {
    return await call(ac.signal);
  } catch (err) {
    if (timedOut && !signal?.aborted) throw new ReadTimeout(`${what} did not answer in ${ms} ms`, { cause: err });
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stop);
  }
}
