import {
  DeleteLauncherQuery,
  DeleteLauncherResponse,
  ErrorBody,
  Health,
  LauncherIdParams,
  LauncherList,
} from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';

/** The registry as seen by operators, and liveness. */
export const launchersRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator; startedAt: number }> = async (
  app,
  { core, startedAt },
) => {
  app.get(
    '/launchers',
    { schema: { operationId: 'listLaunchers', tags: ['launchers'], summary: 'List launchers', response: { 200: LauncherList } } },
    async () => await core.listLaunchers(),
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

  // public (`security: []`): load balancers and the Docker HEALTHCHECK call it without a token
  app.get(
    '/health',
    { schema: { operationId: 'getHealth', tags: ['operations'], summary: 'Liveness and counts', security: [], response: { 200: Health } } },
    async () => await core.health(startedAt),
  );
};
