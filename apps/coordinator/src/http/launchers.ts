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
  app.get('/launchers', { schema: { response: { 200: LauncherList } } }, async () => core.listLaunchers());

  app.delete(
    '/launchers/:launcher_id',
    {
      schema: {
        params: LauncherIdParams,
        querystring: DeleteLauncherQuery,
        response: { 200: DeleteLauncherResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody },
      },
    },
    async (req) => {
      const { launcher_id } = req.params;
      const { outcome } = core.deleteLauncher(launcher_id, req.query.self === 'true');
      req.log.info({ launcher_id, outcome, by: req.principal.kind === 'token' ? req.principal.name : req.principal.kind }, 'launcher deregistration');
      return { ok: true as const, launcher_id, outcome };
    },
  );

  app.get('/health', { schema: { response: { 200: Health } } }, async () => core.health(startedAt));
};
