import type { CallbackNotification } from '@agentq/protocol';

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
