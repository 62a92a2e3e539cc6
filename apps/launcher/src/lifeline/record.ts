import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { MAX_REPLACES } from '@agentq/protocol';
import { bootId, endGroups, isRunning, pidNamespace, startTimeOf, type Group } from './proc.js';

/** One executor process group a launcher started, as recorded in its state directory. */
export interface RecordedGroup extends Group {
  job_id: string;
}

interface RecordFile {
  version: 1;
  boot_id: string;
  /** the PID namespace its pids belong to (absent in records of earlier versions: this one's) */
  pid_ns?: string | null;
  /** the launcher process that wrote the record */
  launcher: { pid: number; start_time: string | null };
  groups: RecordedGroup[];
  /** the ids the coordinator gave this launcher (one per registration, the latest last) */
  launcher_ids?: string[];
  /** launchers of earlier lives this one has yet to tell the coordinator about (`replaces`) */
  predecessors?: string[];
}

/** What a launcher that is gone left behind: its executors' groups, and who it was. */
export interface Leftovers {
  /** the groups that were still running and are ended now */
  ended: RecordedGroup[];
  /** the launcher ids of the launchers that are gone (and of the ones they had yet to replace) */
  launcherIds: string[];
}

/** Registrations kept in a record: a launcher re-registers only when the coordinator forgot it. */
const MAX_IDS = 16;

const DIR = 'processes';

/**
 * The record of the executor process groups one launcher runs: `<state dir>/processes/<pid>-<n>.json`,
 * rewritten (atomically) whenever a group starts or ends, or the launcher registers. It also
 * names the launcher's ids at the coordinator: the next launcher started with the same state
 * directory tells the coordinator that those launchers are gone (`replaces`). If the launcher dies in a way its
 * lifeline cannot cover (the reaper killed too, the machine's OOM killer...), the next launcher
 * started with the same state directory finds the record of a launcher that is no longer running
 * and ends what it lists: see endLeftovers.
 */
export class ProcessRecord {
  readonly path: string;
  readonly #groups = new Map<number, RecordedGroup>();
  readonly #launcher = { pid: process.pid, start_time: startTimeOf(process.pid) };
  readonly #bootId = bootId();
  readonly #pidNs = pidNamespace();
  #launcherIds: string[] = [];
  #predecessors: string[];

  constructor(stateDir: string, predecessors: readonly string[] = []) {
    const dir = join(stateDir, DIR);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // pid plus a random part: several launchers may run in one process (tests, embedding)
    this.path = join(dir, `${process.pid}-${randomBytes(4).toString('hex')}.json`);
    // kept here until the coordinator has been told: a launcher that dies before registering
    // hands them on to the next one
    this.#predecessors = predecessors.slice(-MAX_REPLACES);
    this.#write();
  }

  get groups(): RecordedGroup[] {
    return [...this.#groups.values()];
  }

  /** The launchers of earlier lives not yet replaced at the coordinator. */
  get predecessors(): readonly string[] {
    return this.#predecessors;
  }

  /** Registered as `launcherId`, with the predecessors named in `replaces`. */
  registered(launcherId: string): void {
    this.#launcherIds = [...this.#launcherIds, launcherId].slice(-MAX_IDS);
    this.#predecessors = [];
    this.#write();
  }

  add(group: RecordedGroup): void {
    this.#groups.set(group.pgid, group);
    this.#write();
  }

  remove(pgid: number): void {
    if (this.#groups.delete(pgid)) this.#write();
  }

  /** The launcher is ending cleanly: nothing of it is left to end. */
  delete(): void {
    rmSync(this.path, { force: true });
  }

  #write(): void {
    const body: RecordFile = {
      version: 1,
      boot_id: this.#bootId,
      pid_ns: this.#pidNs,
      launcher: this.#launcher,
      groups: this.groups,
      launcher_ids: this.#launcherIds,
      predecessors: this.#predecessors,
    };
    const aside = `${this.path}.tmp`;
    writeFileSync(aside, JSON.stringify(body), { mode: 0o600 });
    renameSync(aside, this.path);
  }
}

/**
 * End the executors of launchers that died without ending them: every record in the state
 * directory whose launcher is no longer running (same pid and start time) is a leftover of a
 * previous life. A record of another PID namespace of this boot (another container sharing the
 * directory) is left alone: its pids mean nothing here. Its groups get SIGTERM, SIGKILL after `killGraceMs`, and only while they are
 * still the groups that were recorded (see isSameGroup); records of launchers still running
 * (another launcher sharing the directory) are left alone. Resolves with what was ended and the
 * ids the dead launchers had at the coordinator (for `replaces`); their records are deleted.
 */
export async function endLeftovers(stateDir: string, o: { log: Logger; killGraceMs: number }): Promise<Leftovers> {
  const dir = join(stateDir, DIR);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return { ended: [], launcherIds: [] };
  }
  const boot = bootId();
  const ns = pidNamespace();
  const dead: Array<{ path: string; record: RecordFile }> = [];
  for (const name of names) {
    const path = join(dir, name);
    let record: RecordFile;
    try {
      record = JSON.parse(readFileSync(path, 'utf8')) as RecordFile;
      if (record.version !== 1 || !Array.isArray(record.groups)) throw new Error('unknown format');
    } catch (err) {
      o.log.warn({ path, err: (err as Error).message }, 'ignoring an unreadable executor record');
      continue;
    }
    const owner = record.launcher;
    // a launcher of another PID namespace (another container mounting this directory): its pid
    // means nothing here, so whether it runs cannot be told; it is left alone (its groups are not
    // signalled, nor is it replaced) unless the machine has rebooted since
    const foreign = record.boot_id === boot && (record.pid_ns ?? ns) !== ns;
    if (foreign) continue;
    const running = record.boot_id === boot && isRunning(owner.pid, owner.start_time);
    if (!running) dead.push({ path, record });
  }
  // start times of another boot mean nothing: those groups are long gone
  const groups = dead.filter((d) => d.record.boot_id === boot).flatMap((d) => d.record.groups);
  const ended = new Set((await endGroups(groups, o.killGraceMs)).map((g) => g.pgid));
  const result = groups.filter((g) => ended.has(g.pgid));
  if (result.length > 0) {
    o.log.warn(
      { groups: result.map((g) => ({ pgid: g.pgid, job_id: g.job_id })) },
      'ended executors left running by a launcher that is gone',
    );
  }
  const launcherIds = dead.flatMap((d) => [...idsOf(d.record.predecessors), ...idsOf(d.record.launcher_ids)]);
  for (const d of dead) rmSync(d.path, { force: true });
  return { ended: result, launcherIds: [...new Set(launcherIds)] };
}

const LAUNCHER_ID = /^lnch_[0-9a-f]{12}$/;

/** The well-formed launcher ids of a record's list (a record is only ever written by a launcher). */
function idsOf(list: unknown): string[] {
  return Array.isArray(list) ? list.filter((id): id is string => typeof id === 'string' && LAUNCHER_ID.test(id)) : [];
}
