import type { Logger } from 'pino';
import type { Job } from '@agentq/protocol';
import { AgentqClient, toError, type BackoffOptions } from '@agentq/client';
import { ConfigError, readTokenFile, type LauncherConfig } from './config.js';
import { Connectivity, describe } from './connectivity.js';
import { runHeartbeat } from './heartbeat.js';
import { JobRunner } from './job-runner.js';
import { builtinLabels } from './labels.js';
import { Lifeline } from './lifeline/lifeline.js';
import { endLeftovers } from './lifeline/record.js';
import { Poller } from './poller.js';
import { Registration } from './registration.js';
import { Reporter } from './reporter.js';
import { loadHostId } from './state-dir.js';
import { Supervisor } from './supervisor.js';
import { SyncChannel } from './sync-channel.js';

export interface LauncherDeps {
  log: Logger;
  /** environment executors' environments are filtered from (default process.env) */
  env?: Record<string, string | undefined>;
  /** version sent at registration */
  version?: string;
  /** backoff of polls, registrations and reports (default 200 ms doubling up to 30 s) */
  retry?: BackoffOptions;
  /** at exit, how long undelivered reports may still be retried (default 15 s) */
  reportDrainMs?: number;
  /** after an executor exits, how long its output pipes may stay open (default 2 s; see ExecutorProcess) */
  pipeDrainMs?: number;
  /**
   * The per-job agent token hook (issue 12); see JobRunnerDeps.agentToken. Default: the token the
   * coordinator minted for the job (`agent_tokens` of the poll answer that handed it out).
   */
  agentToken?: (job: Job) => string | undefined;
}

/** Why `run()` ended. */
export type LauncherExit = 'deregistered' | 'shutdown';

/**
 * The launcher: registers, polls, runs jobs through the supervisor, heartbeats and reports,
 * until the coordinator deregisters it or `shutdown()` is called. Two signals run through every
 * loop: `#stopPolling` (no new jobs) and `#exit` (abandon network retries; the very end).
 *
 *   run ─► end leftovers ─► lifeline ─► register ─► poll loop ───► drain ─► report drain ─► deregister self ─► done
 *                                                   heartbeat loop ──────────────────────┘
 *   drain: wait for running jobs (up to --shutdown-grace on shutdown), then interrupt them
 *   end leftovers: executors a launcher that died (with its lifeline) left running are ended first,
 *                  and the launchers that died are named at registration (`replaces`)
 */
export class Launcher {
  readonly config: LauncherConfig;
  readonly client: AgentqClient;
  readonly #log: Logger;
  readonly #deps: LauncherDeps;
  readonly #connectivity: Connectivity;
  readonly #registration: Registration;
  readonly #reporter: Reporter;
  readonly #supervisor: Supervisor;
  readonly #poller: Poller;
  readonly #stopPolling = new AbortController();
  readonly #exit = new AbortController();
  #shutdownRequested: (() => void) | undefined;
  readonly #shutdown = new Promise<void>((resolve) => (this.#shutdownRequested = resolve));
  #isShuttingDown = false;
  #running: Promise<LauncherExit> | undefined;
  #registered: ((id: string) => void) | undefined;
  #hostId: string | undefined;
  #lifeline: Lifeline | undefined;
  /** the coordinator knows this launcher is gone (it deregistered itself, or was deregistered) */
  #left = false;
  /** per-job agent tokens from poll answers, until the job's runner is done */
  readonly #agentTokens = new Map<string, string>();
  /** resolves with the launcher id once the first registration succeeded */
  readonly registered = new Promise<string>((resolve) => (this.#registered = resolve));

  constructor(config: LauncherConfig, deps: LauncherDeps) {
    this.config = config;
    this.#deps = deps;
    this.#log = deps.log;
    // one connection parks on the long poll; the rest serve report batches and heartbeats
    this.client = new AgentqClient({
      url: config.url,
      connections: Math.max(4, config.maxJobs + 2),
      // its own credential once registered (see Registration.token)
      token: () => this.#registration.token,
      ...(config.caFile ? { caFile: config.caFile } : {}),
    });
    this.#connectivity = new Connectivity(this.#log);
    this.#registration = new Registration({
      client: this.client,
      log: this.#log,
      connectivity: this.#connectivity,
      retry: deps.retry,
      token: this.#registrationToken(),
      body: () => ({
        hostname: config.hostname,
        project_dir: config.projectDir,
        executor_type: config.executor.name,
        max_jobs: config.maxJobs,
        ...(deps.version ? { version: deps.version } : {}),
        // --- placement (issue 9) ---
        labels: { ...builtinLabels({ hostname: config.hostname, executor: config.executor.name }), ...config.labels },
        project_roots: config.projectRoots,
        ...(this.#hostId ? { host_id: this.#hostId } : {}),
        portable_sessions: config.portableSessions ?? config.executor.portableSessions,
        // earlier lives of this launcher (found in the state directory): gone, jobs and all
        ...(this.#lifeline?.predecessors.length ? { replaces: [...this.#lifeline.predecessors] } : {}),
      }),
      onRegistered: (res) => {
        this.#lifeline?.registered(res.launcher_id);
        // a poll backing off after a failure as the launcher it was goes now, as the new one
        this.#poller.registered(res.launcher_id);
      },
    });
    // reports go out in batches on report-and-poll requests (POST /launcher/sync)
    const channel = new SyncChannel({ client: this.client, onAnswer: (res) => this.#poller.answered(res) });
    this.#reporter = new Reporter({
      client: this.client,
      transport: (jobId, report, launcherId, signal) => channel.deliver(jobId, report, launcherId, signal),
      registration: this.#registration,
      connectivity: this.#connectivity,
      log: this.#log,
      signal: this.#exit.signal,
      retry: deps.retry,
      onRefused: (jobId, report, err) => {
        if (err.status === 404 || err.status === 409) {
          this.#supervisor.disowned(jobId, `the coordinator refused its ${report.kind} report: ${err.code}`);
        }
      },
    });
    this.#supervisor = new Supervisor({
      maxJobs: config.maxJobs,
      reporter: this.#reporter,
      log: this.#log,
      runJob: (job) => this.#runJob(job),
    });
    this.#poller = new Poller({
      client: this.client,
      registration: this.#registration,
      supervisor: this.#supervisor,
      connectivity: this.#connectivity,
      log: this.#log,
      channel,
      exit: this.#exit.signal,
      retry: deps.retry,
      onAgentTokens: (tokens) => {
        for (const [jobId, token] of Object.entries(tokens)) this.#agentTokens.set(jobId, token);
      },
    });
  }

  /**
   * The token each registration is made with: the one given, or what the token file holds at that
   * moment (a launcher registering again after a token rotation uses the new one). A file that
   * cannot be read then leaves the token read before.
   */
  #registrationToken(): () => string | undefined {
    const { tokenFile } = this.config;
    let token = this.config.token;
    if (!tokenFile) return () => token;
    return () => {
      try {
        const now = readTokenFile(tokenFile);
        if (now !== token && token !== undefined) this.#log.info({ path: tokenFile }, 'the token file holds another token now; registering with it');
        token = now;
      } catch (err) {
        this.#log.warn({ err: toError(err).message }, 'cannot read the token file again; registering with the token it held before');
      }
      return token;
    };
  }

  /** This host's stable identity (undefined until run() has loaded it from the state directory). */
  get hostId(): string | undefined {
    return this.#hostId;
  }

  /** The pid of the lifeline's reaper (undefined before run() started it). */
  get reaperPid(): number | undefined {
    return this.#lifeline?.reaperPid;
  }

  /** The current launcher id (undefined before registration). */
  get launcherId(): string | undefined {
    return this.#registration.id;
  }

  /** Run until deregistered or shut down. Rejects only if registration is refused for good. */
  run(): Promise<LauncherExit> {
    this.#running ??= this.#run();
    return this.#running;
  }

  /**
   * Graceful shutdown: stop taking jobs, give running ones up to --shutdown-grace to finish, then
   * kill them and report them failed, deliver pending reports, deregister. Resolves when done.
   */
  shutdown(): Promise<LauncherExit> {
    if (!this.#isShuttingDown) {
      this.#isShuttingDown = true;
      this.#log.info({ running_jobs: this.#supervisor.runningIds }, 'shutting down');
      // still trying to register (coordinator unreachable): nothing to drain, give up at once
      if (this.#registration.id === undefined) this.#stopPolling.abort(new Error('shutdown before registration'));
      this.#shutdownRequested!();
    }
    return this.run();
  }

  /** Kill every executor's process group now and abandon all network work (forced exit). */
  forceKill(): void {
    this.#supervisor.killAllNow();
    this.#stopPolling.abort(new Error('forced exit'));
    this.#exit.abort(new Error('forced exit'));
  }

  async #run(): Promise<LauncherExit> {
    const { config } = this;
    try {
      try {
        this.#hostId = loadHostId(config.stateDir);
        const leftovers = await endLeftovers(config.stateDir, { log: this.#log, killGraceMs: config.killGraceMs });
        this.#lifeline = new Lifeline({
          stateDir: config.stateDir,
          killGraceMs: config.killGraceMs,
          log: this.#log,
          predecessors: leftovers.launcherIds,
        });
      } catch (err) {
        // a directory it may not write, a file where the directory should be, a broken host-id:
        // the set-up's mistake, said as one (exit 2), naming the option
        throw new ConfigError(
          '--state-dir / AGENTQ_STATE_DIR',
          `${config.stateDir} cannot be used as the launcher's state directory: ${toError(err).message}`,
        );
      }
      try {
        await this.#registration.register(AbortSignal.any([this.#exit.signal, this.#stopPolling.signal]));
      } catch (err) {
        if (this.#isShuttingDown) return 'shutdown';
        throw err;
      }
      this.#registered!(this.#registration.id!);
      this.#log.info(
        {
          launcher_id: this.#registration.id,
          executor: config.executor.name,
          max_jobs: config.maxJobs,
          host_id: this.#hostId,
          project_roots: config.projectRoots,
          reaper_pid: this.#lifeline.reaperPid,
        },
        'launcher ready; polling for jobs',
      );
      const heartbeat = runHeartbeat(
        {
          client: this.client,
          registration: this.#registration,
          supervisor: this.#supervisor,
          connectivity: this.#connectivity,
          log: this.#log,
        },
        this.#exit.signal,
      );

      // polling ends with a deregistration notice, or goes on (capacity 0) while a shutdown drains
      const polling = this.#poller.run(this.#stopPolling.signal);
      const first = await Promise.race([polling, this.#shutdown.then(() => 'shutdown' as const)]);
      let exit: LauncherExit;
      if (first === 'deregistered') {
        exit = 'deregistered';
        this.#registration.retire();
        await this.#afterDeregistration();
      } else {
        exit = 'shutdown';
        this.#poller.drain();
        await this.#drainForShutdown();
      }
      this.#stopPolling.abort(new Error('launcher exiting'));
      await polling;

      const drainMs = this.#deps.reportDrainMs ?? 15_000;
      const drainTimeout = AbortSignal.timeout(drainMs);
      // a report the coordinator failed, waiting a backoff that outlasts the drain, goes once more now
      this.#connectivity.leavingAt(Date.now() + drainMs);
      if (!(await this.#reporter.drain(AbortSignal.any([drainTimeout, this.#exit.signal])))) {
        this.#log.error(
          { pending_reports: this.#reporter.pending },
          'exiting with reports the coordinator never acknowledged',
        );
      }
      this.#exit.abort(new Error('launcher exiting'));
      await heartbeat;
      await this.#deregisterSelf(exit);
      this.#log.info({ reason: exit }, 'launcher stopped');
      return exit;
    } finally {
      this.#stopPolling.abort(new Error('launcher exiting'));
      this.#exit.abort(new Error('launcher exiting'));
      // every executor has ended by now (drained, interrupted or force-killed); the record is
      // kept for the next launcher unless the coordinator knows this one is gone
      const nothingToTell = this.#registration.id === undefined && !this.#lifeline?.predecessors.length;
      this.#lifeline?.close({ left: this.#left || nothingToTell });
      await this.client.destroy().catch(() => {});
    }
  }

  /** Deregistered: let running jobs finish (or stop them with --stop-on-exit); a shutdown still cuts in. */
  async #afterDeregistration(): Promise<void> {
    if (this.config.stopOnExit) {
      await this.#supervisor.interruptAll('launcher deregistered (--stop-on-exit)', 'launcher_deregistered');
      return;
    }
    if (this.#supervisor.runningIds.length > 0) {
      this.#log.info({ running_jobs: this.#supervisor.runningIds }, 'letting running jobs finish before exiting');
    }
    const idle = this.#supervisor.idle();
    if ((await Promise.race([idle.then(() => 'idle' as const), this.#shutdown])) !== 'idle') {
      await this.#drainForShutdown();
    }
  }

  /** Shutdown: running jobs get the grace period, then are interrupted. */
  async #drainForShutdown(): Promise<void> {
    const grace = this.config.shutdownGraceMs;
    const idle = this.#supervisor.idle();
    if (this.#supervisor.runningIds.length > 0) {
      this.#log.info({ running_jobs: this.#supervisor.runningIds, grace_ms: grace }, 'waiting for running jobs');
    }
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => (timer = setTimeout(() => resolve('expired'), grace)));
    const first = await Promise.race([idle.then(() => 'idle' as const), expired]);
    clearTimeout(timer);
    if (first === 'expired') {
      this.#log.warn({ running_jobs: this.#supervisor.runningIds }, 'grace period over; killing running jobs');
      await this.#supervisor.interruptAll('launcher shutting down', 'launcher_shutdown');
    }
  }

  async #deregisterSelf(exit: LauncherExit): Promise<void> {
    const id = this.#registration.id;
    if (!id) return;
    try {
      await this.client.deleteLauncher(id, { self: true, signal: AbortSignal.timeout(5_000) });
      this.#left = true;
      this.#log.info({ launcher_id: id }, 'deregistered');
    } catch (err) {
      // after a deregistration notice the coordinator may have forgotten us already
      if (exit === 'deregistered') this.#left = true;
      const level = exit === 'deregistered' ? 'debug' : 'warn';
      this.#log[level]({ launcher_id: id, err: describe(toError(err)) }, 'could not deregister');
    }
  }

  #runJob(job: Job): JobRunner {
    const runner = new JobRunner(job, {
      executor: this.config.executor,
      reporter: this.#reporter,
      log: this.#log.child({ job_id: job.job_id, launcher_id: this.#registration.id }),
      launcherId: () => this.#registration.id!,
      coordinatorUrl: this.config.url,
      caFile: this.config.caFile,
      projectRoots: this.config.projectRoots,
      killGraceMs: this.config.killGraceMs,
      pipeDrainMs: this.#deps.pipeDrainMs,
      env: this.#deps.env ?? process.env,
      passEnv: this.config.passEnv,
      lifeline: this.#lifeline,
      idleTimeoutMs: this.config.idleTimeoutMs,
      exitGraceMs: this.config.exitGraceMs,
      agentToken: this.#deps.agentToken ?? ((j) => this.#agentTokens.get(j.job_id)),
      limits: () => (this.#registration.id === undefined ? undefined : this.#registration.settings),
    });
    void runner.done.then(() => this.#agentTokens.delete(job.job_id));
    return runner;
  }
}
