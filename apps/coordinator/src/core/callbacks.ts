import type { CallbackNotification, SessionMessage } from '@agentq/protocol';
import { budgetExceeded } from './budget.js';
import { isBusy, txLog, type CoreContext } from './context.js';
import { enqueue } from './jobs.js';
import type { JobRow, SessionRow } from './rows.js';
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
  const texts = ([
    ['result', n.result],
    ['error', n.error],
  ] as const).filter((x): x is readonly ['result' | 'error', string] => x[1] !== null);
  const budget = Math.floor(resultBudget / Math.max(1, texts.length));
  for (const [tag, text] of texts) {
    // the budget holds the text as it appears, escaped (escaping can make it several times longer)
    const escaped = escape(text);
    if (Buffer.byteLength(escaped, 'utf8') <= budget) {
      lines.push(`<${tag}>${escaped}</${tag}>`);
    } else {
      let cut = cutUtf8(escaped, budget);
      const amp = cut.lastIndexOf('&');
      if (amp >= 0 && !cut.includes(';', amp)) cut = cut.slice(0, amp); // not half an entity
      lines.push(`<${tag}>${cut}</${tag}>`);
      lines.push(
        `<truncated>the ${tag} was cut to fit this message (${Buffer.byteLength(text, 'utf8')} bytes in all); read it whole with ` +
          `\`agentq status ${n.job_id} --json\` or GET /jobs/${n.job_id} (field ${tag}), and the job's output with GET /jobs/${n.job_id}/output</truncated>`,
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

/** Room kept for a notification's tags, names and truncation notes, besides its result. */
const FRAME = 600;
/** The least of a result or error shown; what does not fit waits for the next delivery. */
const MIN_RESULT = 256;
/** Room a delivery keeps for one child outcome besides its messages (a session name: 200 characters, 1,000 bytes escaped at most: `&` is `&amp;`). */
const OUTCOME_RESERVE = FRAME + MIN_RESULT + 1000;
/** Room for a delivery's headers and the lines between its parts. */
const HEADERS = 512;

/**
 * The most a message may take in a delivery prompt of `maxPromptBytes`, as it appears there
 * (escaped, in its tags): a message alone must still leave room for one child outcome, so a
 * delivery never has to cut one short.
 */
export const maxMessageBytes = (maxPromptBytes: number): number => maxPromptBytes - OUTCOME_RESERVE - HEADERS;

/** A message's size in a delivery prompt (`&`, `<` and `>` escaped: up to five times its text). */
export const messageBytes = (m: SessionMessage): number => Buffer.byteLength(renderMessage(m), 'utf8');

/**
 * The prompt of one delivery resume, at most `maxBytes`. Messages go whole (those that do not
 * fit wait for the next turn: the returned `messages` are the ones included). Child outcomes
 * share what is left, each with at least a short excerpt of its result: those that do not fit
 * even so wait for the next delivery (the returned `notifications` are the ones included, and the
 * prompt says how many more are coming). A result cut to fit says so and how to read it whole.
 */
export function renderDeliveryPrompt(
  notifications: readonly CallbackNotification[],
  pendingMessages: readonly SessionMessage[],
  maxBytes: number,
): { prompt: string; messages: SessionMessage[]; notifications: CallbackNotification[] } {
  const parts: string[] = [];
  const messages: SessionMessage[] = [];
  let used = 0;
  const reserve = Math.min(notifications.length, 1) * OUTCOME_RESERVE; // room for at least one outcome
  for (const m of pendingMessages) {
    const text = renderMessage(m);
    const size = Buffer.byteLength(text, 'utf8') + 2;
    // the first goes whatever its size (sendMessage bounds it: maxMessageBytes)
    if (messages.length > 0 && used + size + reserve + HEADERS > maxBytes) break;
    messages.push(m);
    parts.push(text);
    used += size;
  }
  if (messages.length > 0) {
    parts.unshift(messages.length === 1 ? 'You have a new message:' : `You have ${messages.length} new messages, oldest first:`, '');
  }
  // as many outcomes as fit with their frame and a short excerpt each (one at least, since the
  // messages leave room for it); one that does not fit waits for the next delivery, whole
  const room = maxBytes - used - HEADERS;
  let count = 0;
  let frames = 0;
  for (const n of notifications) {
    const size = FRAME + MIN_RESULT + Buffer.byteLength(escape(n.child_session_name), 'utf8');
    if (frames + size > room) break;
    frames += size;
    count++;
  }
  const included = notifications.slice(0, count);
  if (included.length > 0) {
    const later = notifications.length - included.length;
    const head =
      notifications.length === 1
        ? 'A child session you started has finished. Its outcome:'
        : `${notifications.length} child sessions you started have finished. ` +
          (later > 0
            ? `The outcomes of the first ${included.length}, oldest first (the other ${later} follow in your next turn):`
            : 'Their outcomes, oldest first:');
    const perResult = Math.max(MIN_RESULT, Math.floor((room - frames) / included.length) + MIN_RESULT);
    if (parts.length > 0) parts.push('');
    parts.push(head, '', ...included.map((n) => renderNotification(n, perResult)));
  }
  return { prompt: cutUtf8(parts.join('\n'), maxBytes), messages, notifications: included };
}

/**
 * Lists of held outcomes a transaction made itself: not committed, seen by no one else, so the
 * next child of the same transaction appends in place. A tree stop ends every child of a parent
 * in one transaction; copying the list for each would be quadratic.
 */
const listsOf = new WeakMap<Tx, WeakSet<readonly CallbackNotification[]>>();

function withOutcome(tx: Tx, list: readonly CallbackNotification[], n: CallbackNotification): readonly CallbackNotification[] {
  let own = listsOf.get(tx);
  if (own?.has(list)) {
    (list as CallbackNotification[]).push(n);
    return list;
  }
  const copy = [...list, n];
  if (!own) listsOf.set(tx, (own = new WeakSet()));
  own.add(copy);
  return copy;
}

/** A child's job ended: queue its outcome on the parent and deliver if the parent is free. */
export async function childEnded(ctx: CoreContext, tx: Tx, job: JobRow): Promise<void> {
  const parent = job.parentSessionName === null ? undefined : await tx.session(job.parentSessionName);
  if (!parent) return;
  await tx.updateSession(parent.name, {
    callbacks: withOutcome(tx, parent.callbacks, notificationOf(job, tx.now)),
    // held deliveries go with the next child outcome, but not with one of a child stopped with
    // its whole tree: a stopped tree is not woken by its stopped children
    deliveriesHeld: job.stopReason === 'tree' ? parent.deliveriesHeld : false,
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
  // a closed session takes no input, and a child of a spent tree no new job: what is queued stays
  // queued (pending_callbacks), not lost
  if (!s.acceptsInput || (await budgetExceeded(tx, s))) return undefined;
  const { prompt, messages, notifications } = renderDeliveryPrompt(s.callbacks, s.messages, ctx.config.maxPromptBytes);
  if (messages.length === 0 && notifications.length === 0) return undefined;
  const job = await enqueue(ctx, tx, s, {
    type: 'resume_session',
    prompt,
    agentName: s.agentName,
    projectDir: s.projectDir,
    timeoutMs: ctx.config.defaultJobTimeoutMs,
    requires: s.requires,
    maxCostUsd: null,
    createdBy: null,
    callbackOf: notifications.length > 0 ? notifications.map((n) => n.job_id) : null,
    messageIds: messages.length > 0 ? messages.map((m) => m.message_id) : null,
  });
  await tx.updateSession(s.name, {
    // outcomes that did not fit stay queued: the next delivery, once this one ends, takes them
    callbacks: s.callbacks.slice(notifications.length),
    messages: s.messages.slice(messages.length),
    deliveryJobId: job.id,
    inFlight: { callbacks: notifications, messages },
  });
  txLog(ctx, tx).info(
    { job_id: job.id, session_name: s.name, children: notifications.length, messages: messages.length },
    'delivery resume queued',
  );
  return job;
}

/** Whether a message waiting on the session was sent at `since` (epoch ms) or later. */
const messagedSince = (s: SessionRow, since: number): boolean => s.messages.some((m) => Date.parse(m.created_at) >= since);

/**
 * One of the session's jobs ended: if it was a delivery that did not complete, keep what it
 * carried. Held deliveries (docs/sessions.md) wait for new input after a job someone asked to
 * stop — any turn of the session, a delivery too, also one that ended completed or failed before
 * the stop reached its executor — and after a delivery that did not complete (a session whose
 * every turn fails would loop). A message sent since (the stop was asked for, or the delivery was
 * queued) is such new input: it goes with the next turn all the same.
 */
export async function jobEnded(ctx: CoreContext, tx: Tx, sessionName: string, job: JobRow): Promise<void> {
  const s = (await tx.session(sessionName))!;
  const byRequest = job.stopReason === 'requested' || job.stopReason === 'tree';
  const newInput = messagedSince(s, byRequest ? (job.stopRequestedAt ?? job.createdAt) : job.createdAt);
  if (s.deliveryJobId !== job.id) {
    // the session's own turn ended: held deliveries may go again, unless it was stopped
    const held = byRequest && !newInput;
    if (s.deliveriesHeld !== held) await tx.updateSession(s.name, { deliveriesHeld: held });
    return;
  }
  const carried = s.inFlight ?? { callbacks: [], messages: [] };
  if (job.status === 'completed') {
    await tx.updateSession(s.name, { deliveryJobId: null, inFlight: null, ...(byRequest ? { deliveriesHeld: !newInput } : {}) });
    return;
  }
  await tx.updateSession(s.name, {
    deliveryJobId: null,
    inFlight: null,
    callbacks: [...carried.callbacks, ...s.callbacks],
    messages: [...carried.messages, ...s.messages],
    deliveriesHeld: !newInput,
  });
  txLog(ctx, tx).warn({ job_id: job.id, session_name: s.name }, 'delivery failed; notifications and messages kept');
}
