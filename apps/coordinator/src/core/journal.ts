import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Job, Launcher, LifecycleEvent, Session } from '@agentq/protocol';
import type { Logger } from 'pino';

/** Everything needed to rebuild the core: the latest snapshot of each entity. */
export interface StateSnapshot {
  /** id of the last lifecycle event, so event ids keep growing across restarts */
  lastEventId: number;
  sessions: Session[];
  launchers: Launcher[];
  /** in creation order */
  jobs: Job[];
}

/** One line of the journal. Upserts carry the whole entity; removals carry the id. */
type Line =
  | { id: number; job: Job }
  | { id: number; session: Session }
  | { id: number; launcher: Launcher }
  | { id: number; evicted_job: string }
  | { id: number; removed_launcher: string };

/**
 * An append-only journal of lifecycle events (one JSON line each, written synchronously so a
 * crash of the process loses nothing that was acknowledged). On open it is replayed into a
 * snapshot and compacted (rewritten with one line per live entity); it is compacted again when
 * it has grown well past the live state.
 */
export class Journal {
  #fd: number;
  #linesSinceCompaction = 0;
  #compactAfter: number;

  private constructor(
    private readonly path: string,
    private readonly log: Logger,
    liveEntities: number,
  ) {
    this.#fd = openSync(path, 'a');
    this.#compactAfter = Journal.#threshold(liveEntities);
  }

  static #threshold(live: number): number {
    return Math.max(10_000, live * 4);
  }

  /** Read (and compact) the journal at `path`, creating it if needed. */
  static open(path: string, log: Logger): { journal: Journal; snapshot: StateSnapshot } {
    mkdirSync(dirname(path), { recursive: true });
    const snapshot = existsSync(path) ? Journal.#replay(readFileSync(path, 'utf8'), log) : emptySnapshot();
    Journal.#writeCompacted(path, snapshot);
    const live = snapshot.jobs.length + snapshot.sessions.length + snapshot.launchers.length;
    log.info({ state_file: path, jobs: snapshot.jobs.length, sessions: snapshot.sessions.length }, 'state restored');
    return { journal: new Journal(path, log, live), snapshot };
  }

  static #replay(text: string, log: Logger): StateSnapshot {
    const jobs = new Map<string, Job>();
    const sessions = new Map<string, Session>();
    const launchers = new Map<string, Launcher>();
    let lastEventId = 0;
    const lines = text.split('\n');
    lines.forEach((raw, i) => {
      if (raw.trim() === '') return;
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
      } catch (err) {
        // only the last line can be torn (a crash mid-write); anything else is worth a loud warning
        log.warn({ err, line_number: i + 1, last: i >= lines.length - 2 }, 'journal line unreadable: skipped');
        return;
      }
      lastEventId = Math.max(lastEventId, line.id ?? 0);
      if ('job' in line) jobs.set(line.job.job_id, line.job);
      else if ('session' in line) sessions.set(line.session.session_name, line.session);
      else if ('launcher' in line) launchers.set(line.launcher.launcher_id, line.launcher);
      else if ('evicted_job' in line) jobs.delete(line.evicted_job);
      else if ('removed_launcher' in line) launchers.delete(line.removed_launcher);
    });
    return { lastEventId, jobs: [...jobs.values()], sessions: [...sessions.values()], launchers: [...launchers.values()] };
  }

  static #writeCompacted(path: string, s: StateSnapshot): void {
    const tmp = `${path}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      const id = s.lastEventId;
      const chunks: string[] = [];
      const flush = () => {
        if (chunks.length) writeSync(fd, chunks.join(''));
        chunks.length = 0;
      };
      const add = (line: Line) => {
        chunks.push(JSON.stringify(line) + '\n');
        if (chunks.length >= 1000) flush();
      };
      // sessions first (parents were created before children), then launchers, then jobs
      for (const session of s.sessions) add({ id, session });
      for (const launcher of s.launchers) add({ id, launcher });
      for (const job of s.jobs) add({ id, job });
      if (s.jobs.length + s.sessions.length + s.launchers.length === 0) writeSync(fd, '');
      flush();
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  }

  /** Append one lifecycle event. */
  record(event: LifecycleEvent): void {
    let line: Line;
    if ('job' in event) line = event.type === 'job.evicted' ? { id: event.id, evicted_job: event.job.job_id } : { id: event.id, job: event.job };
    else if ('session' in event) line = { id: event.id, session: event.session };
    else
      line =
        event.type === 'launcher.removed'
          ? { id: event.id, removed_launcher: event.launcher.launcher_id }
          : { id: event.id, launcher: event.launcher };
    writeSync(this.#fd, JSON.stringify(line) + '\n');
    this.#linesSinceCompaction++;
  }

  /** Whether the journal has grown enough to be worth rewriting from the live state. */
  get wantsCompaction(): boolean {
    return this.#linesSinceCompaction >= this.#compactAfter;
  }

  /** Rewrite the journal from `snapshot` (the core's live state) and carry on appending. */
  compact(snapshot: StateSnapshot): void {
    closeSync(this.#fd);
    Journal.#writeCompacted(this.path, snapshot);
    this.#fd = openSync(this.path, 'a');
    this.#linesSinceCompaction = 0;
    this.#compactAfter = Journal.#threshold(snapshot.jobs.length + snapshot.sessions.length + snapshot.launchers.length);
    this.log.debug({ state_file: this.path, jobs: snapshot.jobs.length }, 'journal compacted');
  }

  close(): void {
    fsyncSync(this.#fd);
    closeSync(this.#fd);
  }
}

const emptySnapshot = (): StateSnapshot => ({ lastEventId: 0, jobs: [], sessions: [], launchers: [] });
