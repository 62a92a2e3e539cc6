import type { JobRow, LauncherRow, SessionRow } from './rows.js';
import type { SessionExtras } from './wire.js';

/*
 * How much large text answers carry. A list page or a `POST /jobs/wait` answer takes rows until
 * their prompts, results and errors pass MAX_ANSWER_BYTES: without it, a page of 1,000 jobs with
 * 1 MiB prompts was a 1 GiB answer, built in one turn of the event loop. And all such answers in
 * flight together, from when one is built until its response has been written out or abandoned,
 * carry at most MAX_ANSWER_BYTES_IN_FLIGHT: without it, 50 readers asking at once took the
 * coordinator to 764 MB, and a few hundred (or readers that never read) past its heap.
 *
 * The first row is never cut by MAX_ANSWER_BYTES (no job or session is too big to be read), only
 * by what the other answers in flight leave of the total. Sizes are string lengths (UTF-16 code
 * units), not encoded bytes: cheap to count, and what matters here is the order of magnitude.
 */

/**
 * How many of `rows`, from the first, fit in `budget` and in `max` rows (at least one when there
 * is one), and the size of those. `size` is asked only of the rows it counts, with their index.
 */
export function fitting<T>(
  rows: readonly T[],
  budget: number,
  size: (row: T, i: number) => number,
  max = rows.length,
): { count: number; size: number } {
  const n = Math.min(max, rows.length);
  let used = 0;
  for (let i = 0; i < n; i++) {
    const next = used + size(rows[i]!, i);
    if (next > budget && i > 0) return { count: i, size: used };
    used = next;
  }
  return { count: n, size: used };
}

/** Runs `release` once the answer has been written out or abandoned (HTTP: its response's close). */
export type AnswerHold = (release: () => void) => void;

/** One answer's share of the budget: see AnswersInFlight.take. */
export interface AnswerRoom {
  take<T>(rows: readonly T[], size: (row: T, i: number) => number, max?: number): number | null;
  /** no room at all now (AnswersInFlight.noRoom; counted as a refusal when so) */
  noRoom(): boolean;
}

/** The text of the large answers in flight (MAX_ANSWER_BYTES, MAX_ANSWER_BYTES_IN_FLIGHT). */
export class AnswersInFlight {
  #held = 0;
  /** answers that got no room at all (a list's 503, a wait answer with every job omitted) */
  refused = 0;

  constructor(
    /** MAX_ANSWER_BYTES */
    readonly perAnswer: number,
    /** MAX_ANSWER_BYTES_IN_FLIGHT */
    readonly total: number,
  ) {}

  /** the text the answers in flight carry now */
  get held(): number {
    return this.#held;
  }

  /** Whether the answers in flight leave no room at all */
  get full(): boolean {
    return this.#held > 0 && this.#held >= this.total;
  }

  /** `full`, counted as a refusal when so: a list asks before it reads the store. */
  noRoom(): boolean {
    if (!this.full) return false;
    this.refused++;
    return true;
  }

  /**
   * How many of `rows` (at most `max`) one answer carries: those that fit in MAX_ANSWER_BYTES and
   * in what the other answers in flight leave of the total. Their text is held until `hold`
   * releases it. The first row is never cut by MAX_ANSWER_BYTES, only by the total; `null` when
   * it does not fit in what the others leave: the caller answers without rows, or asks the client
   * to come back (503).
   */
  take<T>(rows: readonly T[], size: (row: T, i: number) => number, hold: AnswerHold, max = rows.length): number | null {
    const left = this.total - this.#held;
    const fit = fitting(rows, Math.max(0, Math.min(this.perAnswer, left)), size, max);
    if (fit.count === 0) return 0;
    if (fit.count === 1 && fit.size > left && this.#held > 0) {
      this.refused++;
      return null;
    }
    this.#held += fit.size;
    let released = false;
    hold(() => {
      if (released) return;
      released = true;
      this.#held -= fit.size;
    });
    return fit.count;
  }

  /** The room of one answer, whose text `hold` releases. */
  room(hold: AnswerHold): AnswerRoom {
    return { take: (rows, size, max) => this.take(rows, size, hold, max), noRoom: () => this.noRoom() };
  }
}

export const jobTextSize = (j: JobRow): number => j.prompt.length + (j.result?.length ?? 0) + (j.error?.length ?? 0);

/**
 * A session's text: its last result and error, the results and errors of the child outcomes and
 * the texts of the messages it holds (`pending_callbacks`, `pending_messages`: a busy parent may
 * hold many), and its lists of job ids and children (each at most MAX_SESSION_LIST_ITEMS long).
 */
export function sessionTextSize(s: SessionRow, x: SessionExtras): number {
  let n = (s.lastResult?.length ?? 0) + (s.lastError?.length ?? 0) + x.jobIds.length * 24;
  for (const c of x.children) n += c.length + 3;
  for (const c of s.callbacks) n += (c.result?.length ?? 0) + (c.error?.length ?? 0);
  for (const m of s.messages) n += m.text.length;
  return n;
}

/**
 * A launcher's text: the strings it registered with (its labels, up to 64 project roots of up to
 * 4,096 characters: a launcher at every limit is about 270 KB) and the ids of the jobs it holds.
 */
export function launcherTextSize(l: LauncherRow, activeJobIds: readonly string[]): number {
  let n = activeJobIds.length * 24;
  for (const text of [l.hostname, l.projectDir, l.executorType, l.version, l.hostId, l.createdBy]) n += text?.length ?? 0;
  for (const [key, value] of Object.entries(l.labels)) n += key.length + value.length + 6;
  for (const root of l.roots) n += root.length + 3;
  return n;
}
