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
  SyncRequest,
  SyncResponse,
} from '@agentq/protocol';
import type { FastifyReply } from 'fastify';
import { Type, type TSchema } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { clientGone } from './abort.js';
import { actorOf } from './auth/plugin.js';
import { plainJson } from './plain-json.js';

const reportErrors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody };

/** The endpoints launchers use: register, long-poll, heartbeat, reports. */
export const launcherRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator }> = async (app, { core }) => {
  // what a report may weigh: the launcher cuts a result that would make it heavier, rather than
  // have its completed report refused (413) and the job fail; and how much of a job's output is
  // kept, which bounds the part of the cut result's rest worth sending (docs/launcher.md). Told at
  // registration and again at every heartbeat (a restart on a persistent store may change them
  // without the launcher registering again).
  const bodyLimit = app.initialConfig.bodyLimit;
  const limits = { max_output_bytes: core.config.outputMaxBytes, ...(bodyLimit === undefined ? {} : { max_report_bytes: bodyLimit }) };

  app.post(
    '/launcher/register',
    {
      schema: {
        operationId: 'registerLauncher',
        tags: ['launcher'],
        summary: 'Register a launcher',
        body: Type.Union([RegisterLauncherRequest, Type.Null()]),
        response: { 200: RegisterLauncherResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (req) => {
      // the launcher's own credential: every later call of this launcher carries it (auth on)
      const credential = app.auth.launcherCredential(req.principal);
      const registered = await core.register(req.body ?? {}, {
        createdBy: actorOf(req),
        binder: app.auth.hostBinder(req.principal),
        tokenHash: credential?.hash ?? null,
      });
      const answer = { ...registered, ...limits };
      return credential === undefined ? answer : { ...answer, launcher_token: await credential.tokenFor(answer.launcher_id) };
    },
  );

  app.get(
    '/launcher/jobs',
    {
      ...plainJson,
      // a poll hands jobs out: a HEAD (whose answer has no body) would claim jobs nobody receives
      exposeHeadRoute: false,
      schema: {
        operationId: 'pollJobs',
        tags: ['launcher'],
        summary: 'Long-poll for a job, stop requests or the deregistration notice',
        querystring: PollQuery,
        response: { 200: PollResponse, 204: Type.Null(), 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
      },
    },
    async (req, reply) => {
      const { launcher_id, capacity = 1, batch } = req.query;
      // several jobs per answer, and jobs beside stop requests, only for launchers that read
      // `jobs` (they say batch=true); the others get the original API's one kind per answer
      const gone = clientGone(reply);
      const batched = batch === 'true';
      const answer = await core.poll(launcher_id, batched ? capacity : Math.min(capacity, 1), gone, !batched);
      if (answer === null) return reply.code(204).send(null);
      for (const job of answer.jobs ?? []) req.log.info({ job_id: job.job_id, launcher_id }, 'job handed to launcher');
      if (gone.aborted) {
        await core.pollAnswerLost(launcher_id, answer);
        return reply.code(204).send(null);
      }
      handOver(reply, launcher_id, answer);
      return answer;
    },
  );

  app.post(
    '/launcher/heartbeat',
    {
      ...plainJson,
      schema: {
        operationId: 'heartbeat',
        tags: ['launcher'],
        summary: 'Tell the coordinator the launcher is alive',
        body: HeartbeatRequest,
        response: { 200: HeartbeatResponse, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody },
      },
    },
    async (req) => ({ ...(await core.heartbeat(req.body)), ...limits }),
  );

  const report = <S extends TSchema>(kind: 'started' | 'completed' | 'failed' | 'stopped', body: S) =>
    app.post(
      `/launcher/jobs/:job_id/${kind}`,
      {
        ...plainJson,
        schema: {
          operationId: `report${kind[0]!.toUpperCase()}${kind.slice(1)}`,
          tags: ['launcher'],
          summary: `Report a job ${kind}`,
          params: JobIdParams,
          body,
          response: { 200: Ok, ...reportErrors },
        },
      },
      async (req) => {
        const b = req.body as StartedReport;
        await core.report(kind, req.params.job_id, b);
        // what the report changed is logged at info by the core (job started, completed, ...)
        req.log.debug({ job_id: req.params.job_id, launcher_id: b.launcher_id }, `job report: ${kind}`);
        return { ok: true as const };
      },
    );
  report('started', StartedReport);
  report('completed', CompletedReport);
  report('failed', FailedReport);
  report('stopped', StoppedReport);

  app.post(
    '/launcher/jobs/:job_id/output',
    { ...plainJson, schema: { operationId: 'reportOutput', tags: ['launcher'], summary: "Append to a job's output", params: JobIdParams, body: OutputReport, response: { 200: Ok, ...reportErrors } } },
    async (req) => {
      await core.appendOutput(req.params.job_id, req.body.launcher_id, req.body.offset, req.body.data);
      return { ok: true as const };
    },
  );

  app.post(
    '/launcher/sync',
    {
      ...plainJson,
      schema: {
        operationId: 'syncLauncher',
        tags: ['launcher'],
        summary: 'Send reports and receive new work in one request (report-and-poll)',
        body: SyncRequest,
        response: { 200: SyncResponse, ...reportErrors },
      },
    },
    async (req, reply) => {
      const gone = clientGone(reply);
      const answer = await core.sync(req.body, gone);
      // a launcher credential never reports on another launcher's job: refused as the single
      // report endpoints refuse it (403), and nothing was changed
      if (req.principal.kind === 'launcher') {
        for (const r of answer.results) {
          if (r.error?.code === 'job_owned_by_other_launcher' && r.error.details?.launcher_id != null) {
            r.error = { code: 'forbidden', message: `job ${r.job_id} is held by another launcher`, details: { job_id: r.job_id } };
          }
        }
      }
      const poll = { jobs: answer.jobs, ...(answer.stop_jobs ? { stop_jobs: answer.stop_jobs } : {}), ...(answer.deregistered ? { deregistered: true as const } : {}) };
      if (gone.aborted) {
        // nobody is there to read it: the reports were applied, the hand-over is undone
        await core.pollAnswerLost(req.body.launcher_id, poll);
        return answer;
      }
      for (const job of answer.jobs) req.log.info({ job_id: job.job_id, launcher_id: req.body.launcher_id }, 'job handed to launcher');
      handOver(reply, req.body.launcher_id, poll);
      return answer;
    },
  );

  /**
   * Whatever an answer hands over (jobs, stop requests, the deregistration notice) is not lost if
   * the connection dies before it is fully written: it is undone and given again.
   */
  function handOver(reply: FastifyReply, launcherId: string, answer: PollResponse): void {
    reply.raw.once('close', () => {
      const settle = reply.raw.writableFinished ? core.pollAnswerDelivered(launcherId, answer) : core.pollAnswerLost(launcherId, answer);
      settle.catch((err: unknown) => reply.log.error({ err, launcher_id: launcherId }, 'settling a poll answer failed'));
    });
  }
};
