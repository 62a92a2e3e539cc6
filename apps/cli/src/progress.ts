import type { AgentqClient } from '@agentq/client';
import { isTerminal, type Job, type JobStatus } from '@agentq/protocol';
import type { CliIo } from './context.js';
import { formatDuration } from './duration.js';

/** How often the elapsed-time line is redrawn. Cosmetic only: waiting itself never polls. */
const TICK_MS = 1000;
const CLEAR_LINE = '\r\x1b[K';

/**
 * Progress of a wait, drawn on stderr when it is a terminal (`start --wait`, `wait`): a line
 * with the elapsed time that is redrawn in place, and one permanent line per status change.
 * Status changes come from the wait's own snapshots and, in between, from the coordinator's
 * event stream (best effort: progress must never make the wait fail). Nothing on stdout.
 */
export class Progress {
  readonly #io: CliIo;
  readonly #now: () => number;
  readonly #startedAt: number;
  readonly #status = new Map<string, JobStatus>();
  /** updated_at of the snapshot each status came from: an older event must not undo a newer one */
  readonly #seenAt = new Map<string, string>();
  readonly #events = new AbortController();
  #timer: NodeJS.Timeout | undefined;
  #drawn = false;
  #stopped = false;

  private constructor(io: CliIo, now: () => number, jobs: readonly Job[]) {
    this.#io = io;
    this.#now = now;
    this.#startedAt = now();
    for (const j of jobs) this.#record(j);
  }

  #record(job: Job): void {
    this.#status.set(job.job_id, job.status);
    this.#seenAt.set(job.job_id, job.updated_at);
  }

  /** Start drawing, or undefined when stderr is not a TTY (then nothing is drawn at all). */
  static start(io: CliIo, client: AgentqClient, now: () => number, jobs: readonly Job[]): Progress | undefined {
    if (!io.isTTY) return undefined;
    const p = new Progress(io, now, jobs);
    p.#timer = setInterval(() => p.#draw(), TICK_MS);
    p.#timer.unref();
    void p.#follow(client);
    p.#draw();
    return p;
  }

  /** Record snapshots; print a line for each status that changed. */
  update(jobs: readonly Job[]): void {
    if (this.#stopped) return;
    for (const job of jobs) {
      const before = this.#status.get(job.job_id);
      const seenAt = this.#seenAt.get(job.job_id);
      if (before === job.status || (before && isTerminal(before))) continue;
      if (seenAt && Date.parse(job.updated_at) < Date.parse(seenAt)) continue;
      this.#record(job);
      this.#clear();
      this.#io.stderr.write(`${job.job_id}  ${before ? `${before} → ` : ''}${job.status}  (${this.#elapsed()})\n`);
    }
    this.#draw();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    this.#events.abort();
    this.#clear();
  }

  #elapsed(): string {
    return formatDuration(this.#now() - this.#startedAt);
  }

  #draw(): void {
    if (this.#stopped) return;
    const statuses = [...this.#status.entries()];
    const summary =
      statuses.length === 1
        ? `${statuses[0]?.[0]} ${statuses[0]?.[1]}`
        : `${statuses.filter(([, s]) => isTerminal(s)).length}/${statuses.length} jobs finished`;
    this.#io.stderr.write(`${CLEAR_LINE}waiting: ${summary} · ${this.#elapsed()}`);
    this.#drawn = true;
  }

  #clear(): void {
    if (this.#drawn) this.#io.stderr.write(CLEAR_LINE);
    this.#drawn = false;
  }

  async #follow(client: AgentqClient): Promise<void> {
    try {
      for await (const msg of client.events({ signal: this.#events.signal })) {
        if (!msg.event.startsWith('job.')) continue;
        const job = (JSON.parse(msg.data) as { job?: Job }).job;
        if (job && this.#status.has(job.job_id)) this.update([job]);
      }
    } catch {
      // an older coordinator without /events, or the stream broke: the wait goes on regardless
    }
  }
}
