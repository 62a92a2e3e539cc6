import type { AgentqClient } from '@agentq/client';
import { isTerminal, type Job, type JobStatus } from '@agentq/protocol';
import type { CliIo } from './context.js';
import { formatDuration } from './duration.js';
import { printableLine as line } from './table.js';

/** How often the elapsed-time line is redrawn. Cosmetic only: waiting itself never polls. */
const TICK_MS = 1000;
const CLEAR_LINE = '\r\x1b[K';
/**
 * Progress is decoration: it may hold the command back this long at most, to connect its event
 * stream before the job is created, and to let the stream catch up with the wait's last answer.
 */
const GRACE_MS = 2000;
/** How far along its lifecycle a status is (a requeue goes back, but never within one millisecond). */
const STAGE: { readonly [S in JobStatus]: number } = {
  pending: 0,
  claimed: 1,
  running: 2,
  stopping: 3,
  completed: 4,
  failed: 4,
  stopped: 4,
  interrupted: 4,
  timed_out: 4,
};
/** Events of jobs not tracked yet (a job being created) are kept until it is: at most this many. */
const MAX_BUFFERED = 1000;

/**
 * Progress of a wait, drawn on stderr when it is a terminal (`start --wait`, `wait`): a line
 * with the elapsed time that is redrawn in place, and one permanent line per status change.
 *
 * Status changes come from the coordinator's event stream, opened before the job is created
 * (`start --wait`) or before the first snapshot (`wait`), so every change is seen in order —
 * `claimed → running` too, which the wait itself (answered only at the end) never shows. The
 * wait's own snapshots are used only while the stream is not working. Best effort throughout:
 * progress never makes a wait fail. Nothing goes to stdout.
 */
export class Progress {
  readonly #io: CliIo;
  readonly #now: () => number;
  readonly #startedAt: number;
  readonly #status = new Map<string, JobStatus>();
  /** updated_at of the snapshot each status came from: an older one must not undo a newer one */
  readonly #seenAt = new Map<string, number>();
  /** events of jobs not tracked yet, oldest first */
  #buffered: Job[] = [];
  readonly #events = new AbortController();
  #live = false;
  #streamEnded = false;
  /** wakes `settle()` when an event arrives or the stream ends */
  #onChange: (() => void) | undefined;
  readonly ready: Promise<void>;
  #timer: NodeJS.Timeout | undefined;
  #drawn = false;
  #stopped = false;

  private constructor(io: CliIo, now: () => number, client: AgentqClient) {
    this.#io = io;
    this.#now = now;
    this.#startedAt = now();
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    void this.#follow(client, opened);
    this.ready = withGrace(open);
  }

  /** Start (connecting the event stream), or undefined when stderr is not a TTY: nothing drawn. */
  static start(io: CliIo, client: AgentqClient, now: () => number): Progress | undefined {
    if (!io.isTTY) return undefined;
    const p = new Progress(io, now, client);
    p.#timer = setInterval(() => p.#draw(), TICK_MS);
    p.#timer.unref();
    return p;
  }

  /** Follow these jobs from these snapshots on (events that came before are replayed). */
  track(jobs: readonly Job[]): void {
    if (this.#stopped) return;
    // the stream's events first, in their order; then the snapshot, which is skipped if older
    // (one millisecond may hold created and claimed: the order of the stream decides)
    const ids = new Set(jobs.map((j) => j.job_id));
    const early = this.#buffered.filter((j) => ids.has(j.job_id));
    this.#buffered = this.#buffered.filter((j) => !ids.has(j.job_id));
    for (const job of early) this.#apply(job);
    for (const job of jobs) this.#apply(job);
    this.#draw();
  }

  /** A snapshot from the wait: shown only when the event stream is not there to show it. */
  snapshot(jobs: readonly Job[]): void {
    if (this.#live || this.#stopped) return;
    for (const job of jobs) this.#apply(job);
    this.#draw();
  }

  /**
   * The wait is over with these snapshots: let the event stream deliver the changes that led
   * there (so the lines tell the whole story, in order), then show the snapshots themselves.
   */
  async settle(jobs: readonly Job[]): Promise<void> {
    if (this.#stopped) return;
    const caughtUp = () =>
      !this.#live ||
      this.#streamEnded ||
      jobs.every((j) => (this.#seenAt.get(j.job_id) ?? 0) >= Date.parse(j.updated_at));
    const deadline = Date.now() + GRACE_MS;
    while (!caughtUp() && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now());
        this.#onChange = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.#onChange = undefined;
    }
    for (const job of jobs) this.#apply(job);
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#events.abort();
    this.#clear();
  }

  /** Record a snapshot; print a line when its status changed. */
  #apply(job: Job): void {
    if (this.#stopped) return;
    const before = this.#status.get(job.job_id);
    const updatedAt = Date.parse(job.updated_at);
    const seenAt = this.#seenAt.get(job.job_id) ?? -Infinity;
    if (seenAt > updatedAt) return;
    if (before !== undefined && isTerminal(before)) return;
    // two states from the same millisecond: the one further along the lifecycle is the newer
    if (seenAt === updatedAt && before !== undefined && STAGE[job.status] < STAGE[before]) return;
    this.#seenAt.set(job.job_id, updatedAt);
    if (before === job.status) return;
    this.#status.set(job.job_id, job.status);
    this.#clear();
    // stderr is no result's text: what the coordinator sent is shown here, not sent to the terminal
    this.#io.stderr.write(`${line(job.job_id)}  ${before ? `${line(before)} → ` : ''}${line(job.status)}  (${this.#elapsed()})\n`);
    this.#draw();
  }

  #elapsed(): string {
    return formatDuration(this.#now() - this.#startedAt);
  }

  #draw(): void {
    // nothing to say before the first snapshot (never "0/0 jobs finished")
    if (this.#stopped || this.#status.size === 0) return;
    const statuses = [...this.#status.entries()];
    const summary =
      statuses.length === 1
        ? `${line(statuses[0]?.[0] ?? '')} ${line(statuses[0]?.[1] ?? '')}`
        : `${statuses.filter(([, s]) => isTerminal(s)).length}/${statuses.length} jobs finished`;
    this.#io.stderr.write(`${CLEAR_LINE}waiting: ${summary} · ${this.#elapsed()}`);
    this.#drawn = true;
  }

  #clear(): void {
    if (this.#drawn) this.#io.stderr.write(CLEAR_LINE);
    this.#drawn = false;
  }

  async #follow(client: AgentqClient, opened: () => void): Promise<void> {
    try {
      const stream = client.events({
        signal: this.#events.signal,
        onOpen: () => {
          this.#live = true;
          opened();
        },
      });
      for await (const msg of stream) {
        if (!msg.event.startsWith('job.')) continue;
        const job = (JSON.parse(msg.data) as { job?: Job }).job;
        if (!job) continue;
        if (this.#status.has(job.job_id)) this.#apply(job);
        else if (this.#buffered.push(job) > MAX_BUFFERED) this.#buffered.shift();
        this.#onChange?.();
      }
    } catch {
      // an older coordinator without /events, or the stream broke: the wait goes on regardless
    } finally {
      this.#live = false;
      this.#streamEnded = true;
      opened();
      this.#onChange?.();
    }
  }
}

/** Resolve when `p` does or after GRACE_MS, whichever comes first. */
function withGrace(p: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, GRACE_MS);
    timer.unref();
  });
  return Promise.race([p, grace]).finally(() => clearTimeout(timer));
}
