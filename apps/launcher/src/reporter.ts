import type { Logger } from 'pino';
import type { CompletedReport, FailedReport, OutputReport, StartedReport, StoppedReport } from '@agentq/protocol';
import { AgentqApiError, isRetryable, toError, type AgentqClient, type BackoffOptions } from '@agentq/client';
import { describe, failedByCoordinator, type Connectivity } from './connectivity.js';
import { conform, storable } from './report-bounds.js';
import type { Registration } from './registration.js';

type Body<T> = Omit<T, 'launcher_id'>;

/** One report about a job. `launcher_id` is filled in when it is sent (it changes on re-registration). */
export type Report =
  | { kind: 'started'; body: Body<StartedReport> }
  | { kind: 'output'; body: Body<OutputReport> }
  | { kind: 'completed'; body: Body<CompletedReport> }
  | { kind: 'failed'; body: Body<FailedReport> }
  | { kind: 'stopped'; body: Body<StoppedReport> };

/** What became of a report: acknowledged, refused for good (a final 4xx), or abandoned at shutdown. */
export type ReportOutcome =
  | { ok: true }
  | { ok: false; refused: AgentqApiError }
  | { ok: false; abandoned: Error };

/**
 * How one report is sent: resolves when the coordinator accepted it; rejects with what the single
 * report endpoint would have answered (AgentqApiError) or with the connection error.
 */
export type ReportTransport = (jobId: string, report: Report, launcherId: string, signal: AbortSignal) => Promise<unknown>;

export interface ReporterOptions {
  client: AgentqClient;
  /**
   * How reports go out (default: one request each to the single report endpoints with `client`).
   * The launcher batches them on `POST /launcher/sync` (sync-channel.ts).
   */
  transport?: ReportTransport;
  registration: Registration;
  connectivity: Connectivity;
  log: Logger;
  /** a report was refused for good (not abandoned): what the coordinator answered */
  onRefused?: (jobId: string, report: Report, err: AgentqApiError) => void;
  /** aborting it abandons every report still queued (the launcher is exiting) */
  signal: AbortSignal;
  retry?: BackoffOptions;
  /** output is sent at most this long after the executor printed it (default 200 ms) */
  outputFlushMs?: number;
  /** output batches are sent as soon as they reach this many bytes (default 32 KiB) */
  outputBatchBytes?: number;
  /**
   * Output bytes a job may hold in its queue while the coordinator does not answer (default
   * 8 MiB, well above what the coordinator keeps per job). Beyond it the oldest batches are
   * dropped; later ones still land at their byte offsets, so the gap is counted, not hidden.
   */
  outputQueueMaxBytes?: number;
}

interface Pending {
  report: Report;
  resolve: (outcome: ReportOutcome) => void;
  /** UTF-8 bytes of an output batch (0 for other reports) */
  bytes: number;
  /** a refusal as too late (409) is expected: said at info, not warn (SendOptions.mayBeLate) */
  mayBeLate?: boolean;
}

interface JobQueue {
  items: Pending[];
  sending: boolean;
  /** output printed but not yet queued as a report */
  outputBuffer: string;
  /** byte offset, in the job's output stream, of the next output batch */
  outputOffset: number;
  flushTimer: NodeJS.Timeout | undefined;
  /** output bytes queued as reports and not yet sent */
  queuedOutputBytes: number;
  /** output bytes dropped because the queue was over outputQueueMaxBytes */
  droppedOutputBytes: number;
  /** the job's last report was queued: forget the job once its queue is empty */
  closed: boolean;
}

/** ReporterOptions.outputQueueMaxBytes by default. */
const DEFAULT_OUTPUT_QUEUE_MAX_BYTES = 8 * 1024 * 1024;

/** Characters per output report; at most 3 UTF-8 bytes each, so a batch stays under 100 KiB. */
const MAX_OUTPUT_CHARS = 32 * 1024;

/**
 * Durable, ordered delivery of job reports (the original launcher's CoordinatorAPIClient, reporting side).
 * Each job has its own FIFO queue; its head is retried with capped exponential backoff and jitter
 * until the coordinator acknowledges it or refuses it with a final 4xx, and only then does the
 * next report of that job go out. (The heads of all jobs travel together through the transport:
 * the launcher's batches them on report-and-poll requests, see sync-channel.ts.) So a coordinator that is down for minutes delays reports but
 * loses and reorders none; other jobs' queues are independent. Output is batched into the same
 * queue with a byte offset, so a batch retried after a lost answer is not stored twice.
 */
export class Reporter {
  readonly #o: ReporterOptions;
  readonly #jobs = new Map<string, JobQueue>();
  #drainWaiters = new Set<() => void>();

  constructor(options: ReporterOptions) {
    this.#o = options;
  }

  /** Reports not yet acknowledged or refused, over all jobs. */
  get pending(): number {
    let n = 0;
    for (const q of this.#jobs.values()) n += q.items.length + (q.outputBuffer ? 1 : 0);
    return n;
  }

  /** The most output bytes a job's queue holds (outputQueueMaxBytes): past it the oldest are dropped. */
  get outputQueueMaxBytes(): number {
    return this.#o.outputQueueMaxBytes ?? DEFAULT_OUTPUT_QUEUE_MAX_BYTES;
  }

  /**
   * The most output bytes the job's queue takes now without dropping any of them: its cap, less
   * what the cap never drops (the batch at its head, maybe on its way) and the output printed but
   * not yet batched (the next output may share a batch with it). Older batches still waiting are
   * dropped to make room, the oldest first.
   */
  outputRoom(jobId: string): number {
    const q = this.#jobs.get(jobId);
    if (!q) return this.outputQueueMaxBytes;
    const first = q.items[0];
    const head = first?.report.kind === 'output' ? first.bytes : 0;
    return this.outputQueueMaxBytes - head - Buffer.byteLength(q.outputBuffer);
  }

  /** Queue output text for the job; it is sent in batches, in order with the job's other reports. */
  output(jobId: string, text: string): void {
    if (text === '') return;
    const q = this.#queue(jobId);
    q.outputBuffer += storable(text);
    if (Buffer.byteLength(q.outputBuffer) >= (this.#o.outputBatchBytes ?? 32 * 1024)) this.#flushOutput(jobId, q);
    else q.flushTimer ??= setTimeout(() => this.#flushOutput(jobId, q), this.#o.outputFlushMs ?? 200);
  }

  /** The byte offset, in the job's output stream, where the next output of the job will be. */
  outputEnd(jobId: string): number {
    const q = this.#jobs.get(jobId);
    return q ? q.outputOffset + Buffer.byteLength(q.outputBuffer) : 0;
  }

  /**
   * Queue a report after everything queued before for the job (buffered output included).
   * Resolves when it is acknowledged, refused, or abandoned; never rejects.
   */
  send(
    jobId: string,
    report: Report,
    /**
     * `mayBeLate`: the job may have ended at the coordinator already (a stop answered for a job
     * that ended here), so a 409 is news to nobody
     */
    options: { last?: boolean; mayBeLate?: boolean } = {},
  ): Promise<ReportOutcome> {
    const conformed = conform(report);
    if (conformed.dropped.length > 0) {
      this.#o.log.warn({ job_id: jobId, report: report.kind, fields: conformed.dropped }, 'report fields outside the protocol\'s bounds left out');
    }
    if (conformed.errorBytesCut > 0) {
      this.#o.log.warn({ job_id: jobId, report: report.kind, bytes_cut: conformed.errorBytesCut }, 'report error too long; cut to fit');
    }
    report = conformed.report;
    const q = this.#queue(jobId);
    this.#flushOutput(jobId, q);
    if (options.last) q.closed = true;
    return new Promise<ReportOutcome>((resolve) => {
      q.items.push({ report, resolve, bytes: 0, ...(options.mayBeLate ? { mayBeLate: true } : {}) });
      void this.#pump(jobId, q);
    });
  }

  /** The job will get no more reports: forget it once its queue is empty. */
  close(jobId: string): void {
    const q = this.#jobs.get(jobId);
    if (!q) return;
    q.closed = true;
    if (q.items.length === 0 && q.outputBuffer === '' && !q.sending) this.#jobs.delete(jobId);
  }

  /** Resolve true once every queued report is settled, false if `signal` aborts first. */
  async drain(signal: AbortSignal): Promise<boolean> {
    for (const [jobId, q] of this.#jobs) this.#flushOutput(jobId, q);
    while (this.pending > 0) {
      if (signal.aborted) return false;
      await new Promise<void>((resolve) => {
        const done = () => {
          signal.removeEventListener('abort', done);
          this.#drainWaiters.delete(done);
          resolve();
        };
        signal.addEventListener('abort', done, { once: true });
        this.#drainWaiters.add(done);
      });
    }
    return true;
  }

  #queue(jobId: string): JobQueue {
    let q = this.#jobs.get(jobId);
    if (!q) {
      q = {
        items: [],
        sending: false,
        outputBuffer: '',
        outputOffset: 0,
        flushTimer: undefined,
        queuedOutputBytes: 0,
        droppedOutputBytes: 0,
        closed: false,
      };
      this.#jobs.set(jobId, q);
    }
    return q;
  }

  #flushOutput(jobId: string, q: JobQueue): void {
    clearTimeout(q.flushTimer);
    q.flushTimer = undefined;
    while (q.outputBuffer !== '') {
      let cut = Math.min(q.outputBuffer.length, MAX_OUTPUT_CHARS);
      // never split a surrogate pair between two batches
      if (cut < q.outputBuffer.length && isHighSurrogate(q.outputBuffer.charCodeAt(cut - 1))) cut--;
      const data = q.outputBuffer.slice(0, cut);
      q.outputBuffer = q.outputBuffer.slice(cut);
      const offset = q.outputOffset;
      const bytes = Buffer.byteLength(data);
      q.outputOffset += bytes;
      q.queuedOutputBytes += bytes;
      q.items.push({ report: { kind: 'output', body: { offset, data } }, resolve: () => {}, bytes });
    }
    this.#capOutput(jobId, q);
    void this.#pump(jobId, q);
  }

  /** Drop the oldest queued output batches (never the one being sent) while over the cap. */
  #capOutput(jobId: string, q: JobQueue): void {
    const max = this.outputQueueMaxBytes;
    if (q.queuedOutputBytes <= max) return;
    const before = q.droppedOutputBytes;
    for (let i = 1; i < q.items.length && q.queuedOutputBytes > max; ) {
      const item = q.items[i]!;
      if (item.report.kind !== 'output') {
        i++;
        continue;
      }
      q.items.splice(i, 1);
      q.queuedOutputBytes -= item.bytes;
      q.droppedOutputBytes += item.bytes;
    }
    if (before === 0 && q.droppedOutputBytes > 0) {
      this.#o.log.warn(
        { job_id: jobId, max_queued_output_bytes: max },
        'more output queued than the coordinator has taken (it is slow or not answering): dropping the oldest output of the job',
      );
    }
  }

  /** Send the job's queue head to the coordinator until the queue is empty. One pump per job. */
  async #pump(jobId: string, q: JobQueue): Promise<void> {
    if (q.sending) return;
    q.sending = true;
    const log = this.#o.log.child({ job_id: jobId });
    try {
      while (q.items.length > 0) {
        const item = q.items[0]!;
        const outcome = await this.#deliver(jobId, item.report, log, item.mayBeLate === true);
        q.items.shift();
        q.queuedOutputBytes -= item.bytes;
        item.resolve(outcome);
      }
    } finally {
      q.sending = false;
      if (q.items.length === 0 && q.outputBuffer === '' && q.closed) {
        if (q.droppedOutputBytes > 0) {
          log.warn({ dropped_output_bytes: q.droppedOutputBytes }, 'output dropped during the outage');
        }
        this.#jobs.delete(jobId);
      }
      this.#notifyDrain();
    }
  }

  async #deliver(jobId: string, report: Report, log: Logger, mayBeLate = false): Promise<ReportOutcome> {
    const { client, registration, connectivity, signal } = this.#o;
    const transport = this.#o.transport ?? ((id, r, launcherId, s) => sendReport(client, id, r, launcherId, s));
    for (let attempt = 0; ; ) {
      if (signal.aborted) return this.#abandon(report, log, toError(signal.reason));
      const launcherId = registration.id;
      if (launcherId === undefined) return this.#abandon(report, log, new Error('launcher is not registered'));
      try {
        await transport(jobId, report, launcherId, signal);
        connectivity.ok();
        if (attempt > 0) log.info({ report: report.kind, attempts: attempt + 1 }, 'report delivered after retries');
        else log.debug({ report: report.kind }, 'report delivered');
        return { ok: true };
      } catch (err) {
        const e = toError(err);
        if (signal.aborted) return this.#abandon(report, log, e);
        if (e instanceof AgentqApiError && e.code === 'launcher_unknown') {
          try {
            await registration.renew(launcherId, signal);
          } catch (renewErr) {
            // our own exit signal: abandoned (not refused); otherwise registration was refused for good
            if (signal.aborted) return this.#abandon(report, log, toError(renewErr));
            return this.#refused(jobId, report, log, e, toError(renewErr).message);
          }
          continue;
        }
        if (!isRetryable(e) && e instanceof AgentqApiError) return this.#refused(jobId, report, log, e, undefined, mayBeLate && e.status === 409);
        if (failedByCoordinator(e)) {
          // the coordinator answered, and failed this report: other requests succeeding in the
          // meantime say nothing about it, so it waits its whole backoff before going again
          log.warn({ report: report.kind, attempt, err: describe(e) }, 'coordinator failed the report; retrying it after a backoff');
          await connectivity.backoff(attempt++, signal, this.#o.retry, { wakeOnReachable: false });
          continue;
        }
        connectivity.failed(e, `report ${report.kind}`);
        log.debug({ report: report.kind, attempt, err: describe(e) }, 'report not delivered; will retry');
        await connectivity.backoff(attempt++, signal, this.#o.retry);
      }
    }
  }

  #refused(jobId: string, report: Report, log: Logger, err: AgentqApiError, why?: string, late = false): ReportOutcome {
    const fields = { report: report.kind, code: err.code, status: err.status, details: err.details, why };
    if (late) log.info(fields, 'the job had ended at the coordinator already; report not needed');
    else log.warn(fields, 'coordinator refused the report; not retrying it');
    this.#o.onRefused?.(jobId, report, err);
    return { ok: false, refused: err };
  }

  #abandon(report: Report, log: Logger, err: Error): ReportOutcome {
    log.error({ report: report.kind, err: describe(err) }, 'report abandoned: the launcher is exiting');
    return { ok: false, abandoned: err };
  }

  #notifyDrain(): void {
    const waiters = [...this.#drainWaiters];
    this.#drainWaiters.clear();
    for (const w of waiters) w();
  }
}

function sendReport(
  client: AgentqClient,
  jobId: string,
  report: Report,
  launcher_id: string,
  signal: AbortSignal,
): Promise<unknown> {
  const o = { signal };
  switch (report.kind) {
    case 'started':
      return client.reportStarted(jobId, { ...report.body, launcher_id }, o);
    case 'output':
      return client.reportOutput(jobId, { ...report.body, launcher_id }, o);
    case 'completed':
      return client.reportCompleted(jobId, { ...report.body, launcher_id }, o);
    case 'failed':
      return client.reportFailed(jobId, { ...report.body, launcher_id }, o);
    case 'stopped':
      return client.reportStopped(jobId, { ...report.body, launcher_id }, o);
  }
}

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;
