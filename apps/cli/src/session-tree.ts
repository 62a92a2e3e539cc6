import type { AgentqClient } from '@agentq/client';
import type { CliSessionTree, Job } from '@agentq/protocol';
import { limiter } from './limiter.js';
import { ago, dash, formatCost, formatUsage, hasUsage, jobKind, seedJob } from './render.js';
import { preview, printableLine as line, truncate } from './table.js';

/** Jobs fetched per session for the tree (newest ones; `more_jobs` says when there are more). */
const JOBS_PER_SESSION = 200;

/**
 * Fetch a session and, level by level, its descendants with their jobs: `GET /sessions/{name}`
 * for each session, `GET /jobs?session_name=` for its jobs. Depth is bounded by the coordinator
 * (a parent chain has at most MAX_SESSION_DEPTH levels), so this is a handful of rounds.
 */
export function fetchSessionTree(client: AgentqClient, name: string, signal?: AbortSignal): Promise<CliSessionTree> {
  return fetchNode(client, name, signal, limiter(TREE_REQUESTS));
}

/**
 * Requests in flight at once for one tree: a session may have hundreds of children, and the
 * coordinator is not to be flooded with their requests.
 */
const TREE_REQUESTS = 4;

async function fetchNode(
  client: AgentqClient,
  name: string,
  signal: AbortSignal | undefined,
  limit: <T>(fn: () => Promise<T>) => Promise<T>,
): Promise<CliSessionTree> {
  const session = await limit(() => client.getSession(name, { signal }));
  const page = await limit(() => client.listJobs({ session_name: name, limit: JOBS_PER_SESSION }, { signal }));
  const children = await Promise.all(session.children.map((child) => fetchNode(client, child, signal, limit)));
  return {
    session,
    // the coordinator lists newest first; a tree reads oldest first
    jobs: [...page.jobs].reverse(),
    more_jobs: page.next_cursor !== null,
    children,
  };
}

/** Job id → the session it belongs to, over the whole tree (to name what a callback delivers). */
function sessionsOfJobs(tree: CliSessionTree, into = new Map<string, string>()): Map<string, string> {
  for (const job of tree.jobs) into.set(job.job_id, job.session_name);
  for (const child of tree.children) sessionsOfJobs(child, into);
  return into;
}

/**
 * The tree as text: each session with its status and usage, its jobs (callback resumes marked
 * with the child sessions whose outcome they deliver), then its child sessions.
 *
 *   review  busy  agent coder · 1,200 in · 340 out · $0.0123 · tree $0.0456
 *   ├─ job_0a1b2c3d4e5f  start     completed    4m 05s ago  looked at 3 files
 *   ├─ job_1b2c3d4e5f6a  callback  running      1m 02s ago  ← tests
 *   └─ tests  idle  last completed
 *      └─ job_2c3d4e5f6a7b  start     completed    3m 30s ago  all green
 */
export function renderSessionTree(tree: CliSessionTree, now: number): string {
  const owners = sessionsOfJobs(tree);
  const lines: string[] = [];
  const walk = (node: CliSessionTree, lead: string, branch: string) => {
    lines.push(`${lead}${branch}${sessionLine(node)}`);
    const childLead = lead + (branch === '' ? '' : branch === '└─ ' ? '   ' : '│  ');
    // oldest first: the jobs left out (the oldest) would come before the ones shown; so would the
    // children a session's `children` left out (it names the newest MAX_SESSION_LIST_ITEMS)
    const s = node.session;
    // (a coordinator from before the count sends none, and every child)
    const olderChildren = s.children_count === undefined ? 0 : s.children_count - node.children.length;
    const items: Array<{ job: Job } | { more: true } | { olderChildren: number } | { child: CliSessionTree }> = [
      ...(node.more_jobs ? [{ more: true as const }] : []),
      ...node.jobs.map((job) => ({ job })),
      ...(olderChildren > 0 ? [{ olderChildren }] : []),
      ...node.children.map((child) => ({ child })),
    ];
    items.forEach((item, i) => {
      const last = i === items.length - 1;
      const mark = last ? '└─ ' : '├─ ';
      if ('child' in item) walk(item.child, childLead, mark);
      else if ('more' in item)
        lines.push(
          `${childLead}${mark}… older jobs not shown (agentq list --all --session ${line(s.session_name)})`,
        );
      else if ('olderChildren' in item)
        lines.push(
          `${childLead}${mark}… ${item.olderChildren} older child session(s) not shown (agentq sessions --parent ${line(s.session_name)})`,
        );
      else lines.push(`${childLead}${mark}${jobLine(item.job, owners, now)}`);
    });
  };
  walk(tree, '', '');
  return lines.join('\n');
}

function sessionLine(node: CliSessionTree): string {
  const s = node.session;
  const parts = [`${line(s.session_name)}  ${line(s.status)}`];
  const facts: string[] = [];
  if (s.agent_name) facts.push(`agent ${line(s.agent_name)}`);
  if (s.status === 'idle' && s.last_job_status) facts.push(`last ${line(s.last_job_status)}`);
  // (lists an older coordinator may not send)
  const callbacks = s.pending_callbacks?.length ?? 0;
  const messages = s.pending_messages?.length ?? 0;
  if (callbacks > 0) facts.push(`${callbacks} callback(s) waiting`);
  if (messages > 0) facts.push(`${messages} message(s) waiting`);
  if (hasUsage(s.usage, s.cost_usd)) facts.push(formatUsage(s.usage, s.cost_usd));
  if (node.children.length > 0 && hasUsage(s.tree_usage, s.tree_cost_usd))
    facts.push(`tree ${formatCost(s.tree_cost_usd ?? 0)}`);
  if (facts.length > 0) parts.push(facts.join(' · '));
  return parts.join('  ');
}

function jobLine(sent: Job, owners: Map<string, string>, now: number): string {
  const job = seedJob(sent);
  const kind = jobKind(job);
  let note: string;
  if (kind === 'callback') {
    const from = [...new Set((job.callback_of ?? []).map((id) => owners.get(id) ?? id))];
    note = `← ${from.map(line).join(', ')}`;
  } else {
    note = dash(job.error ?? job.result ?? (job.status === 'pending' ? job.pending_reason : null));
  }
  const usage = hasUsage(job.usage, job.cost_usd) ? `  ${formatUsage(job.usage, job.cost_usd)}` : '';
  return `${line(job.job_id)}  ${kind.padEnd(8)}  ${line(job.status).padEnd(11)}  ${ago(job.created_at, now)}  ${truncate(line(preview(note)), 60)}${usage}`;
}
