import type { ComponentChildren } from 'preact';
import type { Job } from '@agentq/protocol';
import { jobLink } from '../lib/router.js';

export function StatusBadge({ status }: { status: string }) {
  return (
    <span class={`badge status-${status}`} data-status={status}>
      {status.replace('_', ' ')}
    </span>
  );
}

/** Marks a callback job: a resume that delivers child sessions' outcomes to their parent. */
export function CallbackMark({ job }: { job: Pick<Job, 'callback_of'> }) {
  if (job.callback_of === null) return null;
  const n = job.callback_of.length;
  return (
    <span class="badge callback" data-callback="true" title={`delivers the outcome of ${job.callback_of.join(', ')}`}>
      ↩ callback{n > 1 ? ` ×${n}` : ''}
    </span>
  );
}

export function JobLink({ id }: { id: string }) {
  return (
    <a class="mono" href={jobLink(id)}>
      {id}
    </a>
  );
}

export function ErrorNote({ children }: { children: ComponentChildren }) {
  return (
    <p class="note error" role="alert">
      {children}
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function Labels({ labels }: { labels: Record<string, string> | null }) {
  if (labels === null) return <>—</>;
  const entries = Object.entries(labels);
  if (entries.length === 0) return <>—</>;
  return (
    <span class="chips">
      {entries.map(([k, v]) => (
        <span class="chip" key={k}>
          {k}={v}
        </span>
      ))}
    </span>
  );
}
