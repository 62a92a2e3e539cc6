import type { CreateJobRequest } from '@agentq/protocol';
import { CoordinatorError } from './errors.js';
import type { Store } from './store/store.js';

/**
 * Memory-aware admission of new jobs (MAX_QUEUED_BYTES). Every pending job's prompt is held in
 * memory until a launcher takes it, so a flood of large prompts faster than launchers drain them
 * would grow the heap until the process dies. Past the limit a create is refused with 503
 * `queue_full` and a Retry-After: the client retries once launchers have taken some of the queue.
 * Only client creates are checked: what was accepted (its callbacks, messages, requeues) always
 * goes through, so nothing acknowledged is ever harmed.
 */
export class Admission {
  /** creates refused with queue_full */
  refused = 0;

  constructor(
    private readonly store: Store,
    /** UTF-8 bytes of pending prompts */
    readonly maxQueuedBytes: number,
    private readonly retryAfterSeconds: number,
  ) {}

  /**
   * Refuse `jobs` when their prompts would take the pending bytes over the limit. Called inside
   * the creating transaction, so the count it reads is exact for a store that runs one
   * transaction at a time.
   */
  async check(jobs: readonly Pick<CreateJobRequest, 'prompt'>[]): Promise<void> {
    const pendingBytes = this.store.pendingPromptBytes?.();
    if (pendingBytes === undefined) return; // the store keeps no count: no byte limit
    let incoming = 0;
    for (const j of jobs) incoming += Buffer.byteLength(j.prompt, 'utf8');
    if (pendingBytes + incoming <= this.maxQueuedBytes) return;
    this.refused++;
    throw new CoordinatorError(
      'queue_full',
      `the queue holds ${pendingBytes} bytes of prompts; ${incoming} more would pass MAX_QUEUED_BYTES (${this.maxQueuedBytes}). ` +
        `Retry after ${this.retryAfterSeconds} s, once launchers have taken some of it`,
      {
        queued_bytes: pendingBytes,
        request_bytes: incoming,
        max_queued_bytes: this.maxQueuedBytes,
        retry_after_seconds: this.retryAfterSeconds,
      },
    );
  }
}
