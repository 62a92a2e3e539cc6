import { z } from 'zod';
import { waitForJobs } from '../waiting.js';
import { ToolError } from './answers.js';
import { ANSWER_GRACE_MS } from './outage.js';
import type { AddTool, ToolEnv } from './server.js';
import { describeJob, describeSession, joined, jobView, RESULT_MAX_BYTES, sessionView } from './views.js';

/* The tools that read: a job's or a session's status, waiting for jobs, a job's output. */

/**
 * The longest a tool call waits (wait_for_jobs, get_output's wait_ms). MCP clients give up on a
 * request after a while (the SDK's client after 60 s by default): a wait must answer before that.
 */
export const MAX_WAIT_MS = 50_000;
export const DEFAULT_WAIT_MS = 30_000;
/** get_output: the most bytes one call returns, and the default. */
export const OUTPUT_MAX_BYTES = 64 * 1024;
export const OUTPUT_DEFAULT_BYTES = 16 * 1024;
/**
 * wait_for_jobs: the results and errors of all the jobs together are cut to this many bytes,
 * each job getting an equal share (655 bytes each for the most jobs a call takes, 100).
 */
const WAIT_RESULTS_BYTES = 64 * 1024;
const WAIT_MAX_JOBS = 100;

const JobId = z.string().min(1).max(200);

export function registerJobTools(add: AddTool, { client, coordinatorReached, send }: ToolEnv): void {
  add(
    'get_status',
    {
      title: 'Status of a job or a session',
      description:
        "The status and result of a job (job_id), or the status, last result and children of a session (session_name). Give exactly one. " +
        `A result longer than ${RESULT_MAX_BYTES / 1024} KiB comes in pieces: the answer says where the piece ends; pass that as result_offset to read on. ` +
        'You do not need it to learn when a child of yours ends: you are resumed with its result.',
      inputSchema: {
        job_id: JobId.optional().describe('a job'),
        session_name: z.string().min(1).max(200).optional().describe('a session'),
        result_offset: z
          .number()
          .int()
          .min(0)
          .optional()
          .describe(`the result (a session's last result) from this byte offset, up to ${RESULT_MAX_BYTES / 1024} KiB: the result_next_offset of an earlier answer`),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ job_id, session_name, result_offset }, call) => {
      if ((job_id === undefined) === (session_name === undefined)) {
        throw new ToolError('validation_failed', 'give exactly one of job_id and session_name');
      }
      if (job_id !== undefined) {
        const job = jobView(await send((a) => client.getJob(job_id, { signal: a.signal }), { resend: 'always', call }), RESULT_MAX_BYTES, result_offset);
        const { head, body } = describeJob(job);
        return { message: head, details: body, data: { job } };
      }
      const session = sessionView(
        await send((a) => client.getSession(session_name!, { signal: a.signal }), { resend: 'always', call }),
        RESULT_MAX_BYTES,
        result_offset,
      );
      const { head, body } = describeSession(session);
      return { message: head, details: body, data: { session } };
    },
  );

  add(
    'wait_for_jobs',
    {
      title: 'Wait for jobs to end',
      description:
        `Wait up to timeout_ms (default ${DEFAULT_WAIT_MS}, at most ${MAX_WAIT_MS}) for jobs to end. mode "any" (default): until one of the jobs ` +
        'still active when the wait began ends; "all": until every one has ended. Answers done (true, or false when the time ran out: not ' +
        'an error), the ids that are terminal and those that are not, and each job\'s status and result. Rarely needed: children of yours ' +
        'resume you with their results, so ending your turn is usually better than waiting.',
      inputSchema: {
        job_ids: z.array(JobId).min(1).max(WAIT_MAX_JOBS).describe('the jobs to wait for'),
        mode: z.enum(['any', 'all']).optional().describe('any (default) or all'),
        timeout_ms: z.number().int().min(0).max(MAX_WAIT_MS).optional().describe(`how long to wait at most (default ${DEFAULT_WAIT_MS})`),
        include_terminal: z
          .boolean()
          .optional()
          .describe('mode any: a job already ended when the wait begins counts too (the answer comes at once)'),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ job_ids, mode = 'any', timeout_ms = DEFAULT_WAIT_MS, include_terminal = false }, call) => {
      // the CLI's wait: a snapshot, then long-polls until the time is up; a coordinator that
      // restarts meanwhile (it answers parked waits early, then is away) is waited out, and
      // reported unreachable only if it is not back in time. So is one already away when the
      // wait begins, once it is known to be there (this server reached it, or serves a job).
      // The outage is not waited through in silence: the answer says it (coordinator_outage),
      // and stderr each pause, since "not done after 30 s" means less if 20 of them were one
      const r = await waitForJobs(client, job_ids, mode, {
        reached: coordinatorReached(),
        timeoutMs: timeout_ms,
        signal: call.signal,
        now: Date.now,
        includeTerminal: include_terminal,
        answerGraceMs: ANSWER_GRACE_MS,
        onRetry: (err, ms) => call.outage.retried(err, ms),
        onBack: (ms) => call.outage.back(ms),
      });
      const share = Math.floor(WAIT_RESULTS_BYTES / Math.max(1, r.jobs.length));
      const jobs = r.jobs.map((j) => jobView(j, share));
      const terminal = jobs.filter((j) => j.terminal).map((j) => j.job_id);
      const notTerminal = jobs.filter((j) => !j.terminal).map((j) => j.job_id);
      let head: string;
      if (jobs.length === 0) head = 'None of these jobs exists.';
      else if (r.done) head = mode === 'all' ? `All ${jobs.length} job(s) have ended.` : `Done: ${terminal.length} of ${jobs.length} job(s) have ended.`;
      else head = `Not done after ${timeout_ms / 1000} s: ${notTerminal.length} of ${jobs.length} job(s) still active (${notTerminal.join(', ')}).`;
      const message = [head];
      if (r.notFound.length > 0) message.push(`Unknown job ids: ${r.notFound.join(', ')}.`);
      if (!r.done && jobs.length > 0) {
        message.push('Call wait_for_jobs again to keep waiting, or end your turn: a child of yours resumes you with its result when it ends.');
      }
      return {
        message: message.join(' '),
        details: jobs.map((j) => joined(describeJob(j))).join('\n\n'),
        data: { mode, done: r.done, terminal, not_terminal: notTerminal, not_found: r.notFound, jobs },
      };
    },
  );

  add(
    'get_output',
    {
      title: "Read a job's output",
      description:
        "A bounded piece of a job's output (what its agent printed while working; the result is in get_status): without offset the last " +
        `tail_bytes (default ${OUTPUT_DEFAULT_BYTES}); with offset, up to limit_bytes from there (at most ${OUTPUT_MAX_BYTES}), and wait_ms to ` +
        'wait for new output. Pass next_offset as offset to read on.',
      inputSchema: {
        job_id: JobId.describe('the job'),
        offset: z.number().int().min(0).optional().describe('read from this byte offset (next_offset of an earlier answer)'),
        limit_bytes: z.number().int().min(1).max(OUTPUT_MAX_BYTES).optional().describe(`with offset: at most this many bytes (default ${OUTPUT_DEFAULT_BYTES})`),
        tail_bytes: z.number().int().min(0).max(OUTPUT_MAX_BYTES).optional().describe(`without offset: the last this many bytes (default ${OUTPUT_DEFAULT_BYTES})`),
        wait_ms: z.number().int().min(0).max(MAX_WAIT_MS).optional().describe('with offset: wait this long for output past it'),
      },
      annotations: { readOnlyHint: true },
    },
    async ({ job_id, offset, limit_bytes, tail_bytes, wait_ms }, call) => {
      // what belongs to the other way to read goes along too: the coordinator refuses it, naming
      // it, rather than the agent believing it waited
      const query = (left: number | undefined) =>
        offset === undefined
          ? { tail_bytes: tail_bytes ?? OUTPUT_DEFAULT_BYTES, limit_bytes, wait_ms: left }
          : { offset, limit_bytes: limit_bytes ?? OUTPUT_DEFAULT_BYTES, tail_bytes, wait_ms: left };
      // each attempt waits for what is left of wait_ms, and is answered within that and a grace,
      // not the client's long-poll slack (see ANSWER_GRACE_MS)
      const out = await send(
        (a) => {
          const left = wait_ms === undefined ? undefined : a.waitLeftMs;
          return client.getOutput(job_id, query(left), { signal: a.signal, headersTimeoutMs: (left ?? 0) + ANSWER_GRACE_MS });
        },
        { resend: 'always', call, ...(wait_ms === undefined ? {} : { waitMs: wait_ms }) },
      );
      const dropped = out.truncated ? '; older output was dropped by the coordinator' : '';
      const head =
        `Output of job ${out.job_id} (${out.status}): bytes ${out.offset}-${out.next_offset} of ${out.total_bytes}${dropped}. ` +
        (out.terminal ? 'The job has ended.' : `Read on with offset ${out.next_offset}.`);
      return { message: head, details: out.output === '' ? '(no output in this range)' : out.output, data: { ...out } };
    },
  );
}
