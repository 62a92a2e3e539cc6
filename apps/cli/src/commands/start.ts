import { exitCodeForStatus, type CreateJobRequest, type Job, type JobType } from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { keyValueArg, nameArg, timeoutArg, timeoutMs, usdArg, type Timeout } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';
import { describeJob } from '../descriptor.js';
import { InterruptedError, JobCreatedError } from '../errors.js';
import { followOutput } from '../follow.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { Progress } from '../progress.js';
import { readPrompt } from '../prompt.js';
import { renderDescriptor } from '../render.js';
import { waitForJob } from '../waiting.js';

interface StartOptions {
  prompt?: string;
  promptFile?: string;
  agent?: string;
  projectDir?: string;
  /** a name, false for --no-parent, undefined when neither was given */
  parent?: string | false;
  require?: Record<string, string>;
  maxCost?: number;
  budget?: number;
  timeout?: Timeout;
  wait?: boolean;
  waitTimeout?: Timeout;
  follow?: boolean;
}

const WAIT_NOTES = `Without --wait: prints the job descriptor (job_id, status, terminal, status_command,
cancel_command, poll_interval_ms, timeout_ms, ...) and exits 0 once the job is accepted.
With --wait: blocks until the job is terminal and exits with its outcome; progress
on stderr when it is a terminal. --follow streams the job's output while waiting
(to stdout, or to stderr with --json so stdout keeps its one envelope).
A --wait that fails once the job exists (the coordinator away past --wait-timeout,
a refusal for now, ...) exits with that failure's code but names the job: in
error.job with --json (its descriptor, wait_command included), else on stderr
("the job was created all the same: <job_id> ...; follow it with: agentq wait
<job_id>"). Follow it that way rather than running the command again.`;

/** Options shared by start and resume. */
function jobOptions(cmd: Command): Command {
  return cmd
    .option('-p, --prompt <text>', 'the prompt; - reads it from stdin')
    .option('--prompt-file <path>', 'read the prompt from a file (- is stdin)')
    .option('--agent <name>', 'agent to run (start: recorded on the session)')
    .option('--project-dir <path>', "directory on the launcher's host to run in")
    .addOption(
      new Option('--require <key=value>', 'run only on a launcher with this label (repeatable)').argParser(keyValueArg),
    )
    .addOption(
      new Option(
        '--timeout <duration>',
        'the job ends as timed_out after this long (exit 7); none: no timeout',
      ).argParser(timeoutArg(1)),
    )
    .addOption(new Option('--max-cost <usd>', "the turn's cost ceiling in US dollars (max_cost_usd)").argParser(usdArg(1e6)))
    .option('--wait', 'block until the job is terminal; exit with its outcome')
    .addOption(
      new Option(
        '--wait-timeout <duration>',
        'stop waiting after this long (implies --wait; exit 3, the job keeps running)',
      ).argParser(timeoutArg()),
    )
    .option('-f, --follow', "stream the job's output while waiting (implies --wait)");
}

export function registerStart(program: Command, act: Act): void {
  jobOptions(
    program
      .command('start')
      .summary('start a new session with a prompt (prints the job descriptor)')
      .argument('<session>', 'name of the new session', nameArg('a session name')),
  )
    .addOption(
      new Option(
        '--parent <session>',
        'parent session, resumed with the outcome when this job ends (default: $AGENTQ_SESSION_NAME)',
      ).argParser(nameArg('a session name')),
    )
    .option('--no-parent', 'no parent, even inside a job that has $AGENTQ_SESSION_NAME set')
    .addOption(
      new Option(
        '--budget <usd>',
        'the budget of the tree this session roots, in US dollars: its child jobs are refused once it is spent (budget_usd)',
      ).argParser(usdArg(1e6)),
    )
    .addHelpText('after', commandHelpAfter(WAIT_NOTES))
    .action(act((ctx, cmd) => createJob('start_session', ctx, cmd)));

  jobOptions(
    program
      .command('resume')
      .summary('send a new prompt to an existing session')
      .argument('<session>', 'the session to continue', nameArg('a session name')),
  )
    .addOption(new Option('--parent <session>', 'parent session, told when this job ends').argParser(nameArg('a session name')))
    .addHelpText('after', commandHelpAfter(WAIT_NOTES))
    .action(act((ctx, cmd) => createJob('resume_session', ctx, cmd)));
}

/** The parent of a new job: --parent, else (start only) the session this command runs inside. */
function parentOf(type: JobType, o: StartOptions, env: CommandContext['io']['env']): string | undefined {
  if (o.parent === false) return undefined;
  if (o.parent !== undefined) return o.parent;
  // inside a job the launcher sets AGENTQ_SESSION_NAME: a session started from there is a child
  return type === 'start_session' ? env.AGENTQ_SESSION_NAME || undefined : undefined;
}

/**
 * `agentq start` / `agentq resume`: create the job and print its descriptor at once (exit 0:
 * accepted), or with `--wait` block until it is terminal and exit with its outcome.
 */
async function createJob(type: JobType, ctx: CommandContext, cmd: Command): Promise<CommandResult> {
  const command = type === 'start_session' ? 'start' : 'resume';
  const [session] = cmd.processedArgs as [string];
  const o = cmd.opts<StartOptions>();
  const prompt = await readPrompt(ctx.io, command, o);
  const follow = o.follow === true;
  const wait = o.wait === true || o.waitTimeout !== undefined || follow;

  const body: CreateJobRequest = { type, session_name: session, prompt };
  const parent = parentOf(type, o, ctx.io.env);
  if (o.agent !== undefined) body.agent_name = o.agent;
  if (o.projectDir !== undefined) body.project_dir = o.projectDir;
  if (parent !== undefined) body.parent_session_name = parent;
  const jobTimeout = timeoutMs(o.timeout);
  if (jobTimeout !== undefined) body.timeout_ms = jobTimeout;
  if (o.require !== undefined) body.requires = o.require;
  if (o.maxCost !== undefined) body.max_cost_usd = o.maxCost;
  if (o.budget !== undefined) body.budget_usd = o.budget;

  if (!wait) {
    const created = await create(ctx, body);
    const d = describeJob(created, ctx);
    // exit 0: the job was accepted. Its own state is in the descriptor (terminal: false).
    const headline = `${command === 'start' ? 'started' : 'resumed'} ${d.session_name}: job ${d.job_id}`;
    return { data: d, exitCode: 0, text: () => renderDescriptor(d, ctx.now(), headline) };
  }

  const waitMs = timeoutMs(o.waitTimeout) ?? undefined; // none: no limit
  const job = follow ? await waitFollowing(ctx, body, waitMs) : await waitWithProgress(ctx, body, waitMs);
  const d = describeJob(job, ctx);
  return { data: d, exitCode: exitCodeForStatus(job.status, job.terminal), text: () => renderDescriptor(d, ctx.now()) };
}

/**
 * Create the job. Interrupted before the answer came, it may have been created all the same (the
 * request may have reached the coordinator): say where to look rather than just "interrupted".
 */
async function create(ctx: CommandContext, body: CreateJobRequest): Promise<Job> {
  try {
    return await ctx.client.createJob(body, { signal: ctx.signal });
  } catch (err) {
    if (!ctx.signal?.aborted) throw err;
    throw new InterruptedError(
      `interrupted before the coordinator answered: the job may have been created all the same (agentq sessions ${body.session_name} lists its jobs)`,
    );
  }
}

/**
 * The wait of a job just created. Its failure (the coordinator gone past the deadline, a refusal
 * for now, ...) names the job as last seen: it exists and goes on, and the caller must be able to
 * follow it rather than run the command again (a second turn, for resume).
 */
async function waitNamingTheJob(
  ctx: CommandContext,
  created: Job,
  wait: (seen: (jobs: readonly Job[]) => void) => Promise<Job>,
): Promise<Job> {
  let last = created;
  try {
    return await wait((jobs) => {
      last = jobs.find((j) => j.job_id === created.job_id) ?? last;
    });
  } catch (err) {
    throw new JobCreatedError(describeJob(last, ctx), err);
  }
}

/** Create, then wait; on a terminal, progress lines on stderr fed by the event stream. */
async function waitWithProgress(
  ctx: CommandContext,
  body: CreateJobRequest,
  timeoutMs: number | undefined,
): Promise<Job> {
  // the event stream is opened first, so that no status change of the new job is missed
  const progress = Progress.start(ctx.io, ctx.client, ctx.now);
  try {
    await progress?.ready;
    const created = await create(ctx, body);
    return await waitNamingTheJob(ctx, created, async (seen) => {
      progress?.track([created]);
      const job = await waitForJob(ctx.client, created.job_id, created, {
        timeoutMs,
        signal: ctx.signal,
        now: ctx.now,
        onSnapshot: (jobs) => {
          seen(jobs);
          progress?.snapshot(jobs);
        },
      });
      if (!ctx.signal?.aborted) await progress?.settle([job]);
      return job;
    });
  } finally {
    progress?.stop();
  }
}

/** Create, then wait while streaming the job's output (instead of drawing progress). */
async function waitFollowing(ctx: CommandContext, body: CreateJobRequest, timeoutMs: number | undefined): Promise<Job> {
  const created = await create(ctx, body);
  return waitNamingTheJob(ctx, created, (seen) => followWhileWaiting(ctx, created, timeoutMs, seen));
}

/** The wait of waitFollowing, once the job exists; `seen` is told every snapshot. */
async function followWhileWaiting(
  ctx: CommandContext,
  created: Job,
  timeoutMs: number | undefined,
  seen: (jobs: readonly Job[]) => void,
): Promise<Job> {
  const sink = ctx.json ? ctx.io.stderr : ctx.io.stdout;
  const stopFollowing = new AbortController();
  const onAbort = () => stopFollowing.abort(ctx.signal?.reason);
  ctx.signal?.addEventListener('abort', onAbort, { once: true });
  let endsWithNewline = true;
  let followFailure: unknown;
  // handled from the start: a follow that fails while the wait is still going is reported after it
  const following = followOutput(
    ctx.client,
    created.job_id,
    { offset: 0 },
    {
      onText: (text) => {
        sink.write(text);
        endsWithNewline = text.endsWith('\n');
      },
      signal: stopFollowing.signal,
      now: ctx.now,
    },
  ).then(
    () => undefined,
    (err: unknown) => {
      if (!stopFollowing.signal.aborted) followFailure = err;
    },
  );
  try {
    const job = await waitForJob(ctx.client, created.job_id, created, { timeoutMs, signal: ctx.signal, now: ctx.now, onSnapshot: seen });
    // a terminal job's output ends by itself (the follow reads to the end); otherwise stop it
    if (!job.terminal) stopFollowing.abort();
    await following;
    if (followFailure !== undefined) throw followFailure;
    if (!endsWithNewline) sink.write('\n');
    return job;
  } finally {
    stopFollowing.abort();
    ctx.signal?.removeEventListener('abort', onAbort);
  }
}
