import { CliExitCodes, isTerminal, type Job, type JobDescriptor, type Labels, type Usage } from '@agentq/protocol';
import { formatDuration } from './duration.js';
import { preview, printableLine as line, table } from './table.js';

/*
 * Text for people (no `--json`). Machine consumers use `--json`: these layouts may change.
 */

export { table } from './table.js';

const EXIT_MEANING: Record<number, string> = {
  [CliExitCodes.ok]: 'completed',
  [CliExitCodes.running]: 'still running',
  [CliExitCodes.failed]: 'failed',
  [CliExitCodes.stopped]: 'stopped',
  [CliExitCodes.timed_out]: 'timed out',
  [CliExitCodes.not_found]: 'not found',
};

export const dash = (v: string | number | null | undefined): string =>
  v === null || v === undefined || v === '' ? '-' : String(v);

/** How long ago an ISO timestamp was, e.g. `4m 05s ago`. */
export function ago(iso: string | null, now: number): string {
  if (!iso) return '-';
  return `${formatDuration(Math.max(0, now - Date.parse(iso)))} ago`;
}

/** `key=value` pairs, space-separated, in key order. */
export function formatLabels(labels: Labels | null | undefined): string {
  if (!labels) return '';
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(' ');
}

const count = (n: number) => n.toLocaleString('en-US');

/** Token counts and cost in one line, e.g. `1,200 in · 340 out · cache 5,000 read · $0.0123`. */
export function formatUsage(usage: Usage | null | undefined, costUsd: number | null | undefined): string {
  const parts: string[] = [];
  if (usage) {
    parts.push(`${count(usage.input_tokens)} in`, `${count(usage.output_tokens)} out`);
    const cache: string[] = [];
    if (usage.cache_read_input_tokens > 0) cache.push(`${count(usage.cache_read_input_tokens)} read`);
    if (usage.cache_creation_input_tokens > 0) cache.push(`${count(usage.cache_creation_input_tokens)} written`);
    if (cache.length > 0) parts.push(`cache ${cache.join(', ')}`);
  }
  if (costUsd !== null && costUsd !== undefined) parts.push(formatCost(costUsd));
  return parts.join(' · ');
}

/** Dollars with enough digits to see small amounts: `$0.0042`, `$1.25`. */
export function formatCost(usd: number): string {
  return `$${usd < 1 ? usd.toFixed(4) : usd.toFixed(2)}`;
}

/** True when there is something to show: any token counted or any cost. */
export function hasUsage(usage: Usage | null | undefined, costUsd: number | null | undefined): boolean {
  const tokens = usage
    ? usage.input_tokens + usage.output_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
    : 0;
  return tokens > 0 || (costUsd ?? 0) > 0;
}

/** What each of the job's extensions reads as when a server did not send it. */
const EXTENSIONS_NONE = {
  result: null,
  timeout_ms: null,
  stop_requested_at: null,
  stop_reason: null,
  executor_session_id: null,
  callback_of: null,
  attempts: 0,
  output_bytes: 0,
  requires: null,
  pending_reason: null,
  error_code: null,
  created_by: null,
  stopped_by: null,
  message_ids: null,
  usage: null,
  cost_usd: null,
  num_turns: null,
  duration_api_ms: null,
  max_cost_usd: null,
} satisfies Partial<Job>;

/**
 * A job as the text renderers read it. The seed's job (`GET /jobs/{id}`) has only its own fields,
 * the optional ones possibly absent: a seed-compatible server or an older coordinator sends no
 * `result`, `terminal`, `usage`, ... Each field it left out reads as its "none" (null, 0), and
 * `terminal` as what the status says. `--json` prints the job as it came.
 */
export function seedJob<T extends Omit<Job, 'prompt'>>(job: T): T {
  const sent = Object.fromEntries(Object.entries(job).filter(([, v]) => v !== undefined)) as Partial<T>;
  return {
    ...EXTENSIONS_NONE,
    agent_name: null,
    project_dir: null,
    parent_session_name: null,
    launcher_id: null,
    error: null,
    claimed_at: null,
    started_at: null,
    completed_at: null,
    updated_at: job.created_at,
    ...sent,
    terminal: typeof job.terminal === 'boolean' ? job.terminal : isTerminal(job.status),
  } as T;
}

/** The TYPE column of a job: a callback resume (it delivers children's outcomes) is `callback`. */
export function jobKind(job: Pick<Job, 'type' | 'callback_of'>): string {
  if (job.callback_of && job.callback_of.length > 0) return 'callback';
  return job.type === 'start_session' ? 'start' : 'resume';
}

/**
 * One job in full, followed by the commands to follow it up. With a headline (`start` without
 * --wait) the exit-code line is left out: that process exits 0, "accepted".
 */
export function renderDescriptor(descriptor: JobDescriptor, now: number, headline?: string): string {
  const d = seedJob(descriptor);
  const lines: string[] = [];
  if (headline) lines.push(line(headline));
  lines.push(`${line(d.job_id)}  ${line(d.status)}${d.terminal ? '' : ' (not terminal)'}`);
  // each value on its line: a line break in a session name or an error cannot start a field of its own
  const field = (name: string, value: string) => lines.push(`  ${name.padEnd(10)} ${line(value)}`);
  field('type', d.type);
  field('session', d.session_name);
  if (d.parent_session_name) field('parent', d.parent_session_name);
  if (d.callback_of && d.callback_of.length > 0) field('callback', `delivers ${d.callback_of.join(', ')}`);
  field('agent', dash(d.agent_name));
  if (d.project_dir) field('project', d.project_dir);
  if (d.requires && Object.keys(d.requires).length > 0) field('requires', formatLabels(d.requires));
  field('created', `${d.created_at} (${ago(d.created_at, now)})`);
  if (d.status === 'pending' && d.pending_reason) field('waiting', d.pending_reason);
  if (d.started_at) field('started', d.started_at);
  if (d.completed_at) field('ended', d.completed_at);
  if (d.launcher_id) field('launcher', d.launcher_id);
  field('timeout', d.timeout_ms === null ? 'none' : formatDuration(d.timeout_ms));
  if (d.output_bytes > 0) field('output', `${d.output_bytes} bytes`);
  if (d.usage !== null || d.cost_usd !== null) field('usage', formatUsage(d.usage, d.cost_usd));
  if (!headline) field('exit code', `${d.exit_code} (${EXIT_MEANING[d.exit_code] ?? '?'})`);
  if (d.error) field('error', d.error_code ? `${d.error} (${d.error_code})` : d.error);
  if (d.result !== null) {
    lines.push('  result:');
    lines.push(...d.result.split('\n').map((l) => `    ${l}`));
  }
  lines.push('');
  if (!d.terminal) {
    lines.push(`  wait:      ${line(d.wait_command)}`);
    lines.push(`  status:    ${line(d.status_command)}   (poll every ${formatDuration(d.poll_interval_ms)})`);
    lines.push(`  cancel:    ${line(d.cancel_command)}`);
  }
  lines.push(`  output:    ${line(d.output_command)}`);
  return lines.join('\n');
}

/** Jobs as a table (list, wait with several jobs). */
export function renderJobTable(jobs: readonly Job[], now: number): string {
  return table(
    ['JOB', 'STATUS', 'TYPE', 'SESSION', 'AGENT', 'CREATED', 'RESULT/ERROR'],
    jobs.map(seedJob).map((j) => [
      j.job_id,
      j.status,
      jobKind(j),
      j.session_name,
      dash(j.agent_name),
      ago(j.created_at, now),
      preview(dash(j.error ?? j.result ?? (j.status === 'pending' ? j.pending_reason : null))),
    ]),
  );
}
