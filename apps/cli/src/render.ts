import { CliExitCodes, type Job, type JobDescriptor } from '@agentq/protocol';
import { formatDuration } from './duration.js';

/*
 * Text for people (no `--json`). Machine consumers use `--json`: these layouts may change.
 */

const EXIT_MEANING: Record<number, string> = {
  [CliExitCodes.ok]: 'completed',
  [CliExitCodes.running]: 'still running',
  [CliExitCodes.failed]: 'failed',
  [CliExitCodes.stopped]: 'stopped',
  [CliExitCodes.timed_out]: 'timed out',
  [CliExitCodes.not_found]: 'not found',
};

/** Left-aligned columns, two spaces apart; cells are cut to `maxWidth`. */
export function table(header: readonly string[], rows: readonly (readonly string[])[], maxWidth = 48): string {
  const cut = (s: string) => {
    const one = s.replace(/\s+/g, ' ');
    return one.length > maxWidth ? `${one.slice(0, maxWidth - 1)}…` : one;
  };
  const cells = [header, ...rows].map((r) => r.map(cut));
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells
    .map((r) =>
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

const dash = (v: string | number | null | undefined): string => (v === null || v === undefined || v === '' ? '-' : String(v));

/** How long ago an ISO timestamp was, e.g. `4m 05s ago`. */
export function ago(iso: string | null, now: number): string {
  if (!iso) return '-';
  return `${formatDuration(Math.max(0, now - Date.parse(iso)))} ago`;
}

/**
 * One job in full, followed by the commands to follow it up. With a headline (`start` without
 * --wait) the exit-code line is left out: that process exits 0, "accepted".
 */
export function renderDescriptor(d: JobDescriptor, now: number, headline?: string): string {
  const lines: string[] = [];
  if (headline) lines.push(headline);
  lines.push(`${d.job_id}  ${d.status}${d.terminal ? '' : ' (not terminal)'}`);
  const field = (name: string, value: string) => lines.push(`  ${name.padEnd(10)} ${value}`);
  field('type', d.type);
  field('session', d.session_name);
  if (d.parent_session_name) field('parent', d.parent_session_name);
  field('agent', dash(d.agent_name));
  if (d.project_dir) field('project', d.project_dir);
  field('created', `${d.created_at} (${ago(d.created_at, now)})`);
  if (d.started_at) field('started', d.started_at);
  if (d.completed_at) field('ended', d.completed_at);
  if (d.launcher_id) field('launcher', d.launcher_id);
  field('timeout', d.timeout_ms === null ? 'none' : formatDuration(d.timeout_ms));
  if (d.output_bytes > 0) field('output', `${d.output_bytes} bytes`);
  if (!headline) field('exit code', `${d.exit_code} (${EXIT_MEANING[d.exit_code] ?? '?'})`);
  if (d.error) field('error', d.error);
  if (d.result !== null) {
    lines.push('  result:');
    lines.push(...d.result.split('\n').map((l) => `    ${l}`));
  }
  lines.push('');
  if (!d.terminal) {
    lines.push(`  wait:      ${d.wait_command}`);
    lines.push(`  status:    ${d.status_command}   (poll every ${formatDuration(d.poll_interval_ms)})`);
    lines.push(`  cancel:    ${d.cancel_command}`);
  }
  lines.push(`  output:    ${d.output_command}`);
  return lines.join('\n');
}

/** Jobs as a table (list, wait with several jobs). */
export function renderJobTable(jobs: readonly Job[], now: number): string {
  return table(
    ['JOB', 'STATUS', 'TYPE', 'SESSION', 'AGENT', 'CREATED', 'RESULT/ERROR'],
    jobs.map((j) => [
      j.job_id,
      j.status,
      j.type === 'start_session' ? 'start' : 'resume',
      j.session_name,
      dash(j.agent_name),
      ago(j.created_at, now),
      dash(j.error ?? j.result),
    ]),
  );
}
