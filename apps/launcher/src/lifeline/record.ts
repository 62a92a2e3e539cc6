import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { bootId, endGroups, isRunning, startTimeOf, type Group } from './proc.js';

/** One executor process group a launcher started, as recorded in its state directory. */
export interface RecordedGroup extends Group {
  job_id: string;
}

interface RecordFile {
  version: 1;
  boot_id: string;
  /** the launcher process that wrote the record */
  launcher: { pid: number; start_time: string | null };
  groups: RecordedGroup[];
}

const DIR = 'processes';

/**
 * The record of the executor process groups one launcher runs: `<state dir>/processes/<pid>-<n>.json`,
 * rewritten (atomically) whenever a group starts or ends. If the launcher dies in a way its
 * lifeline cannot cover (the reaper killed too, the machine's OOM killer...), the next launcher
 * started with the same state directory finds the record of a launcher that is no longer running
 * and ends what it lists: see endLeftovers.
 */
export class ProcessRecord {
  readonly path: string;
  readonly #groups = new Map<number, RecordedGroup>();
  readonly #launcher = { pid: process.pid, start_time: startTimeOf(process.pid) };
  readonly #bootId = bootId();

  constructor(stateDir: string) {
    const dir = join(stateDir, DIR);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // pid plus a random part: several launchers may run in one process (tests, embedding)
    this.path = join(dir, `${process.pid}-${randomBytes(4).toString('hex')}.json`);
    this.#write();
  }

  get groups(): RecordedGroup[] {
    return [...this.#groups.values()];
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
    const body: RecordFile = { version: 1, boot_id: this.#bootId, launcher: this.#launcher, groups: this.groups };
    const aside = `${this.path}.tmp`;
    writeFileSync(aside, JSON.stringify(body), { mode: 0o600 });
    renameSync(aside, this.path);
  }
}

/**
 * End the executors of launchers that died without ending them: every record in the state
 * directory whose launcher is no longer running (same pid and start time) is a leftover of a
 * previous life. Its groups get SIGTERM, SIGKILL after `killGraceMs`, and only while they are
 * still the groups that were recorded (see isSameGroup); records of launchers still running
 * (another launcher sharing the directory) are left alone. Resolves with what was ended.
 */
export async function endLeftovers(
  stateDir: string,
  o: { log: Logger; killGraceMs: number },
): Promise<RecordedGroup[]> {
  const dir = join(stateDir, DIR);
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const boot = bootId();
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
  for (const d of dead) rmSync(d.path, { force: true });
  return result;
}
