import type { CreateJobRequest } from '@agentq/protocol';
import { CoordinatorError } from './errors.js';
import { queuedMessageBytes, type SessionRow } from './rows.js';
import type { Store } from './store/store.js';

/** The most messages one session may hold for its next turn. */
export const MAX_SESSION_MESSAGES = 1000;
/** The most bytes of messages one session may hold, in prompts of MAX_PROMPT_BYTES. */
export const SESSION_MESSAGE_PROMPTS = 4;

/**
 * Memory-aware admission of new jobs (MAX_QUEUED_BYTES). Every pending job's prompt is held in
 * memory until a launcher takes it, so a flood of large prompts faster than launchers drain them
 * would grow the heap until the process dies. Past the limit a create is refused with 503
 * `queue_full` and a Retry-After: the client retries once launchers have taken some of the queue.
 * Messages to sessions count too: a busy session holds them in memory until its next turn. So do
 * the outcomes of child sessions (their results and errors) a parent holds for its next delivery:
 * a flood of children with results of megabytes under a parent that stays busy grew the heap with
 * nothing to stop it, the children's prompts having left the count once taken. Only
 * client creates and messages are checked: what was accepted (its callbacks, deliveries,
 * requeues) always goes through, so nothing acknowledged is ever harmed.
 */
export class Admission {
  /** creates refused with queue_full */
  refused = 0;

  constructor(
    private readonly store: Store,
    /** UTF-8 bytes of pending prompts */
    readonly maxQueuedBytes: number,
    private readonly retryAfterSeconds: number,
    /** MAX_PROMPT_BYTES: what one session's messages are bounded by */
    private readonly maxPromptBytes: number,
  ) {}

  /**
   * Refuse `jobs` when their prompts would take the bytes held for the queue over the limit.
   * Called inside the creating transaction, so the count it reads is exact for a store that runs
   * one transaction at a time.
   */
  async check(jobs: readonly Pick<CreateJobRequest, 'prompt'>[]): Promise<void> {
    let incoming = 0;
    for (const j of jobs) incoming += Buffer.byteLength(j.prompt, 'utf8');
    this.#admit(incoming, 'prompts');
  }

  /**
   * Refuse a message to `session` the same way: it waits in memory for the session's next turn.
   * One session holds at most MAX_SESSION_MESSAGES of them, or SESSION_MESSAGE_PROMPTS prompts'
   * worth: a client sending faster than the session works is told to wait before its list (which
   * is rewritten with every message) grows without bound.
   */
  checkMessage(session: SessionRow, text: string): void {
    const bytes = Buffer.byteLength(text, 'utf8');
    const held = queuedMessageBytes(session.messages);
    const maxBytes = SESSION_MESSAGE_PROMPTS * this.maxPromptBytes;
    if (session.messages.length >= MAX_SESSION_MESSAGES || held + bytes > maxBytes) {
      this.refused++;
      throw new CoordinatorError(
        'queue_full',
        `session ${session.name} holds ${session.messages.length} messages (${held} bytes) for its next turn; the most it holds is ` +
          `${MAX_SESSION_MESSAGES} messages and ${maxBytes} bytes. Retry after ${this.retryAfterSeconds} s, once its next turn has taken them`,
        {
          session_name: session.name,
          pending_messages: session.messages.length,
          pending_message_bytes: held,
          retry_after_seconds: this.retryAfterSeconds,
        },
      );
    }
    this.#admit(bytes, 'message');
  }

  #admit(incoming: number, what: string): void {
    const pendingBytes = this.store.pendingPromptBytes?.();
    if (pendingBytes === undefined) return; // the store keeps no count: no byte limit
    // the prompts of pending jobs, and the messages and child outcomes sessions hold for their next turn
    const queued = pendingBytes + (this.store.pendingMessageBytes?.() ?? 0) + (this.store.heldOutcomeBytes?.() ?? 0);
    if (queued + incoming <= this.maxQueuedBytes) return;
    this.refused++;
    throw new CoordinatorError(
      'queue_full',
      `the queue holds ${queued} bytes of prompts, messages and child outcomes held for busy sessions; ${incoming} more (this request's ${what}) would pass MAX_QUEUED_BYTES (${this.maxQueuedBytes}). ` +
        `Retry after ${this.retryAfterSeconds} s, once launchers have taken some of it`,
      {
        queued_bytes: queued,
        request_bytes: incoming,
        max_queued_bytes: this.maxQueuedBytes,
        retry_after_seconds: this.retryAfterSeconds,
      },
    );
  }
}
