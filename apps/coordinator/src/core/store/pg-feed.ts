import type { LifecycleEvent } from '@agentq/protocol';
import type { Logger } from 'pino';
import type { Commit } from './store.js';

/** A commit log row (postgres-store.ts writes them, one per commit that others react to). */
export interface LogRow {
  id: number;
  first_event_id: number;
  events: string;
  hints: string;
}

type Hints = Omit<Commit, 'events'>;
/** A lifecycle event before the log numbered it (each kind of event without its `id`). */
export type EventDraft = LifecycleEvent extends infer E ? (E extends unknown ? Omit<E, 'id'> : never) : never;

export function hasHints(h: Hints): boolean {
  return h.readyKeys.size > 0 || h.launchersToWake.size > 0 || h.ended.size > 0 || h.launchersChanged;
}

export function encodeHints(h: Hints): string {
  // `c`: how many jobs of each key in `r`; `n`, their sum, is what coordinators before it read
  const counts = [...h.readyKeys.values()];
  return JSON.stringify({ r: [...h.readyKeys.keys()], c: counts, n: counts.reduce((a, b) => a + b, 0), w: [...h.launchersToWake], e: [...h.ended], l: h.launchersChanged });
}

/**
 * Job prompts longer than this are not copied into the commit log. Every event of a job carries
 * the whole job: a 1 MiB prompt would be written to the log (and read back by every other
 * coordinator) once for each event of its job, and a commit that claims eight such jobs would be
 * an 8 MiB statement. The logged event is marked instead, and a reader takes the prompt from the
 * jobs table, where it never changes (decodeEvents).
 */
export const LOGGED_PROMPT_CHARS = 4096;

/** An event draft as the commit log holds it. */
type LoggedDraft = EventDraft & { prompt_in_jobs?: true };

/** The events column of a commit log entry. */
export function encodeEvents(drafts: readonly EventDraft[]): string {
  return JSON.stringify(
    drafts.map((d): LoggedDraft => {
      if (!('job' in d) || (d.job.prompt?.length ?? 0) <= LOGGED_PROMPT_CHARS) return d;
      const { prompt: _prompt, ...job } = d.job;
      return { ...d, job, prompt_in_jobs: true };
    }),
  );
}

/** Reads job prompts by job id (those of jobs that are gone are missing). */
export type PromptReader = (jobIds: string[]) => Promise<Map<string, string>>;

/**
 * The events columns of commit log entries, decoded, each with the prompts the log left out
 * (one read for all of them). A job deleted since (history retention) has none: its events say
 * `prompt_omitted`, as a stream that did not ask for prompts gets them.
 */
export async function decodeEvents(columns: readonly string[], prompts: PromptReader): Promise<EventDraft[][]> {
  const out = columns.map((c) => JSON.parse(c) as LoggedDraft[]);
  const wanted = new Set<string>();
  for (const drafts of out) for (const d of drafts) if (d.prompt_in_jobs && 'job' in d) wanted.add(d.job.job_id);
  if (wanted.size === 0) return out;
  const found = await prompts([...wanted]);
  for (const drafts of out) {
    for (const d of drafts) {
      if (!d.prompt_in_jobs || !('job' in d)) continue;
      delete d.prompt_in_jobs;
      const prompt = found.get(d.job.job_id);
      if (prompt === undefined) d.job.prompt_omitted = true;
      else d.job.prompt = prompt;
    }
  }
  return out;
}

/** A commit as the log holds it: events numbered from `first_event_id`, and the hints. */
export function decodeCommit(row: LogRow, drafts: readonly EventDraft[]): Commit {
  const h = JSON.parse(row.hints) as { r: string[]; c?: number[]; n: number; w: string[]; e: string[]; l: boolean };
  return {
    events: drafts.map((d, i) => ({ ...d, id: row.first_event_id + i }) as LifecycleEvent),
    // an entry of an older coordinator has the sum only: any key may hold all of them
    readyKeys: new Map(h.r.map((key, i) => [key, h.c?.[i] ?? h.n])),
    launchersToWake: new Set(h.w),
    ended: new Set(h.e),
    launchersChanged: h.l,
  };
}

/**
 * Hands every commit of the log to the store's listeners exactly once and in commit order,
 * whichever coordinator made it: this one's own commits (handed over by the store as it
 * commits them, so delivered without reading the log back when they are next) and the others'
 * (announced by NOTIFY, read from the log).
 * Commit ids have no gaps (they are handed out by a row update that a rollback undoes), so the
 * next one to deliver is always `delivered + 1`; a hole can only be rows the sweeper already
 * deleted (a coordinator that was cut off for long), which is logged and skipped.
 */
export class CommitFeed {
  #delivered = 0;
  /** the highest commit id announced (NOTIFY, own commits); reading stops there */
  #known = 0;
  /** announcements (NOTIFY, reconnections, own commits) so far: one during a read is read for */
  #announcements = 0;
  /** own commits not delivered yet */
  readonly #own = new Map<number, Commit>();
  readonly #waiting: { id: number; resolve: () => void }[] = [];
  #running = false;
  #again = false;
  #closed = false;
  #retry: NodeJS.Timeout | undefined;
  #failures = 0;

  constructor(
    private readonly read: (afterId: number, limit: number) => Promise<LogRow[]>,
    private readonly prompts: PromptReader,
    private readonly deliver: (commit: Commit) => void,
    private readonly log: Logger,
  ) {}

  get delivered(): number {
    return this.#delivered;
  }

  /** Start after commit `id` (what was committed before this coordinator opened the store). */
  start(id: number): void {
    this.#delivered = Math.max(this.#delivered, id);
    this.#known = Math.max(this.#known, id);
  }

  /**
   * This coordinator committed entry `id`: resolves once it (and every earlier one) reached the
   * listeners. (Its NOTIFY may come first, and the entry be read from the log: delivered once.)
   */
  committed(id: number, commit: Commit): Promise<void> {
    if (this.#closed || id <= this.#delivered) return Promise.resolve();
    this.#own.set(id, commit);
    this.#known = Math.max(this.#known, id);
    this.#announcements++;
    const done = new Promise<void>((resolve) => {
      if (this.#closed || this.#delivered >= id) resolve();
      else this.#waiting.push({ id, resolve });
    });
    this.#pump();
    return done;
  }

  /** A NOTIFY (or a reconnection, with no id): there may be new entries in the log. */
  announce(id = Number.MAX_SAFE_INTEGER): void {
    if (id <= this.#delivered || this.#own.has(id)) return;
    this.#known = Math.max(this.#known, id);
    this.#announcements++;
    this.#pump();
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#retry);
    for (const w of this.#waiting.splice(0)) w.resolve();
  }

  #hand(id: number, commit: Commit): void {
    this.#delivered = id;
    this.#own.delete(id);
    try {
      this.deliver(commit);
    } catch (err) {
      this.log.error({ err, commit_id: id }, 'a commit listener failed');
    }
    if (this.#waiting.length > 0) {
      for (let i = this.#waiting.length - 1; i >= 0; i--) {
        const w = this.#waiting[i]!;
        if (w.id <= id) {
          this.#waiting.splice(i, 1);
          w.resolve();
        }
      }
    }
  }

  /** Own commits that are next, without reading the log. */
  #handOwn(): void {
    for (let c = this.#own.get(this.#delivered + 1); c; c = this.#own.get(this.#delivered + 1)) this.#hand(this.#delivered + 1, c);
  }

  #pump(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = true;
    this.#run().then(
      () => {
        this.#running = false;
        this.#failures = 0;
        if (this.#again) this.#pump();
      },
      (err: unknown) => {
        this.#running = false;
        if (this.#closed) return;
        // the database is away: try again (listeners and own commits wait, in order)
        const ms = Math.min(5000, 50 * 2 ** Math.min(this.#failures++, 7));
        this.log.warn({ err, retry_ms: ms }, 'reading the commit log failed');
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => this.#pump(), ms);
      },
    );
  }

  async #run(): Promise<void> {
    for (;;) {
      this.#again = false;
      this.#handOwn();
      if (this.#known <= this.#delivered) {
        if (this.#again) continue;
        return;
      }
      const announced = this.#announcements;
      const rows = await this.read(this.#delivered, 500);
      if (this.#closed) return;
      if (rows.length === 0) {
        // announced (a reconnection announces everything) but nothing new, as the read saw the
        // log: unless more was announced while it was under way. A NOTIFY comes once its entry is
        // committed, which may be after the read took its snapshot: that entry (and an own commit
        // after it, whose transaction waits for it) is read again, not forgotten
        if (this.#announcements === announced) this.#known = this.#delivered;
        continue;
      }
      const decoded = await decodeEvents(
        rows.map((r) => r.events),
        this.prompts,
      );
      if (this.#closed) return;
      rows.forEach((row, i) => this.#take(row, decoded[i]!));
      this.#known = Math.max(this.#known, rows[rows.length - 1]!.id);
    }
  }

  /** Deliver `row` (this coordinator's own version if it has it), and what must come before it. */
  #take(row: LogRow, drafts: readonly EventDraft[]): void {
    while (this.#delivered < row.id) {
      const next = this.#delivered + 1;
      const own = this.#own.get(next);
      if (own) {
        this.#hand(next, own);
        continue;
      }
      if (next === row.id) {
        this.#hand(next, decodeCommit(row, drafts));
        continue;
      }
      this.log.warn({ from_commit: next, to_commit: row.id - 1 }, 'commit log entries were deleted before this coordinator read them; events skipped');
      this.#delivered = row.id - 1;
    }
  }
}
