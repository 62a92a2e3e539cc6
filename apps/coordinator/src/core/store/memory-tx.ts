import type { EventType } from '@agentq/protocol';
import { CoordinatorError } from '../errors.js';
import { isActive, type HostBindingRow, type IdempotencyRow, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import { nextJob, nextLauncher, nextSession } from '../row-versions.js';
import { emptyChangeSet, record, type ChangeSet } from './changes.js';
import type { MemoryState } from './memory-state.js';
import type { EntityRef, Tx } from './store.js';

const missing = (what: string) => new CoordinatorError('internal_error', `transaction: ${what} is missing`);

/**
 * A transaction over MemoryState: reads see the committed state overlaid with this
 * transaction's own changes; nothing reaches the state until `changes()` is applied by the store.
 * The store runs one at a time (a mutex), so the overlay is all the isolation needed.
 */
export class MemoryTx implements Tx {
  readonly #state: MemoryState;
  readonly #changes: ChangeSet;
  /**
   * The jobs this transaction touched, by session and by launcher (every launcher id a version of
   * the row had): the per-session and per-launcher reads look at these instead of at every touched
   * job, which made a batch create of n jobs cost n² (each new job offers its session's head).
   */
  readonly #touchedBySession = new Map<string, Set<string>>();
  readonly #touchedByLauncher = new Map<string, Set<string>>();

  constructor(
    state: MemoryState,
    readonly now: number,
  ) {
    this.#state = state;
    this.#changes = emptyChangeSet(state.jobSeq, state.sessionSeq);
  }

  changes(): ChangeSet {
    return this.#changes;
  }

  /** What to run once this transaction is committed (Tx.afterCommit). */
  readonly committed: (() => void)[] = [];

  afterCommit(fn: () => void): void {
    this.committed.push(fn);
  }

  // --- reads -------------------------------------------------------------------------------

  #job(id: string): JobRow | undefined {
    const c = this.#changes.jobs.get(id);
    return c ? c.after : this.#state.job(id);
  }

  async job(id: string): Promise<JobRow | undefined> {
    return this.#job(id);
  }

  #session(name: string): SessionRow | undefined {
    const c = this.#changes.sessions.get(name);
    return c ? c.after : this.#state.session(name);
  }

  async session(name: string): Promise<SessionRow | undefined> {
    return this.#session(name);
  }

  peekSession(name: string): Promise<SessionRow | undefined> {
    return this.session(name);
  }

  #launcher(id: string): LauncherRow | undefined {
    const c = this.#changes.launchers.get(id);
    return c ? c.after : this.#state.launchers.get(id);
  }

  async launcher(id: string): Promise<LauncherRow | undefined> {
    return this.#launcher(id);
  }

  async launchers(): Promise<LauncherRow[]> {
    const rows = new Map(this.#state.launchers);
    for (const [id, c] of this.#changes.launchers) {
      if (c.after) rows.set(id, c.after);
      else rows.delete(id);
    }
    return [...rows.values()];
  }

  async launcherCount(): Promise<number> {
    let n = this.#state.launchers.size;
    for (const [id, c] of this.#changes.launchers) n += (c.after ? 1 : 0) - (this.#state.launchers.has(id) ? 1 : 0);
    return n;
  }

  // a scan: launchers are few, and a registration with a key is rare (once per launcher start)
  async launcherByRegistrationKey(key: string): Promise<LauncherRow | undefined> {
    return (await this.launchers()).find((l) => l.registrationKey === key);
  }

  /** Committed candidates plus the candidates among the jobs this transaction touched, as it sees them. */
  #view(committed: Iterable<string>, touched: ReadonlySet<string> | undefined, keep: (job: JobRow) => boolean): JobRow[] {
    const out: JobRow[] = [];
    for (const id of committed) {
      if (touched?.has(id)) continue;
      const job = this.#job(id);
      if (job && keep(job)) out.push(job);
    }
    for (const id of touched ?? []) {
      const job = this.#job(id);
      if (job && keep(job)) out.push(job);
    }
    return out;
  }

  /** The first of `#view`'s candidates, found without making the list (every offer asks it). */
  async activeJobOf(sessionName: string): Promise<JobRow | undefined> {
    const id = this.#state.sessionActive.get(sessionName);
    const touched = this.#touchedBySession.get(sessionName);
    if (id !== undefined && !touched?.has(id)) {
      const job = this.#job(id);
      if (job && job.sessionName === sessionName && isActive(job.status)) return job;
    }
    if (touched) {
      for (const t of touched) {
        const job = this.#job(t);
        if (job && job.sessionName === sessionName && isActive(job.status)) return job;
      }
    }
    return undefined;
  }

  async pendingJobsOf(sessionName: string): Promise<JobRow[]> {
    const ids = this.#state.sessionPending.get(sessionName) ?? [];
    const touched = this.#touchedBySession.get(sessionName);
    return this.#view(ids, touched, (j) => j.sessionName === sessionName && j.status === 'pending').sort((a, b) => a.seq - b.seq);
  }

  async activeJobsOfLauncher(launcherId: string): Promise<JobRow[]> {
    const ids = this.#state.launcherActive.get(launcherId) ?? [];
    const touched = this.#touchedByLauncher.get(launcherId);
    return this.#view(ids, touched, (j) => j.launcherId === launcherId && isActive(j.status)).sort((a, b) => a.seq - b.seq);
  }

  async pendingStopsOf(launcherId: string): Promise<JobRow[]> {
    const ids = this.#state.stopsPending.get(launcherId) ?? [];
    const touched = this.#touchedByLauncher.get(launcherId);
    return this.#view(ids, touched, (j) => j.launcherId === launcherId && j.stopPending && isActive(j.status)).sort((a, b) => a.seq - b.seq);
  }

  /** Index a touched job under its session and under each launcher a version of it had. */
  #touch(before: JobRow | undefined, after: JobRow | undefined): void {
    const row = after ?? before;
    if (!row) return;
    add(this.#touchedBySession, row.sessionName, row.id);
    if (before?.launcherId) add(this.#touchedByLauncher, before.launcherId, row.id);
    if (after?.launcherId) add(this.#touchedByLauncher, after.launcherId, row.id);
  }

  async readyJobsFor(launcher: LauncherRow, max: number): Promise<JobRow[]> {
    const touched = this.#changes.jobs;
    // jobs this transaction already changed are as it sees them; the index has the committed rest
    const ids = this.#state.ready.takeFor(launcher, max, (id) => {
      const c = touched.get(id);
      return c !== undefined && c.after?.readySince == null;
    });
    const rows = ids.map((id) => this.#job(id)!);
    for (const row of rows) if (row.routeKey !== null) this.#changes.offered.set(row.id, row.routeKey);
    return rows;
  }

  async idempotency(key: string): Promise<IdempotencyRow | undefined> {
    return this.#changes.idempotency.find((r) => r.key === key) ?? this.#state.idempotencyRow(key);
  }

  async hostBinding(hostId: string): Promise<HostBindingRow | undefined> {
    return this.#changes.hostBindings.findLast((r) => r.hostId === hostId) ?? this.#state.hostBinding(hostId);
  }

  // --- writes ------------------------------------------------------------------------------

  async nextJobSeq(): Promise<number> {
    return ++this.#changes.jobSeq;
  }

  async nextSessionSeq(): Promise<number> {
    return ++this.#changes.sessionSeq;
  }

  async insertJob(row: JobRow): Promise<void> {
    record(this.#changes.jobs, row.id, this.#state.jobs.get(row.id), row, row);
    this.#touch(undefined, row);
  }

  async updateJob(id: string, patch: Partial<JobRow>): Promise<JobRow> {
    // the committed row is read once: `record` reads it only when this is the first change to the row
    const change = this.#changes.jobs.get(id);
    const current = change ? change.after : this.#state.job(id);
    if (!current) throw missing(`job ${id}`);
    const next = nextJob(current, patch);
    record(this.#changes.jobs, id, change ? change.before : current, next, patch);
    this.#touch(current, next);
    return next;
  }

  async deleteJob(id: string): Promise<void> {
    const current = this.#job(id);
    record(this.#changes.jobs, id, this.#state.job(id), undefined, null);
    this.#touch(current, undefined);
  }

  async insertSession(row: SessionRow): Promise<void> {
    record(this.#changes.sessions, row.name, this.#state.sessions.get(row.name), row, row);
  }

  async updateSession(name: string, patch: Partial<SessionRow>): Promise<SessionRow> {
    // (its reads synchronous: an await here was a turn of the microtask queue per update; the
    // committed row read once, as in updateJob)
    const change = this.#changes.sessions.get(name);
    const current = change ? change.after : this.#state.session(name);
    if (!current) throw missing(`session ${name}`);
    const next = nextSession(current, patch);
    record(this.#changes.sessions, name, change ? change.before : current, next, patch);
    return next;
  }

  async deleteSession(name: string): Promise<void> {
    record(this.#changes.sessions, name, this.#state.session(name), undefined, null);
  }

  async insertLauncher(row: LauncherRow): Promise<void> {
    record(this.#changes.launchers, row.id, this.#state.launchers.get(row.id), row, row);
  }

  async updateLauncher(id: string, patch: Partial<LauncherRow>): Promise<LauncherRow> {
    const current = this.#launcher(id);
    if (!current) throw missing(`launcher ${id}`);
    const next = nextLauncher(current, patch);
    record(this.#changes.launchers, id, this.#state.launchers.get(id), next, patch);
    return next;
  }

  async deleteLauncher(id: string): Promise<void> {
    record(this.#changes.launchers, id, this.#state.launchers.get(id), undefined, null);
  }

  async putIdempotency(row: IdempotencyRow): Promise<void> {
    this.#changes.idempotency.push(row);
  }

  async putHostBinding(row: HostBindingRow): Promise<void> {
    this.#changes.hostBindings.push(row);
  }

  emit(type: EventType, ref: EntityRef): void {
    this.#changes.events.push({ type, ref });
  }
}

function add(index: Map<string, Set<string>>, key: string, id: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(id);
}
