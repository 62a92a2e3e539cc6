import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { startTimeOf } from './proc.js';
import { ProcessRecord } from './record.js';

const REAPER = fileURLToPath(new URL('./reaper.js', import.meta.url));
/** A reaper that dies sooner than this after its start is not started again (it would spin). */
const MIN_REAPER_LIFE_MS = 1_000;

/**
 * Executors die with their launcher (issue 11, item 10). Executors run in their own process
 * groups (so that a stop kills the tools they started), which also means nothing kills them when
 * the launcher dies. Two mechanisms make sure something does:
 *
 * - the reaper (reaper.ts), one small process per launcher holding the read end of a pipe: when
 *   the launcher dies, even by SIGKILL, the pipe closes and the reaper ends the executor groups the
 *   launcher had told it about;
 * - the record (record.ts) of those groups in the state directory, for when the reaper died too:
 *   a launcher started later with the same state directory ends them (endLeftovers).
 *
 * Groups are told to both right after spawn, synchronously, and forgotten once gone.
 */
export class Lifeline {
  readonly #log: Logger;
  readonly #killGraceMs: number;
  readonly #record: ProcessRecord;
  #reaper: ChildProcess | undefined;
  #reaperStarted = 0;
  #closed = false;

  constructor(o: { stateDir: string; killGraceMs: number; log: Logger; predecessors?: readonly string[] }) {
    this.#log = o.log;
    this.#killGraceMs = o.killGraceMs;
    this.#record = new ProcessRecord(o.stateDir, o.predecessors);
    this.#startReaper();
  }

  /** The launchers of earlier lives the coordinator has yet to be told about (`replaces`). */
  get predecessors(): readonly string[] {
    return this.#record.predecessors;
  }

  /** Registered (again) as `launcherId`: recorded, so that the next launcher can replace it. */
  registered(launcherId: string): void {
    if (this.#closed) return;
    this.#updateRecord(() => this.#record.registered(launcherId));
  }

  /** The reaper's pid (for operators and tests). */
  get reaperPid(): number | undefined {
    return this.#reaper?.pid;
  }

  /** An executor was spawned as the leader of process group `pgid`. Never throws. */
  watch(pgid: number, jobId: string): void {
    if (this.#closed) return;
    const group = { pgid, start_time: startTimeOf(pgid), job_id: jobId };
    this.#send({ watch: { pgid, start_time: group.start_time } });
    this.#updateRecord(() => this.#record.add(group));
  }

  /** The group is gone (or was SIGKILLed): nothing to end any more. Never throws. */
  forget(pgid: number): void {
    // after close() the reaper has been told the launcher is ending and the record is gone
    if (this.#closed) return;
    this.#send({ forget: pgid });
    this.#updateRecord(() => this.#record.remove(pgid));
  }

  /** The record is the second line of defence: failing to write it must not fail a job. */
  #updateRecord(change: () => void): void {
    try {
      change();
    } catch (err) {
      this.#log.warn({ err, path: this.#record.path }, 'could not update the record of running executors');
    }
  }

  /**
   * The launcher is ending: close the pipe (the reaper exits). Its executors have ended. The
   * record is deleted when the coordinator knows the launcher is gone (`left`: it deregistered);
   * otherwise (a forced exit, a fatal error, a coordinator that did not answer the
   * deregistration) it is kept, and the reaper keeps it as it keeps a killed launcher's, so that
   * the next launcher started with the state directory names this one in `replaces` and its jobs
   * end at once rather than at the heartbeat timeout.
   */
  close(o: { left: boolean } = { left: true }): void {
    if (this.#closed) return;
    this.#closed = true;
    // the record first: a reaper that finds it at the pipe's end takes the launcher for dead
    if (o.left) this.#record.delete();
    this.#reaper?.stdin?.end();
  }

  #send(msg: unknown): void {
    const stdin = this.#reaper?.stdin;
    // a pipe write is attempted at once by libuv, so the line is out before the next tick
    if (stdin && !stdin.destroyed) stdin.write(`${JSON.stringify(msg)}\n`);
  }

  #startReaper(): void {
    const child = spawn(process.execPath, [REAPER, String(this.#killGraceMs), this.#record.path], {
      // its own process group: a signal to the launcher's group (Ctrl+C, kill -- -PGID) spares it
      detached: true,
      stdio: ['pipe', 'ignore', 'inherit'],
    });
    this.#reaper = child;
    this.#reaperStarted = Date.now();
    child.stdin!.on('error', () => {}); // EPIPE once it is gone: handled by 'exit' below
    // neither the process nor its pipe keeps the launcher's event loop alive
    child.unref();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    child.once('error', (err) => this.#log.error({ err }, 'could not start the lifeline reaper'));
    child.once('exit', (code, signal) => {
      if (this.#closed) return;
      const quick = Date.now() - this.#reaperStarted < MIN_REAPER_LIFE_MS;
      this.#log.error(
        { reaper_pid: child.pid, code, signal },
        quick
          ? 'the lifeline reaper died at once; executors will not die with this launcher (a later launcher ends them)'
          : 'the lifeline reaper died; starting it again',
      );
      if (quick) return;
      this.#startReaper();
      for (const g of this.#record.groups) this.#send({ watch: { pgid: g.pgid, start_time: g.start_time } });
    });
    this.#log.debug({ reaper_pid: child.pid }, 'lifeline reaper started');
  }
}
