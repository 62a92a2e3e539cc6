import { statSync } from 'node:fs';
import type { Logger } from 'pino';
import { EXECUTOR_SCHEMA_VERSION, type ExecutorInvocation, type Job } from '@agentq/protocol';
import { buildExecutorEnv } from './executor-env.js';
import { ExecutorProcess, type ExecutorExit } from './executor-process.js';
import type { ExecutorSpec } from './executors/index.js';
import type { Reporter } from './reporter.js';

export interface JobRunnerDeps {
  executor: ExecutorSpec;
  reporter: Reporter;
  log: Logger;
  /** the current launcher id (it can change when the launcher registers again) */
  launcherId: () => string;
  coordinatorUrl: string;
  defaultProjectDir: string;
  killGraceMs: number;
  /** after the executor exits, how long its output pipes may stay open (default PIPE_DRAIN_MS) */
  pipeDrainMs?: number;
  /** environment the executor's is filtered from */
  env: Record<string, string | undefined>;
  passEnv: readonly string[];
}

/** Why a run ended early, when it did. */
type Interruption = { kind: 'stop' } | { kind: 'interrupt'; reason: string };

/**
 * One job from claim to final report (the seed's JobExecutor, job side):
 * report `started` and wait for the acknowledgement, spawn the executor, stream its output, and
 * report `completed`, `failed` or `stopped` when it has exited.
 *
 * `started` is acknowledged before anything runs: if the coordinator gave the job back to the
 * queue meanwhile (claim lease expired while it was unreachable) or someone stopped it, it
 * answers 409 and the job is not run twice.
 */
export class JobRunner {
  readonly job: Job;
  /** resolves when the job no longer occupies a slot (its final report is queued, maybe not sent) */
  readonly done: Promise<void>;
  readonly #d: JobRunnerDeps;
  readonly #log: Logger;
  #process: ExecutorProcess | undefined;
  #interruption: Interruption | undefined;
  #interrupted: (() => void) | undefined;
  /** resolves when stop() or interrupt() is called */
  readonly #interruptedPromise = new Promise<'interrupted'>(
    (resolve) => (this.#interrupted = () => resolve('interrupted')),
  );

  constructor(job: Job, deps: JobRunnerDeps) {
    this.job = job;
    this.#d = deps;
    this.#log = deps.log;
    this.done = this.#run().catch((err: unknown) => {
      // #run handles its own failures; this only guards against a bug leaving a slot taken forever
      this.#log.error({ err }, 'job runner crashed');
    });
  }

  /** The coordinator asked to stop the job: kill the executor and report `stopped`. */
  stop(): void {
    this.#interrupt({ kind: 'stop' });
  }

  /** The launcher is going away: kill the executor and report the job `failed` with `reason`. */
  interrupt(reason: string): void {
    this.#interrupt({ kind: 'interrupt', reason });
  }

  /** SIGKILL the executor's process group at once (forced exit). */
  killNow(): void {
    this.#process?.killNow();
  }

  #interrupt(what: Interruption): void {
    if (this.#interruption) return;
    this.#interruption = what;
    this.#interrupted!();
    this.#log.info({ why: what.kind === 'stop' ? 'stop requested' : what.reason }, 'stopping job');
    void this.#process?.terminate();
  }

  async #run(): Promise<void> {
    const { reporter } = this.#d;
    const jobId = this.job.job_id;
    this.#log.info(
      { type: this.job.type, session_name: this.job.session_name, agent_name: this.job.agent_name },
      'job claimed',
    );

    const notRun: ExecutorExit = { code: null, signal: null, stderrTail: '', spawnError: null, pipesAbandoned: false };
    // a stop or shutdown does not wait for `started` (the coordinator may be unreachable): the
    // final report is queued behind it and both go out in order when it answers
    const started = await Promise.race([
      reporter.send(jobId, { kind: 'started', body: {} }),
      this.#interruptedPromise,
    ]);
    if (started === 'interrupted') return this.#finish(notRun, undefined);
    if (!started.ok) {
      if ('refused' in started && started.refused.details?.['current_status'] === 'stopping') {
        this.#interruption = { kind: 'stop' };
        return this.#finish(notRun, undefined);
      }
      if ('refused' in started) {
        // requeued after its claim lease, taken by another launcher, or ended: not ours to run
        this.#log.warn(
          { code: started.refused.code },
          'the coordinator did not accept `started`; the job is not run here',
        );
      }
      reporter.close(jobId);
      return;
    }
    if (this.#interruption) return this.#finish(notRun, undefined);

    const cwd = this.job.project_dir ?? this.#d.defaultProjectDir;
    if (!isDirectory(cwd)) {
      await this.#report({ kind: 'failed', body: { error: `project_dir ${cwd} does not exist on this host` } });
      return;
    }

    let sessionId: string | undefined = this.job.executor_session_id ?? undefined;
    let result: string | undefined;
    let errorMessage: string | undefined;
    this.#process = new ExecutorProcess(this.#d.executor, this.#invocation(), {
      cwd,
      env: buildExecutorEnv(this.#d.env, this.#d.passEnv, {
        AGENTQ_JOB_ID: jobId,
        AGENTQ_JOB_TYPE: this.job.type,
        AGENTQ_SESSION_NAME: this.job.session_name,
        AGENTQ_PROJECT_DIR: cwd,
        AGENTQ_COORDINATOR_URL: this.#d.coordinatorUrl,
        AGENTQ_LAUNCHER_ID: this.#d.launcherId(),
        AGENTQ_EXECUTOR_SCHEMA_VERSION: String(EXECUTOR_SCHEMA_VERSION),
        AGENTQ_AGENT_NAME: this.job.agent_name ?? undefined,
        AGENTQ_PARENT_SESSION_NAME: this.job.parent_session_name ?? undefined,
        AGENTQ_EXECUTOR_SESSION_ID: this.job.executor_session_id ?? undefined,
      }),
      killGraceMs: this.#d.killGraceMs,
      pipeDrainMs: this.#d.pipeDrainMs,
      onEvent: (event) => {
        switch (event.type) {
          case 'output':
            this.#log.debug({ output: event.text.replace(/\n$/, '') }, 'executor output');
            reporter.output(jobId, event.text);
            break;
          case 'session':
            sessionId = event.session_id;
            this.#log.info({ executor_session_id: sessionId }, 'executor session');
            break;
          case 'result':
            result = event.text;
            break;
          case 'error':
            errorMessage = event.message;
            this.#log.warn({ error: event.message }, 'executor reported an error');
            break;
        }
      },
      onStderrLine: (line) => this.#log.debug({ stderr: line }, 'executor stderr'),
    });
    this.#log.info({ pid: this.#process.pid, executor: this.#d.executor.name, cwd }, 'executor started');
    // a stop that arrived while `started` was in flight
    if (this.#interruption) void this.#process.terminate();

    const exit = await this.#process.exited;
    this.#log.info({ code: exit.code, signal: exit.signal }, 'executor exited');
    if (exit.pipesAbandoned) {
      this.#log.warn(
        { pid: this.#process.pid },
        'a process the executor left running (outside its process group?) kept its output open; stopped reading it',
      );
    }
    await this.#finish(exit, sessionId, result, errorMessage);
  }

  #invocation(): ExecutorInvocation {
    const j = this.job;
    return {
      schema_version: EXECUTOR_SCHEMA_VERSION,
      mode: j.type === 'resume_session' ? 'resume' : 'start',
      job_id: j.job_id,
      session_name: j.session_name,
      prompt: j.prompt,
      agent_name: j.agent_name,
      project_dir: j.project_dir ?? this.#d.defaultProjectDir,
      parent_session_name: j.parent_session_name,
      executor_session_id: j.executor_session_id,
    };
  }

  /** Queue the final report for how the executor ended. */
  async #finish(exit: ExecutorExit, sessionId: string | undefined, result?: string, errorMessage?: string): Promise<void> {
    const session = sessionId === undefined ? {} : { executor_session_id: sessionId };
    const it = this.#interruption;
    if (it?.kind === 'stop') {
      return this.#report({ kind: 'stopped', body: { signal: exit.signal, ...session } });
    }
    if (it?.kind === 'interrupt') {
      const how = exit.signal ? ` (executor ended by ${exit.signal})` : '';
      return this.#report({
        kind: 'failed',
        body: { error: `${it.reason}: the job was interrupted${how}`, exit_code: exit.code, ...session },
      });
    }
    if (exit.spawnError) {
      const cmd = [this.#d.executor.command, ...this.#d.executor.args].join(' ');
      return this.#report({
        kind: 'failed',
        body: { error: `could not start executor ${cmd}: ${exit.spawnError.message}`, exit_code: null },
      });
    }
    if (exit.code === 0 && errorMessage === undefined) {
      return this.#report({ kind: 'completed', body: { status: 'success', result: result ?? null, ...session } });
    }
    return this.#report({
      kind: 'failed',
      body: { error: failureMessage(exit, errorMessage), exit_code: exit.code, ...session },
    });
  }

  async #report(report: Parameters<Reporter['send']>[1]): Promise<void> {
    this.#log.info({ report: report.kind }, `job ${report.kind}`);
    // not awaited: the slot is free once the executor has exited; delivery is the reporter's job
    void this.#d.reporter.send(this.job.job_id, report, { last: true });
  }
}

function failureMessage(exit: ExecutorExit, errorMessage: string | undefined): string {
  if (errorMessage !== undefined) {
    return exit.code !== null && exit.code !== 0 ? `${errorMessage} (exit code ${exit.code})` : errorMessage;
  }
  const how = exit.signal ? `executor killed by ${exit.signal}` : `executor exited with code ${exit.code}`;
  return exit.stderrTail ? `${how}; stderr:\n${exit.stderrTail}` : `${how} (no stderr)`;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
