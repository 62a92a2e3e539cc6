import type { Logger } from 'pino';
import type { CoordinatorLimits, ExecutorEvent, Job } from '@agentq/protocol';
import { buildExecutorEnv, invocationOf, jobEnv } from './executor-env.js';
import { ExecutorProcess, type ExecutorExit } from './executor-process.js';
import { definedOnly, failureMessage, refusedForItsBody, refusedInstead, type InterruptionCode } from './final-report.js';
import { bodyRefused } from './sync-channel.js';
import type { ExecutorSpec } from './executors/index.js';
import type { Lifeline } from './lifeline/lifeline.js';
import { resolveJobDir } from './project-roots.js';
import { cutResult, placeRest, storable } from './report-bounds.js';
import type { Report, Reporter } from './reporter.js';
import { Watchdog } from './watchdog.js';

export interface JobRunnerDeps {
  executor: ExecutorSpec;
  reporter: Reporter;
  log: Logger;
  /** the current launcher id (it can change when the launcher registers again) */
  launcherId: () => string;
  coordinatorUrl: string;
  /** the CA file the launcher trusts for an https:// coordinator, passed on (AGENTQ_CA_FILE) */
  caFile?: string | undefined;
  /** the directories this launcher serves (real paths); the first is the default project_dir */
  projectRoots: readonly string[];
  killGraceMs: number;
  /** after the executor exits, how long its output pipes may stay open (default PIPE_DRAIN_MS) */
  pipeDrainMs?: number;
  /** environment the executor's is filtered from */
  env: Record<string, string | undefined>;
  passEnv: readonly string[];
  /** told about every executor process group, so that executors die with the launcher */
  lifeline?: Lifeline;
  /** stop an executor silent for this long (0: never) */
  idleTimeoutMs: number;
  /** after an executor's result, how long it may take to exit */
  exitGraceMs: number;
  /**
   * Hook for the per-job agent token (issue 12, scoped credentials): when it returns a token, the
   * executor gets it as AGENTQ_TOKEN (and the claude-code executor hands it to `agentq mcp`).
   * Unset until the coordinator mints such tokens; never the launcher's own credential.
   */
  agentToken?: (job: Job) => string | undefined;
  /**
   * The coordinator's limits as it last said them (none while unregistered; each absent from a
   * coordinator older than it): the largest report it takes, so a larger result is cut to fit and
   * its rest goes to the job's output, and the most of that output it keeps.
   */
  limits?: () => CoordinatorLimits | undefined;
}

/** Why a run ended early, when it did. */
type Interruption = { kind: 'stop' } | { kind: 'interrupt'; reason: string; code: InterruptionCode } | { kind: 'idle' } | { kind: 'disowned'; reason: string };

/** What the executor's `result` event said about the cost of the turn (sent with the final report). */
type Accounting = Pick<Extract<ExecutorEvent, { type: 'result' }>, 'usage' | 'cost_usd' | 'num_turns' | 'duration_api_ms'>;

/** What the executor said, gathered while it runs. */
interface Outcome {
  sessionId?: string;
  result?: string;
  errorMessage?: string;
  errorCode?: string;
  accounting: Accounting;
  /** the executor did not exit within the exit grace after its result and was killed */
  killedAfterResult: boolean;
}

/**
 * One job from claim to final report (the original launcher's JobExecutor, job side):
 * check the job's directory against the project roots, report `started` and wait for the
 * acknowledgement, spawn the executor, stream its output, and report `completed`, `failed` or
 * `stopped` when it has exited.
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
  #watchdog: Watchdog | undefined;
  #interruption: Interruption | undefined;
  /** what the executor said while it runs (#run makes it) */
  #outcome: Outcome | undefined;
  /**
   * The executor's answer (its result or error) as it stood when a stop or the shutdown came, if
   * it had answered by then, or when its exit grace ran out: that answer stands, and nothing it
   * says once killed changes it.
   */
  #answerBeforeInterruption: Pick<Outcome, 'result' | 'errorMessage' | 'errorCode'> | undefined;
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

  /** The launcher is going away: kill the executor and report the job `failed` with `reason` and `code`. */
  interrupt(reason: string, code: InterruptionCode): void {
    this.#interrupt({ kind: 'interrupt', reason, code });
  }

  /**
   * The coordinator does not count the job as this launcher's any more (a report of it was
   * refused as unknown or not ours): kill the executor and send nothing more about the job. A
   * final report could only be refused too, or, if this launcher has been handed the job again
   * since, end the new run of it.
   */
  disown(reason: string): void {
    this.#interrupt({ kind: 'disowned', reason });
  }

  /** SIGKILL the executor's process group at once (forced exit). */
  killNow(): void {
    this.#process?.killNow();
  }

  #interrupt(what: Interruption): void {
    if (this.#interruption) return;
    this.#interruption = what;
    const o = this.#outcome;
    // (already taken when the exit grace ran out: the executor is being told to go since)
    if (!this.#answerBeforeInterruption && o && (o.result !== undefined || o.errorMessage !== undefined)) {
      this.#answerBeforeInterruption = { result: o.result, errorMessage: o.errorMessage, errorCode: o.errorCode };
    }
    this.#interrupted!();
    this.#watchdog?.stop();
    const why = what.kind === 'stop' ? 'stop requested' : what.kind === 'idle' ? 'executor idle' : what.reason;
    this.#log.info({ why }, 'stopping job');
    void this.#process?.terminate();
  }

  async #run(): Promise<void> {
    const { reporter } = this.#d;
    const jobId = this.job.job_id;
    this.#log.info(
      { type: this.job.type, session_name: this.job.session_name, agent_name: this.job.agent_name },
      'job claimed',
    );

    // a job this launcher must not run is failed before anything else (second line of defence:
    // the coordinator should not have offered it)
    const where = resolveJobDir(this.job.project_dir, this.#d.projectRoots);
    if (!where.ok) {
      this.#log.warn({ project_dir: this.job.project_dir, error_code: where.code }, 'job refused');
      return this.#report({ kind: 'failed', body: { error: where.error, error_code: where.code } });
    }
    const cwd = where.dir;

    const outcome: Outcome = { accounting: {}, killedAfterResult: false };
    this.#outcome = outcome;
    const notRun: ExecutorExit = { code: null, signal: null, stderrTail: '', spawnError: null, pipesAbandoned: false };
    // a stop or shutdown does not wait for `started` (the coordinator may be unreachable): the
    // final report is queued behind it and both go out in order when it answers
    const startedReport: Report = { kind: 'started', body: { working_dir: cwd } };
    const started = await Promise.race([reporter.send(jobId, startedReport), this.#interruptedPromise]);
    if (started === 'interrupted') return this.#finish(notRun, outcome);
    if (!started.ok) {
      if ('refused' in started && started.refused.details?.['current_status'] === 'stopping') {
        this.#interruption = { kind: 'stop' };
        return this.#finish(notRun, outcome);
      }
      if ('refused' in started && refusedForItsBody(started.refused)) {
        // refused for its body (by a proxy in front of the coordinator, say), not because the job
        // is not ours: left `claimed`, it would go back to the queue after the claim lease and be
        // handed out, and refused, again and again, never ending. It ends `failed` instead, saying
        // why (a failed report needs no `started` first); the executor never ran
        const { code, message } = started.refused;
        this.#log.error({ report: 'started', code }, 'the coordinator refused `started` for its body; reporting the job failed instead of running it');
        return this.#report(refusedInstead(jobId, startedReport, code, message));
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
    if (this.#interruption) return this.#finish(notRun, outcome);

    outcome.sessionId = this.job.executor_session_id ?? undefined;
    const watchdog = new Watchdog({
      idleMs: this.#d.idleTimeoutMs,
      exitGraceMs: this.#d.exitGraceMs,
      onIdle: () => {
        this.#log.warn({ idle_timeout_ms: this.#d.idleTimeoutMs }, 'executor silent for too long; stopping it');
        this.#interrupt({ kind: 'idle' });
      },
      onExitGraceOver: () => {
        this.#log.warn(
          { exit_grace_ms: this.#d.exitGraceMs },
          'executor gave its result but did not exit; stopping its process group',
        );
        outcome.killedAfterResult = true;
        // the answer stands, whatever the executor says once told to go (an error on SIGTERM, say)
        this.#answerBeforeInterruption = { result: outcome.result, errorMessage: outcome.errorMessage, errorCode: outcome.errorCode };
        // SIGTERM first, SIGKILL after --kill-grace, as for a stop: an agent CLI may run commands
        // outside the group (claude runs each Bash command in a session of its own) and end them
        // only when it is asked to go; the SIGKILL after --kill-grace reaches those whose parent
        // still runs (killGroupTree), not what it had handed on to init
        void this.#process?.terminate();
      },
    });
    this.#watchdog = watchdog;
    let proc: ExecutorProcess;
    try {
      proc = new ExecutorProcess(this.#d.executor, invocationOf(this.job, cwd), {
        cwd,
        env: buildExecutorEnv(
          this.#d.env,
          this.#d.passEnv,
          jobEnv(this.job, cwd, {
            coordinatorUrl: this.#d.coordinatorUrl,
            caFile: this.#d.caFile,
            launcherId: this.#d.launcherId(),
            token: this.#d.agentToken?.(this.job),
            outputMaxBytes: this.#d.limits?.()?.max_output_bytes,
          }),
        ),
        killGraceMs: this.#d.killGraceMs,
        pipeDrainMs: this.#d.pipeDrainMs,
        onActivity: () => watchdog.activity(),
        outputKeptBytes: () => this.#d.limits?.()?.max_output_bytes,
        onEvent: (event) => this.#onEvent(event, outcome),
        onStderrLine: (line) => this.#log.debug({ stderr: line }, 'executor stderr'),
        onFieldsDropped: (type, fields) =>
          this.#log.warn({ event: type, fields }, 'executor event fields that are not valid left out'),
      });
    } catch (err) {
      // spawn refuses some jobs outright, before any process exists: a NUL character in a value
      // that goes into the executor's environment (a session or agent name, say) throws
      // ERR_INVALID_ARG_VALUE instead of emitting 'error'. Reported as any executor that could
      // not be started is, or the job, already reported started, would stay `running` for good.
      watchdog.stop();
      const spawnError = err instanceof Error ? err : new Error(String(err), { cause: err });
      this.#log.error({ err: spawnError }, 'executor could not be started');
      return this.#finish({ ...notRun, spawnError }, outcome);
    }
    this.#process = proc;
    const pid = proc.pid;
    if (pid !== undefined && this.#d.lifeline) {
      const lifeline = this.#d.lifeline;
      lifeline.watch(pid, jobId);
      void proc.released.then(() => lifeline.forget(pid));
    }
    // `executor_pid`, not `pid`: pino's own `pid` field is the launcher's
    this.#log.info({ executor_pid: pid, executor: this.#d.executor.name, cwd }, 'executor started');
    // a stop that arrived while `started` was in flight
    if (this.#interruption) void proc.terminate();

    const exit = await proc.exited;
    watchdog.stop();
    this.#log.info({ code: exit.code, signal: exit.signal }, 'executor exited');
    if (exit.pipesAbandoned) {
      this.#log.warn(
        { executor_pid: pid },
        'a process the executor left running (outside its process group?) kept its output open; stopped reading it',
      );
    }
    await this.#finish(exit, outcome);
  }

  #onEvent(event: ExecutorEvent, outcome: Outcome): void {
    const jobId = this.job.job_id;
    switch (event.type) {
      case 'output':
        this.#log.debug({ output: event.text.replace(/\n$/, '') }, 'executor output');
        this.#d.reporter.output(jobId, event.text);
        break;
      case 'session':
        outcome.sessionId = event.session_id;
        this.#log.info({ executor_session_id: event.session_id }, 'executor session');
        break;
      case 'result': {
        outcome.result = event.text;
        const { usage, cost_usd, num_turns, duration_api_ms } = event;
        outcome.accounting = { usage, cost_usd, num_turns, duration_api_ms };
        this.#log.debug({ result_chars: event.text.length, cost_usd }, 'executor result');
        this.#watchdog?.finalEvent();
        break;
      }
      case 'error':
        outcome.errorMessage = event.message;
        outcome.errorCode = event.code;
        this.#log.warn({ error: event.message, error_code: event.code }, 'executor reported an error');
        this.#watchdog?.finalEvent();
        break;
    }
  }

  /** Queue the final report for how the executor ended. */
  async #finish(exit: ExecutorExit, o: Outcome): Promise<void> {
    const extra = {
      ...(o.sessionId === undefined ? {} : { executor_session_id: o.sessionId }),
      ...definedOnly(o.accounting),
    };
    const it = this.#interruption;
    if (it?.kind === 'disowned') {
      this.#log.info({ why: it.reason }, 'job disowned; no final report');
      this.#d.reporter.close(this.job.job_id);
      return;
    }
    // A stop or the launcher's shutdown that came after the executor's answer (a result or an
    // error: the turn was over, and the executor was in its exit grace) leaves that answer to
    // stand: a stopping job may still end completed or failed. What it says once killed (an
    // error on SIGTERM, say) changes nothing.
    const answer = this.#answerBeforeInterruption;
    const ended = it?.kind === 'stop' || it?.kind === 'interrupt';
    if (it?.kind === 'stop' && !answer) {
      return this.#report({ kind: 'stopped', body: { signal: exit.signal, ...extra } });
    }
    if (it?.kind === 'interrupt' && !answer) {
      const how = exit.signal ? ` (executor ended by ${exit.signal})` : '';
      return this.#report({
        kind: 'failed',
        body: { error: `${it.reason}: the job was interrupted${how}`, error_code: it.code, exit_code: exit.code, ...extra },
      });
    }
    if (it?.kind === 'idle') {
      const seconds = this.#d.idleTimeoutMs / 1000;
      return this.#report({
        kind: 'failed',
        body: {
          error: `the executor printed nothing for ${seconds} s (--idle-timeout) and was stopped`,
          error_code: 'executor_idle',
          exit_code: exit.code,
          ...extra,
        },
      });
    }
    if (exit.spawnError) {
      const cmd = [this.#d.executor.command, ...this.#d.executor.args].join(' ');
      return this.#report({
        kind: 'failed',
        body: { error: `could not start executor ${cmd}: ${exit.spawnError.message}`, exit_code: null },
      });
    }
    // killed after its result (by the watchdog, a stop or the shutdown): the result stands (it was
    // the end of the turn)
    const said = ended || o.killedAfterResult ? (answer ?? o) : o;
    const succeeded = o.killedAfterResult || ended ? said.result !== undefined : exit.code === 0;
    if (succeeded && said.errorMessage === undefined) {
      const result = said.result === undefined ? null : this.#fitResult(said.result, extra);
      return this.#report({ kind: 'completed', body: { status: 'success', result, ...extra } });
    }
    const failure = failureMessage(exit, said.errorMessage, ended || o.killedAfterResult);
    if (failure.cutBytes > 0) this.#log.warn({ report: 'failed', bytes_cut: failure.cutBytes }, 'report error too long; cut to fit');
    return this.#report({
      kind: 'failed',
      body: {
        error: failure.text,
        exit_code: exit.code,
        ...(said.errorCode === undefined ? {} : { error_code: said.errorCode }),
        ...extra,
      },
    });
  }

  /**
   * The result as a `completed` report can carry it: one larger than the coordinator takes (6 MiB
   * + 64 KiB by default; a result may be 16 MiB) would be refused (413) and fail the job, so it is
   * cut to fit, and its rest goes to the end of the job's output, queued before the report
   * (placeRest says what goes where, and the note says so).
   */
  #fitResult(result: string, extra: object): string {
    const limits = this.#d.limits?.();
    const max = limits?.max_report_bytes;
    if (max === undefined) return result;
    const cut = cutResult(storable(result), max, Buffer.byteLength(JSON.stringify(extra)));
    if (!cut) return result;
    const { reporter } = this.#d;
    const jobId = this.job.job_id;
    const placed = placeRest(cut, {
      jobId,
      maxReportBytes: max,
      queueMaxBytes: reporter.outputQueueMaxBytes,
      queueRoomBytes: reporter.outputRoom(jobId),
      keptBytes: limits?.max_output_bytes,
      outputEnd: reporter.outputEnd(jobId),
    });
    reporter.output(jobId, placed.output);
    this.#log.warn(placed.log.fields, placed.log.msg);
    return placed.result;
  }

  async #report(report: Report): Promise<void> {
    this.#log.info({ report: report.kind }, `job ${report.kind}`);
    // not awaited: the slot is free once the executor has exited; delivery is the reporter's job
    void this.#d.reporter.send(this.job.job_id, report, { last: true }).then((outcome) => {
      // refused for its body (too large, say): the job would stay `running` for good, so it ends
      // with a short report that says why (once), with what the refused one knew of the session
      // and its cost
      if (outcome.ok || !('refused' in outcome)) return;
      if (report.kind === 'failed' && report.body.error_code === 'report_refused') return;
      if (!bodyRefused(outcome.refused)) return;
      const { code, message } = outcome.refused;
      this.#log.error({ report: report.kind, code }, 'final report refused; reporting the job failed instead');
      void this.#d.reporter.send(this.job.job_id, refusedInstead(this.job.job_id, report, code, message), { last: true });
    });
  }
}
