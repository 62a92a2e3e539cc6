import {
  CreateJobRequest,
  CreateJobsRequest,
  CreateJobsResponse,
  ErrorBody,
  Job,
  JobIdParams,
  JobList,
  JobOutput,
  JobStatuses,
  ListJobsQuery,
  OutputQuery,
  StopJobResponse,
  WaitManyRequest,
  WaitManyResponse,
  WaitQuery,
  type JobStatus,
} from '@agentq/protocol';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Coordinator } from '../core/coordinator.js';
import { validation } from '../core/errors.js';
import { parseCursor } from '../core/reads.js';
import { clientGone, untilClosed } from './abort.js';
import { actorOf, turnOf } from './auth/plugin.js';
import { IdempotencyHeaders } from './idempotency-key.js';
import { plainJson } from './plain-json.js';

/** What a create may be refused with (`POST /jobs`, `POST /jobs/batch`). */
const CREATE_ERRORS = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody } as const;

/** Jobs API: create, read, list, wait, stop, output. */
export const jobRoutes: FastifyPluginAsyncTypebox<{ core: Coordinator }> = async (app, { core }) => {
  app.post(
    '/jobs',
    {
      ...plainJson,
      schema: {
        operationId: 'createJob',
        tags: ['jobs'],
        summary: 'Create a job (start or resume a session)',
        body: CreateJobRequest,
        headers: IdempotencyHeaders,
        response: {
          200: Job,
          201: Job,
          ...CREATE_ERRORS,
        },
      },
    },
    async (req, reply) => {
      const key = req.headers['idempotency-key'];
      const { job, created } = await core.createJob(req.body, {
        actor: actorOf(req),
        turn: turnOf(req),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
      });
      if (!created) {
        req.log.info({ job_id: job.job_id, session_name: job.session_name }, 'job create replayed (Idempotency-Key)');
        return reply.code(200).send(job);
      }
      req.log.info(
        { job_id: job.job_id, session_name: job.session_name, type: job.type, created_by: job.created_by },
        'job created',
      );
      return reply.code(201).send(job);
    },
  );

  app.post(
    '/jobs/batch',
    {
      ...plainJson,
      schema: {
        operationId: 'createJobs',
        tags: ['jobs'],
        summary: 'Create up to 1,000 jobs, all or none',
        body: CreateJobsRequest,
        headers: IdempotencyHeaders,
        response: {
          200: CreateJobsResponse,
          201: CreateJobsResponse,
          ...CREATE_ERRORS,
        },
      },
    },
    async (req, reply) => {
      const key = req.headers['idempotency-key'];
      const { jobs, created } = await core.createJobs(req.body.jobs, {
        actor: actorOf(req),
        turn: turnOf(req),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
      });
      if (!created) {
        req.log.info({ jobs: jobs.length }, 'jobs create replayed (batch, Idempotency-Key)');
        return reply.code(200).send({ jobs });
      }
      req.log.info({ jobs: jobs.length }, 'jobs created (batch)');
      return reply.code(201).send({ jobs });
    },
  );

  app.get(
    '/jobs',
    { ...plainJson, schema: { operationId: 'listJobs', tags: ['jobs'], summary: 'List jobs, newest first', querystring: ListJobsQuery, response: { 200: JobList, 400: ErrorBody } } },
    async (req, reply) => {
      const q = req.query;
      let statuses: Set<JobStatus> | undefined;
      if (q.status !== undefined) {
        const list = q.status.split(',').map((s) => s.trim()).filter(Boolean);
        if (list.length === 0) throw validation('status', 'names no status: leave it out for every status', 'querystring');
        const bad = list.find((s) => !(JobStatuses as readonly string[]).includes(s));
        if (bad !== undefined) throw validation('status', `unknown status ${JSON.stringify(bad)}; one of ${JobStatuses.join(', ')}`, 'querystring');
        statuses = new Set(list as JobStatus[]);
      }
      const cursor = parseCursor(q.cursor);
      return await core.listJobs(
        {
          statuses,
          sessionName: q.session_name,
          launcherId: q.launcher_id,
          terminal: q.terminal === undefined ? undefined : q.terminal === 'true',
          limit: q.limit ?? 100,
          cursor,
        },
        untilClosed(reply),
      );
    },
  );

  app.post(
    '/jobs/wait',
    { ...plainJson, schema: { operationId: 'waitJobs', tags: ['jobs'], summary: 'Wait for any or all of several jobs', body: WaitManyRequest, response: { 200: WaitManyResponse, 400: ErrorBody } } },
    async (req, reply) => {
      const { job_ids, timeout_ms = 30_000, mode = 'any', include_terminal = false } = req.body;
      return core.waitJobs(job_ids, timeout_ms, mode, { hold: untilClosed(reply), signal: clientGone(reply), includeTerminal: include_terminal });
    },
  );

  app.get(
    '/jobs/:job_id',
    { ...plainJson, schema: { operationId: 'getJob', tags: ['jobs'], summary: 'Get a job', params: JobIdParams, response: { 200: Job, 404: ErrorBody } } },
    async (req) => await core.getJob(req.params.job_id),
  );

  app.get(
    '/jobs/:job_id/wait',
    { ...plainJson, schema: { operationId: 'waitJob', tags: ['jobs'], summary: 'Wait for a job to end', params: JobIdParams, querystring: WaitQuery, response: { 200: Job, 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => core.waitJob(req.params.job_id, req.query.timeout_ms ?? 30_000, clientGone(reply)),
  );

  app.post(
    '/jobs/:job_id/stop',
    {
      schema: {
        operationId: 'stopJob',
        tags: ['jobs'],
        summary: 'Stop a job',
        params: JobIdParams,
        headers: IdempotencyHeaders,
        response: { 200: StopJobResponse, 400: ErrorBody, 404: ErrorBody, 409: ErrorBody },
      },
    },
    async (req) => {
      const key = req.headers['idempotency-key'];
      const answer = await core.stopJob(req.params.job_id, { actor: actorOf(req), ...(key !== undefined ? { idempotencyKey: key } : {}) });
      const what = answer.replayed ? 'job stop replayed (Idempotency-Key)' : 'job stop requested';
      req.log.info({ job_id: answer.job_id, outcome: answer.outcome, stopped_by: actorOf(req) }, what);
      return answer;
    },
  );

  app.get(
    '/jobs/:job_id/output',
    { schema: { operationId: 'getJobOutput', tags: ['jobs'], summary: "Read a job's output", params: JobIdParams, querystring: OutputQuery, response: { 200: JobOutput, 400: ErrorBody, 404: ErrorBody } } },
    async (req, reply) => core.readOutput(req.params.job_id, req.query, clientGone(reply)),
  );
};
