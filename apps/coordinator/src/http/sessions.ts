import {
  ErrorBody,
  ListSessionsQuery,
  SendMessageRequest,
  SendMessageResponse,
  Session,
  SessionList,
  SessionNameParams,
  StopSessionQuery,
  StopSessionResponse,
} from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { untilClosed } from './abort.js';
import { actorOf, turnOf } from './auth/plugin.js';
import { IdempotencyHeaders } from './idempotency-key.js';

export const sessionRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator }> = async (app, { core }) => {
  app.get(
    '/sessions',
    { schema: { operationId: 'listSessions', tags: ['sessions'], summary: 'List sessions', querystring: ListSessionsQuery, response: { 200: SessionList, 400: ErrorBody } } },
    async (req, reply) => await core.listSessions(req.query, untilClosed(reply)),
  );
  app.get(
    '/sessions/:session_name',
    { schema: { operationId: 'getSession', tags: ['sessions'], summary: 'Get a session', params: SessionNameParams, response: { 200: Session, 404: ErrorBody } } },
    async (req) => await core.getSession(req.params.session_name),
  );
  app.post(
    '/sessions/:session_name/stop',
    {
      schema: {
        operationId: 'stopSession',
        tags: ['sessions'],
        summary: "Stop a session's active and pending jobs (tree=true: and those of every session under it)",
        params: SessionNameParams,
        querystring: StopSessionQuery,
        headers: IdempotencyHeaders,
        response: { 200: StopSessionResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody },
      },
    },
    async (req) => {
      const tree = req.query.tree === 'true';
      const key = req.headers['idempotency-key'];
      const answer = await core.stopSession(req.params.session_name, { actor: actorOf(req), tree, ...(key !== undefined ? { idempotencyKey: key } : {}) });
      const what = answer.replayed ? 'session stop replayed (Idempotency-Key)' : 'session stop requested';
      req.log.info({ session_name: answer.session_name, tree, stopped: answer.stopped.length, stopped_by: actorOf(req) }, what);
      return answer;
    },
  );
  app.post(
    '/sessions/:session_name/messages',
    {
      schema: {
        operationId: 'sendMessage',
        tags: ['sessions'],
        summary: 'Send a message to a session (delivered with its next turn)',
        params: SessionNameParams,
        body: SendMessageRequest,
        response: { 200: SendMessageResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody },
      },
    },
    async (req) => {
      const answer = await core.sendMessage(req.params.session_name, req.body.text, { actor: actorOf(req), turn: turnOf(req) });
      req.log.info({ session_name: answer.session_name, message_id: answer.message_id, job_id: answer.job_id }, 'message queued');
      return answer;
    },
  );
};
