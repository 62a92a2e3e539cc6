import type { JobRow, SessionRow } from './rows.js';
import type { SessionExtras } from './wire.js';

/*
 * How much large text one answer carries (MAX_ANSWER_BYTES): a list page or a `POST /jobs/wait`
 * answer takes rows until their prompts, results and errors pass the budget. Without it, a page
 * of 1,000 jobs with 1 MiB prompts was a 1 GiB answer, built in one turn of the event loop. The
 * first row always fits: no job or session is too big to be read.
 *
 * Sizes are string lengths (UTF-16 code units), not encoded bytes: cheap to count, and what
 * matters here is the order of magnitude.
 */

/**
 * How many of `rows`, from the first, fit in `budget` and in `max` rows (at least one when there
 * is one). `size` is asked only of the rows it counts, with their index.
 */
export function fitting<T>(rows: readonly T[], budget: number, size: (row: T, i: number) => number, max = rows.length): number {
  const n = Math.min(max, rows.length);
  let used = 0;
  for (let i = 0; i < n; i++) {
    used += size(rows[i]!, i);
    if (used > budget && i > 0) return i;
  }
  return n;
}

export const jobTextSize = (j: JobRow): number => j.prompt.length + (j.result?.length ?? 0) + (j.error?.length ?? 0);

/** A session's text: its last result and error, and its list of job ids. */
export const sessionTextSize = (s: SessionRow, x: SessionExtras): number =>
  (s.lastResult?.length ?? 0) + (s.lastError?.length ?? 0) + x.jobIds.length * 24;
