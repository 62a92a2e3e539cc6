import type { CallbackNotification, SessionMessage } from '@agentq/protocol';
import { isBusy, type CoreContext } from './context.js';
import { enqueue } from './jobs.js';
import type { JobRow } from './rows.js';
import type { Tx } from './store/store.js';
import { notificationOf } from './wire.js';

/*
 * Deliveries: when a child session's job ends, or someone sends a session a message, the session
 * is told through a `resume_session` job — at once when it is idle, otherwise all together when
 * it becomes idle; never two deliveries in flight per session. See docs/sessions.md.
 */

export const CALLBACK_TAG = 'background-task-completed';
export const MESSAGE_TAG = 'message';

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The first `maxBytes` bytes of `s`, cut on a character boundary. */
function cutUtf8(s: string, maxBytes: number): string {
  const buf = Buffer.from(s, 'utf8');
  if (buf.length <= maxBytes) return s;
  let end = Math.max(0, maxBytes);
  while (end > 0 && (buf[end]! & 0xc0) === 0x80) end--;
  return buf.subarray(0, end).toString('utf8');
}

function renderNotification(n: CallbackNotification, resultBudget: number): string {
  const lines = [
    `<${CALLBACK_TAG}>`,
    `<session>${escape(n.child_session_name)}</session>`,
    `<job-id>${n.job_id}</job-id>`,
    `<status>${n.outcome}</status>`,
  ];
  for (const [tag, text] of [
    ['result', n.result],
    ['error', n.error],
  ] as const) {
    if (text === null) continue;
    const full = Buffer.byteLength(text, 'utf8');
    if (full <= resultBudget) {
      lines.push(`<${tag}>${escape(text)}</${tag}>`);
    } else {
      lines.push(`<${tag}>${escape(cutUtf8(text, resultBudget))}</${tag}>`);
      lines.push(
        `<truncated>the ${tag} was cut to ${resultBudget} of ${full} bytes to fit this message; read it whole with ` +
          `\`agentq status ${n.job_id} --json\` or GET /jobs/${n.job_id} (field ${tag})</truncated>`,
      );
    }
  }
  lines.push(`</${CALLBACK_TAG}>`);
  return lines.join('\n');
}

const renderMessage = (m: SessionMessage) =>
  [`<${MESSAGE_TAG} id="${m.message_id}"${m.created_by ? ` from="${escape(m.created_by)}"` : ''}>`, escape(m.text), `</${MESSAGE_TAG}>`].join(
    '\n',
  );

/**
 * The prompt of one delivery resume, at most `maxBytes`. Messages go whole (those that do not
 * fit wait for the next turn: the returned `messages` are the ones included). Child results
 * share what is left; a result cut to fit says so and how to read it whole.
 */
export function renderDeliveryPrompt(
  notifications: readonly CallbackNotification[],
  pendingMessages: readonly SessionMessage[],
  maxBytes: number,
): { prompt: string; messages: SessionMessage[] } {
  const parts: string[] = [];
  const messages: SessionMessage[] = [];
  let used = 0;
  const reserve = notifications.length * 1024; // room for the notifications' frames
  for (const m of pendingMessages) {
    const text = renderMessage(m);
    const size = Buffer.byteLength(text, 'utf8') + 2;
    if (messages.length > 0 && used + size + reserve + 256 > maxBytes) break;
    messages.push(m);
    parts.push(text);
    used += size;
  }
  if (messages.length > 0) {
    parts.unshift(messages.length === 1 ? 'You have a new message:' : `You have ${messages.length} new messages, oldest first:`, '');
  }
  if (notifications.length > 0) {
    const head =
      notifications.length === 1
        ? 'A child session you started has finished. Its outcome:'
        : `${notifications.length} child sessions you started have finished. Their outcomes, oldest first:`;
    const frame = 600; // tags, names and the truncation note of one notification
    const budget = Math.max(256, Math.floor((maxBytes - used - 256) / notifications.length) - frame);
    if (parts.length > 0) parts.push('');
    parts.push(head, '', ...notifications.map((n) => renderNotification(n, budget)));
  }
  return { prompt: cutUtf8(parts.join('\n'), maxBytes), messages };
}

/** A child's job ended: queue its outcome on the parent and deliver if the parent is free. */
export async function childEnded(ctx: CoreContext, tx: Tx, job: JobRow): Promise<void> {
  const parent = job.parentSessionName === null ? undefined : await tx.session(job.parentSessionName);
  if (!parent) return;
  await tx.updateSession(parent.name, {
    callbacks: [...parent.callbacks, notificationOf(job, tx.now)],
    deliveriesHeld: false,
    updatedAt: tx.now,
  });
  await deliver(ctx, tx, parent.name);
  tx.emit('session.updated', { session: parent.name });
}

/**
 * Deliver queued notifications and messages as one resume job, if the session is idle and no
 * delivery is in flight for it. This is the only place delivery jobs are created.
 */
export async function deliver(ctx: CoreContext, tx: Tx, sessionName: string): Promise<JobRow | undefined> {
  const s = await tx.session(sessionName);
  if (!s || (s.callbacks.length === 0 && s.messages.length === 0) || s.deliveriesHeld) return undefined;
  if (s.deliveryJobId !== null || (await isBusy(tx, s.name))) return undefined;
  const { prompt, messages } = renderDeliveryPrompt(s.callbacks, s.messages, ctx.config.maxPromptBytes);
  const notifications = [...s.callbacks];
  const job = await enqueue(ctx, tx, s, {
    type: 'resume_session',
    prompt,
    agentName: s.agentName,
    projectDir: s.projectDir,
    timeoutMs: ctx.config.defaultJobTimeoutMs,
    requires: null,
    maxCostUsd: null,
    createdBy: null,
    callbackOf: notifications.length > 0 ? notifications.map((n) => n.job_id) : null,
    messageIds: messages.length > 0 ? messages.map((m) => m.message_id) : null,
  });
  await tx.updateSession(s.name, {
    callbacks: [],
    messages: s.messages.slice(messages.length),
    deliveryJobId: job.id,
    inFlight: { callbacks: notifications, messages },
  });
  ctx.log.info(
    { job_id: job.id, session_name: s.name, children: notifications.length, messages: messages.length },
    'delivery resume queued',
  );
  return job;
}

/** One of the session's jobs ended: if it was a delivery that did not complete, keep what it carried. */
export async function jobEnded(ctx: CoreContext, tx: Tx, sessionName: string, job: JobRow): Promise<void> {
  const s = (await tx.session(sessionName))!;
  if (s.deliveryJobId !== job.id) {
    // The session's own turn ended: held deliveries may go again, unless it was stopped by
    // request (a stopped session is not resumed at once; they wait like a failed delivery).
    if (s.deliveriesHeld !== (job.status === 'stopped')) await tx.updateSession(s.name, { deliveriesHeld: job.status === 'stopped' });
    return;
  }
  const carried = s.inFlight ?? { callbacks: [], messages: [] };
  if (job.status === 'completed') {
    await tx.updateSession(s.name, { deliveryJobId: null, inFlight: null });
    return;
  }
  await tx.updateSession(s.name, {
    deliveryJobId: null,
    inFlight: null,
    callbacks: [...carried.callbacks, ...s.callbacks],
    messages: [...carried.messages, ...s.messages],
    deliveriesHeld: true,
  });
  ctx.log.warn({ job_id: job.id, session_name: s.name }, 'delivery failed; notifications and messages kept');
}
