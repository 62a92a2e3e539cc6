import { ErrorCodes, MAX_SYNC_REPORTS, type SyncReport, type SyncResponse, type SyncResult } from '@agentq/protocol';
import { AgentqApiError, AgentqAuthError, toError, type AgentqClient } from '@agentq/client';
import type { Report } from './reporter.js';

/** A report waiting to go out, and who waits for its answer. */
export interface PendingReport {
  readonly jobId: string;
  readonly report: Report;
  readonly launcherId: string;
  readonly signal: AbortSignal;
  /** its size in a request body */
  readonly bytes: number;
  /** sent in a request of its own: a request it was in was refused as a whole (400, 413) */
  alone?: boolean;
  resolve(): void;
  reject(err: Error): void;
}

export interface SyncChannelOptions {
  client: AgentqClient;
  /** report bytes in one request at most (at least one report always goes; default 512 KiB) */
  maxBytes?: number;
  /**
   * The poll part of the answer to a sync of the channel's own (capacity 0: never jobs, but stop
   * requests and the deregistration notice can come with any answer): for the poller to act on.
   */
  onAnswer?: (res: SyncResponse) => void;
}

/**
 * How reports reach the coordinator: in batches, on `POST /launcher/sync` (report-and-poll).
 * The reporter still sends one report per job at a time, in order, and retries it with backoff
 * (reporter.ts); this channel is its transport. Reports queued at the same moment, from any number
 * of jobs, go out in one request:
 *
 * - on the poller's next sync, which also asks for work (`take`), when the poller is about to send
 *   one or has one in flight that will be answered at once (it carries reports);
 * - otherwise (the poller's sync is parked waiting for work, or the poller is not polling: backing
 *   off, registering again, or stopped at shutdown) in a sync of their own, with capacity 0.
 *
 * Each report's result is its single endpoint's answer: ok, or the error that endpoint would have
 * answered (same code and status), so the reporter handles it exactly as before. A request that
 * fails as a whole fails every report in it the same way, unless its body was refused: then each
 * report goes again on its own (`fail`).
 */
export class SyncChannel {
  readonly #o: SyncChannelOptions;
  #queue: PendingReport[] = [];
  /** the poller takes what is queued at its next sync, which is about to go or will be answered at once */
  #pollerWillTake = false;
  #flushScheduled = false;
  #flushing = false;

  constructor(options: SyncChannelOptions) {
    this.#o = options;
  }

  /** Reports waiting to go out (not in a request). */
  get queued(): number {
    return this.#queue.length;
  }

  /** The reporter's transport: resolves when the coordinator accepted the report, rejects as the single endpoint would. */
  deliver(jobId: string, report: Report, launcherId: string, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(toError(signal.reason));
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.#queue.indexOf(item);
        if (i < 0) return; // in a request: its answer settles it
        this.#queue.splice(i, 1);
        reject(toError(signal.reason));
      };
      const item: PendingReport = {
        jobId,
        report,
        launcherId,
        signal,
        bytes: Buffer.byteLength(JSON.stringify(report.body)),
        resolve: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (err) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(item);
      this.#kick();
    });
  }

  /**
   * The poller says whether it will take the queued reports itself: true from the start of its
   * next sync until that sync is answered when it carries reports; false while its sync is parked
   * (no reports) and while it does not poll. When false, queued reports go out on their own.
   */
  pollerWillTake(value: boolean): void {
    this.#pollerWillTake = value;
    if (!value) this.#kick();
  }

  /** Take queued reports of `launcherId` for one request (oldest first, within the size limits). */
  take(launcherId: string): PendingReport[] {
    const maxBytes = this.#o.maxBytes ?? 512 * 1024;
    const taken: PendingReport[] = [];
    const rest: PendingReport[] = [];
    let bytes = 0;
    for (const item of this.#queue) {
      const fits =
        taken.length === 0 || (!taken[0]!.alone && !item.alone && taken.length < MAX_SYNC_REPORTS && bytes + item.bytes <= maxBytes);
      if (item.launcherId === launcherId && fits) {
        taken.push(item);
        bytes += item.bytes;
      } else rest.push(item);
    }
    this.#queue = rest;
    return taken;
  }

  /** The wire form of taken reports. */
  static body(taken: readonly PendingReport[]): SyncReport[] {
    return taken.map((p) => ({ job_id: p.jobId, kind: p.report.kind, ...p.report.body }) as SyncReport);
  }

  /** A sync carrying `taken` was answered: settle each report with its result. */
  settle(taken: readonly PendingReport[], res: SyncResponse): void {
    taken.forEach((item, i) => {
      const result = res.results[i];
      if (result?.ok) item.resolve();
      else item.reject(result ? resultError(result) : new AgentqApiError(502, 'invalid_response', 'the sync answer has no result for this report'));
    });
  }

  /** Put taken reports back at the front of the queue (their request was abandoned by us). */
  requeue(taken: readonly PendingReport[]): void {
    const back: PendingReport[] = [];
    for (const item of taken) {
      if (item.signal.aborted) item.reject(toError(item.signal.reason));
      else back.push(item);
    }
    this.#queue = [...back, ...this.#queue];
    this.#kick();
  }

  /**
   * A sync carrying `taken` failed as a whole: each of its reports failed the same way. Except
   * when its body was refused (400: one report outside the schema; 413: too large together): a
   * refusal is final, and one bad report would take the others' with it (a job left `running`
   * for good). Each goes again in a request of its own, and gets its own answer.
   */
  fail(taken: readonly PendingReport[], err: Error): void {
    if (taken.length > 1 && bodyRefused(err)) {
      for (const item of taken) item.alone = true;
      this.requeue(taken);
      return;
    }
    for (const item of taken) item.reject(err);
  }

  #kick(): void {
    if (this.#flushScheduled || this.#flushing || this.#pollerWillTake || this.#queue.length === 0) return;
    this.#flushScheduled = true;
    // after the current tick: the reports queued together (several jobs at once) go together, and
    // a poller about to send takes them instead
    setImmediate(() => {
      this.#flushScheduled = false;
      void this.#flush();
    });
  }

  /** Send what is queued in syncs of their own (capacity 0), one request at a time. */
  async #flush(): Promise<void> {
    if (this.#flushing || this.#pollerWillTake) return;
    this.#flushing = true;
    try {
      while (!this.#pollerWillTake && this.#queue.length > 0) {
        const launcherId = this.#queue[0]!.launcherId;
        const taken = this.take(launcherId);
        const signals = [...new Set(taken.map((p) => p.signal))];
        const signal = signals.length === 1 ? signals[0]! : AbortSignal.any(signals);
        try {
          const res = await this.#o.client.sync({ launcher_id: launcherId, capacity: 0, reports: SyncChannel.body(taken) }, { signal });
          this.settle(taken, res);
          this.#o.onAnswer?.(res);
        } catch (err) {
          this.fail(taken, toError(err));
        }
      }
    } finally {
      this.#flushing = false;
      this.#kick();
    }
  }
}

/** The error a single-report endpoint would have answered for this result. */
export function resultError(r: SyncResult): AgentqApiError {
  const e = r.error ?? { code: 'report_refused', message: `the ${r.kind} report was refused` };
  const status = (ErrorCodes as Record<string, number>)[e.code] ?? 400;
  const details = e.details as Record<string, unknown> | undefined;
  if ((status === 401 || status === 403) && e.code !== 'launcher_unknown') return new AgentqAuthError(status, e.code, e.message, details);
  return new AgentqApiError(status, e.code, e.message, details);
}

/**
 * Whether `err` is a refusal of a request's body (400: outside the schema; 413: too large): final,
 * never sent again as it was.
 */
export function bodyRefused(err: unknown): err is AgentqApiError {
  return err instanceof AgentqApiError && (err.status === 400 || err.status === 413);
}
