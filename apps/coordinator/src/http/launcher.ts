import {
  CompletedReport,
  ErrorBody,
  FailedReport,
  HeartbeatRequest,
  HeartbeatResponse,
  JobIdParams,
  Ok,
  OutputReport,
  PollQuery,
  PollResponse,
  RegisterLauncherRequest,
  RegisterLauncherResponse,
  StartedReport,
  StoppedReport,
} from '@agentq/protocol';
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { clientGone } from './abort.js';
import { actorOf } from './auth/plugin.js';

const reportErrors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };

/** The endpoints launchers use: register, long-poll, heartbeat, reports. */
export const launcherRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator }> = async (app, { core }) => {
  app.post(
    '/launcher/register',
    {
      schema: {
        body: Type.Union([RegisterLauncherRequest, Type.Null()]),
        response: { 200: RegisterLauncherResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
      },
    },
    async (req) => {
      const answer = core.register(req.body ?? {}, actorOf(req));
      // the launcher's own credential: every later call of this launcher carries it (auth on)
      const launcher_token = app.auth.launcherTokenFor(answer.launcher_id, req.principal);
      return launcher_token === undefined ? answer : { ...answer, launcher_token };
    },
  );

  app.get(
    '/launcher/jobs',
    {
      schema: {
        querystring: PollQuery,
        response: { 200: PollResponse, 204: Type.Null(), 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      const { launcher_id, capacity = 1 } = req.query;
      const gone = clientGone(reply);
      const answer = await core.poll(launcher_id, capacity, gone);
      if (answer === null) return reply.code(204).send(null);
      if (answer.job) req.log.info({ job_id: answer.job.job_id, launcher_id }, 'job handed to launcher');
      if (gone.aborted) {
        core.pollAnswerLost(launcher_id, answer);
        return reply.code(204).send(null);
      }
      // Whatever the answer hands over (a job, stop requests, the deregistration notice) is not
      // lost if the connection dies before it is fully written.
      reply.raw.once('close', () => {
        if (reply.raw.writableFinished) core.pollAnswerDelivered(launcher_id, answer);
        else core.pollAnswerLost(launcher_id, answer);
      });
      return answer;
    },
  );

  app.post(
    '/launcher/heartbeat',
    { schema: { body: HeartbeatRequest, response: { 200: HeartbeatResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody } } },
    async (req) => core.heartbeat(req.body),
  );

  const report = <S extends TSchema>(kind: 'started' | 'completed' | 'failed' | 'stopped', body: S) =>
    app.post(
      `/launcher/jobs/:job_id/${kind}`,
      { schema: { params: JobIdParams, body, response: { 200: Ok, ...reportErrors } } },
      async (req) => {
        const b = req.body as StartedReport;
        core.report(kind, req.params.job_id, b);
        req.log.info({ job_id: req.params.job_id, launcher_id: b.launcher_id }, `job report: ${kind}`);
        return { ok: true as const };
      },
    );
  report('started', StartedReport);
  report('completed', CompletedReport);
  report('failed', FailedReport);
  report('stopped', StoppedReport);

  app.post(
    '/launcher/jobs/:job_id/output',
    { schema: { params: JobIdParams, body: OutputReport, response: { 200: Ok, ...reportErrors } } },
    async (req) => {
      core.appendOutput(req.params.job_id, req.body.launcher_id, req.body.offset, req.body.data);
      return { ok: true as const };
    },
  );
};
