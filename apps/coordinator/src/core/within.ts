/*
 * Waits with a bound: for a store that may not answer (a database host that froze), a shutdown
 * that must not wait for it, a check that must fail rather than hang.
 */

/** `work`, or a rejection with `message` once `ms` have passed (the work goes on, its answer unused). */
export function within<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  work.catch(() => undefined); // answered after the time: nobody waits for it any more
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** Resolves once `promise` settles (either way), or after `ms`, whichever comes first. */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<void> {
  let late: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => (late = setTimeout(resolve, ms)));
  try {
    await Promise.race([promise.then(() => undefined, () => undefined), timeout]);
  } finally {
    clearTimeout(late);
  }
}
