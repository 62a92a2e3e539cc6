import {
  DeleteLauncherQuery,
  DeleteLauncherResponse,
  ErrorBody,
  Health,
  LauncherIdParams,
  LauncherList,
  ListLaunchersQuery,
  Ready,
} from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { CoordinatorError } from '../core/errors.js';
import { untilClosed } from './abort.js';

/** The registry as seen by operators, liveness and readiness. */
export const launchersRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator; startedAt: number; overloaded: () => boolean }> = async (
  app,
  { core, startedAt, overloaded },
) => {
  app.get(
    '/launchers',
    {
      schema: {
        operationId: 'listLaunchers',
        tags: ['launchers'],
        summary: 'List launchers, in registration order',
        querystring: ListLaunchersQuery,
        response: { 200: LauncherList, 400: ErrorBody },
      },
    },
    async (req, reply) => await core.listLaunchers(req.query, untilClosed(reply)),
  );

  app.delete(
    '/launchers/:launcher_id',
    {
      schema: {
        operationId: 'deleteLauncher',
        tags: ['launchers'],
        summary: 'Deregister a launcher',
        params: LauncherIdParams,
        querystring: DeleteLauncherQuery,
        response: { 200: DeleteLauncherResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (req) => {
      const { launcher_id } = req.params;
      const { outcome } = await core.deleteLauncher(launcher_id, req.query.self === 'true');
      req.log.info({ launcher_id, outcome, by: req.principal.kind === 'token' ? req.principal.name : req.principal.kind }, 'launcher deregistration');
      return { ok: true as const, launcher_id, outcome };
    },
  );

  // public (`security: []`): load balancers and the Docker HEALTHCHECK call it without a token.
  // Liveness: answered even when the overload protection refuses everything else (it says so),
  // so that an orchestrator does not restart a coordinator for being busy.
  app.get(
    '/health',
    { schema: { operationId: 'getHealth', tags: ['operations'], summary: 'Liveness and counts', security: [], response: { 200: Health } } },
    async () => ({ ...(await core.health(startedAt)), overloaded: overloaded() }),
  );

  // Readiness: 503 `overloaded` while the overload protection refuses requests, 503
  // `shutting_down` while the coordinator closes (both from the hooks every route has), 503
  // `storage_unavailable` while the store cannot take changes.
  app.get(
    '/ready',
    {
      schema: {
        operationId: 'getReady',
        tags: ['operations'],
        summary: 'Readiness: whether the coordinator takes requests now',
        security: [],
        response: { 200: Ready, 503: ErrorBody },
      },
    },
    async () => {
      // a coordinator cut off from its store refuses every change: a load balancer sends elsewhere
      if (!core.store.available) {
        throw new CoordinatorError('storage_unavailable', 'the store (the database) is unavailable', { retry_after_seconds: 1 });
      }
      return { ready: true as const };
    },
  );
};
