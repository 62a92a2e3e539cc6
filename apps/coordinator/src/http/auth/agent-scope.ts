import { MAX_SESSION_DEPTH, type CreateJobRequest } from '@agentq/protocol';

/**
 * What a per-job agent token (`agt_…`, core/agent-tokens.ts) may do: act on its job's session
 * and the sessions below it — its **subtree** — and nothing else. Per route:
 *
 * - create: `start_session` only with `parent_session_name` in the subtree (children,
 *   grandchildren, …); `resume_session` only of a session strictly below its own;
 * - read, wait, output, stop: jobs of sessions in the subtree; lists only when filtered to the
 *   subtree (`GET /jobs?session_name=`, `GET /sessions?parent=`);
 * - message, stop, read a session: sessions in the subtree.
 *
 * Every other route (launchers, events, metrics, the launcher protocol) is refused. An unknown
 * job or session is left to the handler (404), so the answer says what is wrong.
 *
 * Kept apart from ROUTE_ACCESS (the role table): a route missing here is simply refused to agents.
 */
export type AgentRule =
  /** POST /jobs: the body is one create request */
  | { readonly kind: 'create' }
  /** POST /jobs/batch: `jobs` in the body, each a create request */
  | { readonly kind: 'create-batch' }
  /** a job named by `job_id` in the path */
  | { readonly kind: 'job' }
  /** POST /jobs/wait: every id of `job_ids` in the body */
  | { readonly kind: 'jobs' }
  /** a session named in the path (`session_name`) or, for a list, required in the query */
  | { readonly kind: 'session'; readonly in: 'params' | 'query'; readonly field: 'session_name' | 'parent' };

export const AGENT_ACCESS: Readonly<Record<string, AgentRule>> = {
  'POST /jobs': { kind: 'create' },
  'POST /jobs/batch': { kind: 'create-batch' },
  'GET /jobs': { kind: 'session', in: 'query', field: 'session_name' },
  'POST /jobs/wait': { kind: 'jobs' },
  'GET /jobs/:job_id': { kind: 'job' },
  'GET /jobs/:job_id/wait': { kind: 'job' },
  'GET /jobs/:job_id/output': { kind: 'job' },
  'POST /jobs/:job_id/stop': { kind: 'job' },
  'GET /sessions': { kind: 'session', in: 'query', field: 'parent' },
  'GET /sessions/:session_name': { kind: 'session', in: 'params', field: 'session_name' },
  'POST /sessions/:session_name/stop': { kind: 'session', in: 'params', field: 'session_name' },
  'POST /sessions/:session_name/messages': { kind: 'session', in: 'params', field: 'session_name' },
};

/** The rule of a route for agent tokens (HEAD follows GET); undefined: agents may not call it. */
export function agentRuleOf(method: string, url: string): AgentRule | undefined {
  return AGENT_ACCESS[`${method === 'HEAD' ? 'GET' : method} ${url}`];
}

/** What the scope check reads from the store. */
export interface ScopeLookup {
  /** the session of a job; undefined for an unknown job */
  sessionOfJob(jobId: string): Promise<string | undefined>;
  /** a session's parent (null for a root); undefined for an unknown session */
  parentOf(sessionName: string): Promise<string | null | undefined>;
}

/** The agent's session and the request, as the check needs them. */
export interface ScopeRequest {
  session: string;
  params: unknown;
  query: unknown;
  body: unknown;
}

/** Why a request is out of scope (a 403's message and details); null when it is allowed. */
export interface Refusal {
  message: string;
  details: Record<string, unknown>;
}

/**
 * Where `name` stands relative to `root`: 'self', 'below' (a descendant), 'outside', or
 * 'unknown' (no such session). Walks the parent chain up, at most MAX_SESSION_DEPTH steps.
 */
export async function placeOf(lookup: ScopeLookup, root: string, name: string): Promise<'self' | 'below' | 'outside' | 'unknown'> {
  if (name === root) return 'self';
  let parent = await lookup.parentOf(name);
  if (parent === undefined) return 'unknown';
  for (let step = 0; parent !== null && step < MAX_SESSION_DEPTH; step++) {
    if (parent === root) return 'below';
    const next: string | null | undefined = await lookup.parentOf(parent);
    if (next === undefined) return 'outside';
    parent = next;
  }
  return 'outside';
}

/** Check a request of an agent whose job belongs to `r.session` against the route's rule. */
export async function checkAgentScope(rule: AgentRule, r: ScopeRequest, lookup: ScopeLookup): Promise<Refusal | null> {
  const own = r.session;
  const outside = (what: string, details: Record<string, unknown>): Refusal => ({
    message: `an agent token of session ${own} may only act on ${own} and the sessions below it; ${what}`,
    details: { agent_session_name: own, ...details },
  });
  const inSubtree = async (name: string) => (await placeOf(lookup, own, name)) !== 'outside';

  switch (rule.kind) {
    case 'create':
    case 'create-batch': {
      const reqs =
        rule.kind === 'create'
          ? [r.body as CreateJobRequest]
          : ((r.body as { jobs?: CreateJobRequest[] } | null)?.jobs ?? []);
      for (const [i, req] of reqs.entries()) {
        const at = rule.kind === 'create' ? '' : `jobs[${i}].`;
        if (req.type === 'start_session') {
          const parent = req.parent_session_name ?? null;
          if (parent === null) {
            return outside(`${at}parent_session_name must name ${own} or a session below it (an agent starts children, not roots)`, {
              field: `${at}parent_session_name`,
            });
          }
          // an unknown parent is the handler's 404 (parent_session_not_found)
          if (!(await inSubtree(parent))) return outside(`session ${parent} is not one of them`, { field: `${at}parent_session_name`, session_name: parent });
          // a name taken outside its subtree: refused here, so the answer (409 session_exists)
          // does not say whether that session is busy or idle
          if ((await placeOf(lookup, own, req.session_name)) === 'outside') {
            return outside(`session ${req.session_name} exists, and is not one of them`, { field: `${at}session_name`, session_name: req.session_name });
          }
        } else {
          const place = await placeOf(lookup, own, req.session_name);
          if (place === 'self') {
            return outside(`it cannot queue a resume of its own session (send it a message instead)`, {
              field: `${at}session_name`,
              session_name: req.session_name,
            });
          }
          if (place === 'outside') return outside(`session ${req.session_name} is not one of them`, { field: `${at}session_name`, session_name: req.session_name });
        }
      }
      return null;
    }
    case 'job':
    case 'jobs': {
      const ids = rule.kind === 'job' ? [(r.params as { job_id: string }).job_id] : ((r.body as { job_ids?: string[] } | null)?.job_ids ?? []);
      for (const id of new Set(ids)) {
        const session = await lookup.sessionOfJob(id);
        // an unknown job: 404 (or `not_found` in a wait), as for anyone
        if (session !== undefined && !(await inSubtree(session))) {
          // the session it belongs to is not said: outside its subtree, an agent learns nothing more
          return outside(`job ${id} belongs to a session outside it`, { job_id: id });
        }
      }
      return null;
    }
    case 'session': {
      const source = (rule.in === 'params' ? r.params : r.query) as Record<string, string | undefined> | null;
      const name = source?.[rule.field];
      if (name === undefined) {
        return outside(`list with ${rule.field}=<a session in its subtree>`, { field: rule.field });
      }
      if (!(await inSubtree(name))) return outside(`session ${name} is not one of them`, { field: rule.field, session_name: name });
      return null;
    }
  }
}

/** What each rule allows, in words, for the docs table. */
function ruleText(rule: AgentRule): string {
  switch (rule.kind) {
    case 'create':
    case 'create-batch':
      return '`start_session` with `parent_session_name` in its subtree; `resume_session` of a session below its own';
    case 'job':
      return 'jobs of sessions in its subtree';
    case 'jobs':
      return 'when every known job in `job_ids` is of a session in its subtree';
    case 'session':
      return rule.in === 'query' ? `only with \`${rule.field}=\` a session in its subtree` : 'a session in its subtree';
  }
}

/**
 * The agent-token table of docs/operations.md, in Markdown, made from AGENT_ACCESS. A test checks
 * that the docs hold exactly this text; `npm run docs:roles` writes it there.
 */
export function renderAgentTable(): string {
  const rows = Object.entries(AGENT_ACCESS).map(([key, rule]) => {
    const [method, url] = key.split(' ') as [string, string];
    return `| ${method} | \`${url.replace(/:([A-Za-z_]+)/g, '{$1}')}\` | ${ruleText(rule)} |`;
  });
  return ['| Method | Path | An agent token may call it for |', '| --- | --- | --- |', ...rows, '| any other | | refused (403 `forbidden`) |'].join('\n');
}
