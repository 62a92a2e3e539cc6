import type { Job, JobStatus } from '@agentq/protocol';
import { byCreation, type Created } from './order.js';

/** The job statuses, in lifecycle order (kept here so the bundle does not carry TypeBox). */
export const JOB_STATUSES = [
  'pending',
  'claimed',
  'running',
  'stopping',
  'completed',
  'failed',
  'stopped',
  'interrupted',
  'timed_out',
] as const satisfies readonly JobStatus[];
// fails to compile when the protocol gains a status this list lacks
const _allStatuses: Exclude<JobStatus, (typeof JOB_STATUSES)[number]> extends never ? true : never = true;
void _allStatuses;

const TERMINAL: ReadonlySet<JobStatus> = new Set(['completed', 'failed', 'stopped', 'interrupted', 'timed_out']);
export const isTerminal = (status: JobStatus): boolean => TERMINAL.has(status);

/**
 * Whether `incoming` is at least as new as `known`: a list fetched while events flow, or the
 * event window replayed at connection, must never move a job backwards.
 */
export function isFresher(incoming: Job, known: Job): boolean {
  if (isTerminal(known.status) && !isTerminal(incoming.status)) return false;
  return incoming.updated_at >= known.updated_at;
}

/**
 * The newer of two versions of one job. Events may leave the prompt out (`GET /events` sends
 * prompts only with `?include=prompt`): the prompt read with `GET /jobs/{id}` is kept, and taken
 * from an older answer too when the page has none yet (an event came before the answer).
 */
export function mergeJob(known: Job | undefined, incoming: Job): Job {
  if (known === undefined || known.job_id !== incoming.job_id) return incoming;
  if (!isFresher(incoming, known)) return known.prompt || !incoming.prompt ? known : { ...known, prompt: incoming.prompt };
  return incoming.prompt ? incoming : { ...incoming, prompt: known.prompt };
}

/**
 * Whether `a` comes before `b` in the lists' order, newest first: by `created_at`, then, for rows
 * created at the same instant (a batch), by `seq`, the creation order the API pages by. Without a
 * `seq` on either (a coordinator from before it), a tie counts as before.
 */
export function listedBefore(a: Created, b: Created): boolean {
  const order = byCreation(a, b);
  return order > 0 || (order === 0 && (a.seq === undefined || b.seq === undefined));
}

/** What the jobs list shows: `status` is a status, `active` (not terminal), `finished`, or all. */
export interface JobFilter {
  status: '' | 'active' | 'finished' | JobStatus;
  session: string;
  launcher: string;
}

export function filterFromQuery(q: URLSearchParams): JobFilter {
  const status = q.get('status') ?? '';
  const known = status === 'active' || status === 'finished' || (JOB_STATUSES as readonly string[]).includes(status);
  return { status: known ? (status as JobFilter['status']) : '', session: q.get('session') ?? '', launcher: q.get('launcher') ?? '' };
}

export function filterToQuery(f: JobFilter): string {
  const q = new URLSearchParams();
  if (f.status) q.set('status', f.status);
  if (f.session) q.set('session', f.session);
  if (f.launcher) q.set('launcher', f.launcher);
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** The `GET /jobs` query of a filter. */
export function filterToApi(f: JobFilter): Record<string, string | undefined> {
  return {
    status: f.status === 'active' || f.status === 'finished' || f.status === '' ? undefined : f.status,
    terminal: f.status === 'active' ? 'false' : f.status === 'finished' ? 'true' : undefined,
    session_name: f.session || undefined,
    launcher_id: f.launcher || undefined,
  };
}

export function matchesFilter(job: Job, f: JobFilter): boolean {
  if (f.status === 'active' && isTerminal(job.status)) return false;
  if (f.status === 'finished' && !isTerminal(job.status)) return false;
  if (f.status !== '' && f.status !== 'active' && f.status !== 'finished' && job.status !== f.status) return false;
  if (f.session && job.session_name !== f.session) return false;
  if (f.launcher && job.launcher_id !== f.launcher) return false;
  return true;
}

/** A job event as the lists apply it: `evicted` for `job.evicted` (history retention deleted it). */
export interface JobEvent {
  job: Job;
  evicted: boolean;
}

/** A page of the jobs list, newest first. */
export interface JobPage {
  rows: Job[];
  /** the cursor of the next (older) page, null on the last page */
  next: string | null;
  /** the first page follows new jobs live; later pages only take jobs within their range */
  first: boolean;
  /** rows came in live and pushed the last ones off: `next` is stale and must be read again */
  shifted: boolean;
}

/**
 * Apply one job event to a page: update or drop its row, or insert a job that now belongs on
 * it (a new job on the first page, a job that now matches the filter within the page's range,
 * which on the last page reaches down to the oldest job). The page never grows past `size`
 * rows: those it pushes off are marked (`shifted`), so that paging on reads the cursor again.
 */
export function applyJob(page: JobPage, job: Job, evicted: boolean, filter: JobFilter, size: number): JobPage {
  const i = page.rows.findIndex((r) => r.job_id === job.job_id);
  if (i >= 0) {
    const known = page.rows[i]!;
    if (!evicted && !isFresher(job, known)) return page;
    const rows = page.rows.slice();
    if (evicted || !matchesFilter(job, filter)) rows.splice(i, 1);
    else rows[i] = mergeJob(known, job);
    return { ...page, rows };
  }
  if (evicted || !matchesFilter(job, filter)) return page;
  const newest = page.rows[0];
  const oldest = page.rows[page.rows.length - 1];
  const belowNewest = page.first || (newest !== undefined && job.created_at <= newest.created_at);
  const aboveOldest = oldest === undefined || page.next === null || job.created_at >= oldest.created_at;
  if (!belowNewest || !aboveOldest) return page;
  const rows = page.rows.slice();
  // among jobs created at the same instant, at its place in creation order: first among them,
  // it was listed in the order the events came, not the API's (another after a reload)
  let at = rows.findIndex((r) => listedBefore(job, r));
  if (at < 0) at = rows.length;
  rows.splice(at, 0, job);
  let shifted = page.shifted;
  if (rows.length > size) {
    rows.length = size;
    shifted = true;
  }
  return { ...page, rows, shifted };
}
