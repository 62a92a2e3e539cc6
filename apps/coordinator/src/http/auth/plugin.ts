import type { Role } from '@agentq/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { agentTokenJobId, type Turn } from '../../core/agent-tokens.js';
import { CoordinatorError, launcherUnknown } from '../../core/errors.js';
import type { HostBinder } from '../../core/launchers.js';
import { agentRuleOf, checkAgentScope, type ScopeLookup } from './agent-scope.js';
import { launcherIdOf, type LauncherCredentials } from './launcher-credentials.js';
import { localRequestCheck, targetHost } from './local-origin.js';
import { routeOf } from '../route-of.js';
import { accessOf, type RouteAccess } from './route-access.js';
import type { TokenEntry, TokenStore } from './tokens.js';

/** Who is calling. */
export type Principal =
  /** authentication is off, or the route is public */
  | { readonly kind: 'anonymous' }
  /** a token from the token file */
  | { readonly kind: 'token'; readonly name: string; readonly role: Role }
  /** a launcher's own credential (`launcher_token`) */
  | { readonly kind: 'launcher'; readonly launcherId: string }
  /** a per-job agent token (`agt_…`): acts on its job's session subtree only (agent-scope.ts) */
  | { readonly kind: 'agent'; readonly jobId: string; readonly sessionName: string; readonly tokenHash: string };

const ANONYMOUS: Principal = { kind: 'anonymous' };

export interface AuthOptions {
  /** the token file's tokens; null = authentication off (loopback, or AUTH_DISABLED=true) */
  tokens: TokenStore | null;
  /**
   * Authentication is off because the coordinator listens on loopback only: then it answers only
   * requests addressed to a loopback name, from no origin or a loopback one (local-origin.ts).
   */
  localOnly: boolean;
  credentials: LauncherCredentials;
  /** the id of the launcher holding a job (null: none); throws job_not_found for an unknown job */
  jobHolder(jobId: string): Promise<string | null>;
  /** the active job an agent token belongs to (its session), undefined when it is not valid (any more) */
  verifyAgentToken(token: string): Promise<{ jobId: string; sessionName: string; tokenHash: string } | undefined>;
  /** what the agent scope check reads */
  scope: ScopeLookup;
}

export interface RegisteredRoute {
  method: string;
  url: string;
  access: RouteAccess;
}

export interface Auth {
  readonly enabled: boolean;
  /** every route as it was registered (HEAD included), with its access rule */
  readonly routes: readonly RegisteredRoute[];
  /**
   * The credential answered to a registration (undefined while authentication is off): `hash`,
   * when not null, is stored by the registration's transaction (LauncherCredentials.prepare);
   * `tokenFor` gives the credential once the launcher id is known.
   */
  launcherCredential(principal: Principal): { hash: string | null; tokenFor(launcherId: string): Promise<string> } | undefined;
  /**
   * What binds the host identity of a registration to its token: a `launcher`-role token's name
   * and whether another name is still in force as one. Undefined for anyone else (auth off, admin).
   */
  hostBinder(principal: Principal): HostBinder | undefined;
  /**
   * Re-read the token file (SIGHUP); throws when the file is unusable, keeping the current tokens.
   * The open requests of a token it removes (or gives another role) are cut: event streams, waits
   * and parked polls would otherwise go on for the token after it was revoked.
   */
  reload(): { added: string[]; removed: string[]; count: number; cut: number };
}

/**
 * Who is recorded in audit fields (`created_by`, `stopped_by`): the token's name, or
 * `agent:<job_id>` for an agent token (the turn that acted); null when there is none.
 */
export function actorOf(req: FastifyRequest): string | null {
  const p = req.principal;
  return p.kind === 'token' ? p.name : p.kind === 'agent' ? `agent:${p.jobId}` : null;
}

/** The agent token's turn that asks (undefined for any other caller): see Actor.turn. */
export function turnOf(req: FastifyRequest): Turn | undefined {
  const p = req.principal;
  return p.kind === 'agent' ? { jobId: p.jobId, tokenHash: p.tokenHash } : undefined;
}

/**
 * Whether the caller may report on a job held by `holder` (null: no launcher holds it). A
 * launcher may report only on its own jobs; tokens (admin) are not bound to a launcher. For
 * handlers that take reports about several jobs at once (`POST /launcher/sync`).
 */
export function mayReportOn(principal: Principal, holder: string | null): boolean {
  return principal.kind !== 'launcher' || holder === null || holder === principal.launcherId;
}

/**
 * Authentication and authorization for every route, from ROUTE_ACCESS. Call before any route
 * is added: it refuses routes that have no access rule. `onRequest` (before the body is even
 * read) answers 401 without a valid token and 403 when the role may not call the route;
 * `preHandler` (once the body is parsed) binds a launcher credential to its own launcher id and
 * jobs.
 */
export function installAuth(app: FastifyInstance, o: AuthOptions): Auth {
  const routes: RegisteredRoute[] = [];
  const enabled = o.tokens !== null;
  // the open requests of file tokens, with the entry that let each in (reload cuts the revoked)
  const open = new Map<FastifyRequest, TokenEntry>();
  // a primitive default (Fastify refuses shared objects); onRequest sets it on every request
  app.decorateRequest('principal', null as never);
  const isForeign = localRequestCheck();

  app.addHook('onRoute', (route: RouteOptions) => {
    const accessByMethod: Record<string, RouteAccess> = {};
    for (const method of [route.method].flat()) {
      const access = accessOf(method, route.url);
      if (!access) {
        throw new Error(
          `route ${method} ${route.url} has no access rule: add it to ROUTE_ACCESS in apps/coordinator/src/http/auth/route-access.ts`,
        );
      }
      accessByMethod[method] = access;
      routes.push({ method, url: route.url, access });
    }
    route.config = { ...(route.config as object | undefined), accessByMethod } as RouteOptions['config'];
  });

  // A callback hook: it runs on every request, and most are settled without waiting (no token
  // file, a public route, a token of the file); only launcher credentials and agent tokens are
  // looked up (identify).
  app.addHook('onRequest', (req, reply, done) => {
    req.principal = ANONYMOUS;
    if (!o.tokens) {
      const foreign = o.localOnly ? isForeign(targetHost(req.raw.url ?? '/', req.headers.host), req.headers.origin) : undefined;
      if (foreign !== undefined) {
        throw refuse(
          req,
          reply,
          'forbidden',
          `${foreign}: without AUTH_TOKENS_FILE this coordinator answers only requests for a loopback name ` +
            '(127.0.0.1, localhost, [::1]) from no origin or a loopback one, so that no web page can use it. ' +
            'Set AUTH_TOKENS_FILE to serve other names (see docs/operations.md)',
          'not a local request',
        );
      }
      return done();
    }
    const access = accessFor(req);
    // no such route: the 404 handler answers; public routes need no token
    if (!access || access.public) return done();
    const presented = bearer(req.headers.authorization);
    if (presented === undefined) {
      throw refuse(req, reply, 'unauthorized', 'this endpoint needs a token: send "Authorization: Bearer <token>"', 'no token');
    }
    const entry = o.tokens.verify(presented);
    if (entry) {
      req.principal = { kind: 'token', name: entry.name, role: entry.role };
      open.set(req, entry);
      reply.raw.once('close', () => open.delete(req));
      if (!access.roles.includes(entry.role)) {
        throw refuse(req, reply, 'forbidden', `a ${entry.role} token may not call ${req.method} ${routeOf(req).url}`, 'role', {
          role: entry.role,
          allowed_roles: access.roles,
        });
      }
      return done();
    }
    identify(req, reply, access, presented).then(() => done(), done);
  });

  /** Who presents a token that is not in the token file: a launcher, an agent, or no one. */
  const identify = async (req: FastifyRequest, reply: FastifyReply, access: RouteAccess, presented: string): Promise<void> => {
    const launcherId = await o.credentials.verify(presented);
    if (launcherId !== undefined) {
      req.principal = { kind: 'launcher', launcherId };
      if (!access.launcher) {
        throw refuse(req, reply, 'forbidden', `a launcher credential may only call the launcher endpoints`, 'launcher credential', {
          launcher_id: launcherId,
        });
      }
      return;
    }
    const agent = await o.verifyAgentToken(presented);
    if (agent !== undefined) {
      req.principal = { kind: 'agent', ...agent };
      if (!agentRuleOf(req.method, routeOf(req).url ?? '')) {
        throw refuse(req, reply, 'forbidden', `an agent token may not call ${req.method} ${routeOf(req).url}`, 'agent token', {
          agent_session_name: agent.sessionName,
          session_name: agent.sessionName,
        });
      }
      return;
    }
    const claimed = launcherIdOf(presented);
    if (claimed !== undefined && access.launcher) {
      // a launcher credential the coordinator no longer has (the launcher was removed, or the
      // coordinator restarted): the launcher must register again, as for an unknown id
      req.log.warn({ launcher_id: claimed }, 'launcher credential not valid (any more); asking it to register again');
      throw launcherUnknown(claimed, 'has no valid credential here');
    }
    const agentJob = agentTokenJobId(presented);
    if (agentJob !== undefined) {
      throw refuse(req, reply, 'unauthorized', `this agent token is not valid (any more): it works only while its job ${agentJob} runs`, 'agent token expired', {
        job_id: agentJob,
      });
    }
    throw refuse(req, reply, 'unauthorized', 'the token is not valid (unknown, or removed from the token file)', 'invalid token');
  };

  // a callback hook too: requests of tokens and anonymous ones pass at once
  app.addHook('preHandler', (req, reply, done) => {
    const p = req.principal;
    if (p.kind === 'agent') {
      checkAgent(req, reply, p).then(() => done(), done);
      return;
    }
    if (p.kind !== 'launcher') return done();
    const rule = accessFor(req)?.launcher;
    if (!rule) return done();
    checkLauncher(req, reply, p, rule).then(() => done(), done);
  });

  const checkAgent = async (req: FastifyRequest, reply: FastifyReply, p: Extract<Principal, { kind: 'agent' }>): Promise<void> => {
    const rule = agentRuleOf(req.method, routeOf(req).url ?? '')!;
    const refusal = await checkAgentScope(rule, { session: p.sessionName, params: req.params, query: req.query, body: req.body }, o.scope);
    if (refusal) throw refuse(req, reply, 'forbidden', refusal.message, 'outside the agent scope', refusal.details);
  };

  const checkLauncher = async (
    req: FastifyRequest,
    reply: FastifyReply,
    p: Extract<Principal, { kind: 'launcher' }>,
    rule: NonNullable<RouteAccess['launcher']>,
  ): Promise<void> => {
    const source = (rule.idIn === 'params' ? req.params : rule.idIn === 'query' ? req.query : req.body) as
      | { launcher_id?: unknown }
      | null
      | undefined;
    const named = source?.launcher_id;
    if (named !== p.launcherId) {
      throw refuse(req, reply, 'forbidden', `this credential belongs to launcher ${p.launcherId}; it cannot act for ${String(named)}`, 'other launcher', {
        launcher_id: p.launcherId,
      });
    }
    if (rule.ownJob) {
      const jobId = (req.params as { job_id: string }).job_id;
      const holder = await o.jobHolder(jobId);
      if (!mayReportOn(p, holder)) {
        throw refuse(req, reply, 'forbidden', `job ${jobId} is held by another launcher`, "another launcher's job", {
          job_id: jobId,
          launcher_id: p.launcherId,
        });
      }
    }
  };

  return {
    enabled,
    routes,
    launcherCredential(principal) {
      if (!enabled) return undefined;
      const prepared = o.credentials.prepare?.();
      if (prepared) return { hash: prepared.hash, tokenFor: async (launcherId) => prepared.tokenFor(launcherId) };
      return { hash: null, tokenFor: (launcherId) => o.credentials.issue(launcherId, principal.kind === 'token' ? principal.name : null) };
    },
    hostBinder(principal) {
      const tokens = o.tokens;
      if (!tokens || principal.kind !== 'token' || principal.role !== 'launcher') return undefined;
      return { tokenName: principal.name, valid: (name) => tokens.hasNamed(name, 'launcher') };
    },
    reload() {
      const tokens = o.tokens;
      if (!tokens) throw new Error('authentication is off (no AUTH_TOKENS_FILE): there is no token file to reload');
      const changes = tokens.reload();
      let cut = 0;
      for (const [req, entry] of open) {
        if (tokens.holds(entry)) continue;
        open.delete(req);
        cut++;
        req.log.info({ token_name: entry.name, route: `${req.method} ${routeOf(req).url ?? req.url}` }, 'token revoked: its open request is cut');
        req.raw.socket.destroy();
      }
      return { ...changes, cut };
    },
  };
}

/** The access rule of the request's route and method (installAuth put them on the route). */
export function accessFor(req: FastifyRequest): RouteAccess | undefined {
  const byMethod = (routeOf(req).config as { accessByMethod?: Record<string, RouteAccess> }).accessByMethod;
  return byMethod?.[req.method];
}

/** The token of an `Authorization: Bearer <token>` header (the scheme is case-insensitive). */
function bearer(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}

/** Log why a request was refused (never the token itself) and make its 401/403 error. */
function refuse(
  req: FastifyRequest,
  reply: FastifyReply,
  code: 'unauthorized' | 'forbidden',
  message: string,
  reason: string,
  details?: Record<string, unknown>,
): CoordinatorError {
  const p = req.principal;
  const who =
    p.kind === 'token' ? { token_name: p.name } : p.kind === 'launcher' ? { launcher_id: p.launcherId } : p.kind === 'agent' ? { agent_job_id: p.jobId } : {};
  req.log.warn({ ...who, reason, route: `${req.method} ${routeOf(req).url ?? req.url}` }, `request refused: ${code}`);
  if (code === 'unauthorized') reply.header('www-authenticate', 'Bearer realm="agentq"');
  return new CoordinatorError(code, message, details);
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal;
  }
}
