import { ErrorBody, ListSessionsQuery, Session, SessionList, SessionNameParams, StopSessionResponse } from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { actorOf } from './auth/plugin.js';

export const sessionRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator }> = async (app, { core }) => {
  app.get(
    '/sessions',
    { schema: { querystring: ListSessionsQuery, response: { 200: SessionList, 400: ErrorBody } } },
    async (req) => core.listSessions(req.query),
  );
  app.get(
    '/sessions/:session_name',
    { schema: { params: SessionNameParams, response: { 200: Session, 404: ErrorBody } } },
    async (req) => core.getSession(req.params.session_name),
  );
  app.post(
    '/sessions/:session_name/stop',
    { schema: { params: SessionNameParams, response: { 200: StopSessionResponse, 404: ErrorBody, 409: ErrorBody } } },
    async (req) => {
      const answer = core.stopSession(req.params.session_name, actorOf(req));
      req.log.info({ session_name: answer.session_name, stopped: answer.stopped.length, stopped_by: actorOf(req) }, 'session stop requested');
      return answer;
    },
  );
};
