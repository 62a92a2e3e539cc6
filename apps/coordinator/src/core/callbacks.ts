import type { CallbackNotification } from '@agentq/protocol';
import type { Logger } from 'pino';
import { notificationOf, type JobRecord } from './job-record.js';
import { isBusy, type SessionRecord } from './sessions.js';

/*
 * The callback processor: when a child session's job ends, its parent is told through a
 * `resume_session` job (see docs/sessions.md).
 */

/**
 * Callback prompts: the text a parent session is resumed with when children end. The format
 * follows seed 003's notification (an XML-ish block the model parses reliably); it is the one
 * place these prompts are written. Documented in docs/sessions.md.
 */
export const CALLBACK_TAG = 'background-task-completed';

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function renderOne(n: CallbackNotification): string {
  const lines = [
    `<${CALLBACK_TAG}>`,
    `<session>${escape(n.child_session_name)}</session>`,
    `<job-id>${n.job_id}</job-id>`,
    `<status>${n.outcome}</status>`,
  ];
  if (n.result !== null) lines.push(`<result>${escape(n.result)}</result>`);
  if (n.error !== null) lines.push(`<error>${escape(n.error)}</error>`);
  lines.push(`</${CALLBACK_TAG}>`);
  return lines.join('\n');
}

/** The prompt of one callback resume job delivering `notifications` (oldest first). */
export function renderCallbackPrompt(notifications: readonly CallbackNotification[]): string {
  const head =
    notifications.length === 1
      ? 'A child session you started has finished. Its outcome:'
      : `${notifications.length} child sessions you started have finished. Their outcomes, oldest first:`;
  return [head, '', ...notifications.map(renderOne)].join('\n');
}

/** What the callback processor needs from the coordinator. */
export interface CallbackHost {
  session(name: string): SessionRecord | undefined;
  /** create (and queue) the parent's resume job carrying `prompt` */
  enqueueCallback(session: SessionRecord, prompt: string, callbackOf: string[]): JobRecord;
  sessionChanged(session: SessionRecord): void;
  now(): number;
  log: Logger;
}

/**
 * Queues child outcomes on their parent and delivers them as resume jobs: at once when the
 * parent is idle, otherwise all together when it becomes idle; never two in flight per parent.
 * Called explicitly from the job's end (not through the event emitter), so no listener failure
 * can lose a notification.
 */
export class CallbackProcessor {
  /** notifications carried by each callback job in flight */
  readonly #deliveries = new Map<string, CallbackNotification[]>();

  constructor(private readonly host: CallbackHost) {}

  /** A child's job ended: queue its outcome on the parent and deliver if the parent is free. */
  childEnded(job: JobRecord): void {
    const parent = job.parentSessionName === null ? undefined : this.host.session(job.parentSessionName);
    if (!parent) return;
    parent.callbacks.push(notificationOf(job, this.host.now()));
    parent.callbacksHeld = false;
    this.deliver(parent);
    this.host.sessionChanged(parent);
  }

  /**
   * Deliver queued notifications as one resume job, if the session is idle and no callback
   * resume is in flight for it. This is the only place callback jobs are created.
   */
  deliver(session: SessionRecord): void {
    if (session.callbacks.length === 0 || session.callbacksHeld) return;
    if (isBusy(session) || session.callbackJobId !== null) return;
    const notifications = session.callbacks.splice(0);
    const job = this.host.enqueueCallback(
      session,
      renderCallbackPrompt(notifications),
      notifications.map((n) => n.job_id),
    );
    session.callbackJobId = job.id;
    this.#deliveries.set(job.id, notifications);
    this.host.log.info({ job_id: job.id, session_name: session.name, children: notifications.length }, 'callback resume queued');
  }

  /** One of `session`'s jobs ended: if it was a callback that did not complete, keep its notifications. */
  jobEnded(session: SessionRecord, job: JobRecord): void {
    const delivered = this.#deliveries.get(job.id);
    if (!delivered) {
      // The session's own turn ended: held notifications may go again, unless it was stopped
      // by request (a stopped session is not resumed at once; they wait like a failed delivery).
      session.callbacksHeld = job.status === 'stopped';
      return;
    }
    this.#deliveries.delete(job.id);
    if (session.callbackJobId === job.id) session.callbackJobId = null;
    if (job.status !== 'completed') {
      session.callbacks.unshift(...delivered);
      session.callbacksHeld = true;
      this.host.log.warn({ job_id: job.id, session_name: session.name }, 'callback delivery failed; notifications kept');
    }
  }

  /** After a restore: the callback job in flight `jobId` carries these notifications. */
  restoreDelivery(jobId: string, notifications: CallbackNotification[]): void {
    this.#deliveries.set(jobId, notifications);
  }
}
