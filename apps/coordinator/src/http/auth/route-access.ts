import { Roles, type Role } from '@agentq/protocol';

/**
 * Who may call each route: the single source of the authorization checks, of the role table in
 * docs/operations.md (a test compares them) and of the route x role test. A route that has no
 * entry here makes the app refuse to build, so a new endpoint cannot be left open by accident.
 *
 * Roles: `admin` everything; `client` creates, reads, waits on and stops jobs and sessions;
 * `reader` only reads (GET endpoints, `/events`, and `POST /jobs/wait`, which changes nothing);
 * `launcher` only registers launchers. What a launcher does after registering it does with its
 * own credential (`launcher_token`), which works for that launcher's id only.
 */
export interface RouteAccess {
  /** anyone may call it, with or without a token: its answers hold no secrets */
  readonly public?: true;
  /** token roles that may call it */
  readonly roles: readonly Role[];
  /**
   * The per-launcher credential may call it, for its own launcher only: `idIn` says where the
   * request names the launcher (`launcher_id` in the query, the body or the path). With `ownJob`,
   * the `job_id` in the path must also be a job that launcher holds (or no launcher holds).
   */
  readonly launcher?: { readonly idIn: 'query' | 'body' | 'params'; readonly ownJob?: true };
  /** counted by the per-token limit on job creation (JOBS_RATE_LIMIT_PER_MINUTE) */
  readonly rateLimited?: true;
  /** what the route is for, in the docs table */
  readonly summary: string;
}

const READ: readonly Role[] = ['admin', 'client', 'reader'];
const WRITE: readonly Role[] = ['admin', 'client'];
const ADMIN: readonly Role[] = ['admin'];
const PUBLIC = { public: true, roles: [] } as const;
const report = (summary: string): RouteAccess => ({ roles: ADMIN, launcher: { idIn: 'body', ownJob: true }, summary });

/** Keyed `METHOD path` with Fastify's path syntax (`:param`, `*`). HEAD follows GET. */
export const ROUTE_ACCESS: Readonly<Record<string, RouteAccess>> = {
  'POST /jobs': { roles: WRITE, rateLimited: true, summary: 'create a job' },
  'POST /jobs/batch': { roles: WRITE, rateLimited: true, summary: 'create jobs, all or none' },
  'GET /jobs': { roles: READ, summary: 'list jobs' },
  'POST /jobs/wait': { roles: READ, summary: 'wait for any or all of several jobs' },
  'GET /jobs/:job_id': { roles: READ, summary: 'read a job' },
  'GET /jobs/:job_id/wait': { roles: READ, summary: 'wait for a job to end' },
  'GET /jobs/:job_id/output': { roles: READ, summary: "read a job's output" },
  'POST /jobs/:job_id/stop': { roles: WRITE, summary: 'stop a job' },

  'GET /sessions': { roles: READ, summary: 'list sessions' },
  'GET /sessions/:session_name': { roles: READ, summary: 'read a session' },
  'POST /sessions/:session_name/stop': { roles: WRITE, summary: "stop a session's jobs" },
  'POST /sessions/:session_name/messages': { roles: WRITE, summary: 'send a message to a session' },

  'POST /launcher/register': { roles: ['admin', 'launcher'], summary: 'register a launcher (answers its launcher_token)' },
  'GET /launcher/jobs': { roles: ADMIN, launcher: { idIn: 'query' }, summary: 'long-poll for work' },
  'POST /launcher/heartbeat': { roles: ADMIN, launcher: { idIn: 'body' }, summary: 'heartbeat' },
  'POST /launcher/sync': {
    roles: ADMIN,
    // each report inside names its job: the handler checks them with mayReportOn()
    launcher: { idIn: 'body' },
    summary: 'report and poll in one call',
  },
  'POST /launcher/jobs/:job_id/started': report('report the job started'),
  'POST /launcher/jobs/:job_id/completed': report('report the job completed'),
  'POST /launcher/jobs/:job_id/failed': report('report the job failed'),
  'POST /launcher/jobs/:job_id/stopped': report('report the job stopped'),
  'POST /launcher/jobs/:job_id/output': report("send the job's output"),

  'GET /launchers': { roles: READ, summary: 'list launchers' },
  'DELETE /launchers/:launcher_id': {
    roles: ADMIN,
    launcher: { idIn: 'params' },
    summary: 'deregister a launcher (a launcher: itself only)',
  },

  'GET /events': { roles: READ, summary: 'lifecycle events (Server-Sent Events)' },
  'GET /metrics': { roles: READ, summary: 'Prometheus metrics' },
  'GET /health': { ...PUBLIC, summary: 'liveness' },
  'GET /ready': { ...PUBLIC, summary: 'readiness' },
  'GET /openapi.json': { ...PUBLIC, summary: 'the OpenAPI document' },
  'GET /': { ...PUBLIC, summary: 'dashboard (static files)' },
  'GET /index.html': { ...PUBLIC, summary: 'dashboard (static files)' },
};

/** Every route under these paths is public (API reference pages, dashboard assets: no secrets in them). */
export const PUBLIC_PREFIXES: readonly string[] = ['/docs', '/assets'];

/** The access entry of a route, or undefined when it has none (a bug: see ROUTE_ACCESS). */
export function accessOf(method: string, url: string): RouteAccess | undefined {
  const m = method === 'HEAD' ? 'GET' : method;
  const exact = ROUTE_ACCESS[`${m} ${url}`];
  if (exact) return exact;
  if ((m === 'GET' || m === 'HEAD') && PUBLIC_PREFIXES.some((p) => url === p || url.startsWith(`${p}/`))) {
    return { ...PUBLIC, summary: url.startsWith('/assets') ? 'dashboard (static files)' : 'API reference' };
  }
  return undefined;
}

/** Whether a token of `role` may call the route. */
export function roleMay(access: RouteAccess, role: Role): boolean {
  return access.public === true || access.roles.includes(role);
}

/**
 * The role table of docs/operations.md, in Markdown, made from ROUTE_ACCESS. A test checks that
 * the docs hold exactly this text; `npm run docs:roles` writes it there.
 */
export function renderRoleTable(): string {
  const yes = '✓';
  const head = ['Method', 'Path', ...Roles.map((r) => `\`${r}\``), 'launcher credential', 'What for'];
  const rows = Object.entries(ROUTE_ACCESS).map(([key, a]) => {
    const [method, url] = key.split(' ') as [string, string];
    const path = url.replace(/:([A-Za-z_]+)/g, '{$1}');
    const cells = a.public
      ? Roles.map(() => 'public')
      : Roles.map((r) => (a.roles.includes(r) ? yes : ''));
    const own =
      a.public === true
        ? 'public'
        : a.launcher
          ? a.launcher.ownJob
            ? 'own id, own jobs'
            : a.launcher.idIn === 'params'
              ? 'itself'
              : 'own id'
          : '';
    return [method, `\`${path}\``, ...cells, own, a.summary];
  });
  for (const prefix of PUBLIC_PREFIXES) {
    const summary = accessOf('GET', `${prefix}/`)?.summary ?? '';
    rows.push(['GET', `\`${prefix}\`, \`${prefix}/*\``, ...Roles.map(() => 'public'), 'public', summary]);
  }
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}
