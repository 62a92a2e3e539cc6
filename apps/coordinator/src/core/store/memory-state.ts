import { isTerminal, type JobStatus } from '@agentq/protocol';
import { DeadlineHeap } from '../deadline-heap.js';
import { heldOutcomeBytes, isActive, queuedMessageBytes, type HostBindingRow, type IdempotencyRow, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import { newest, type SessionExtras } from '../wire.js';
import type { ChangeSet, RowChange } from './changes.js';
import { nextJob, nextLauncher, nextSession } from '../row-versions.js';
import { ReadyIndex } from './ready-index.js';
import type { ListJobsFilter, ListSessionsFilter } from './store.js';

/** Where rows that are not in memory come from (the SQLite store; synchronous). */
export interface StateLoader {
  job(id: string): JobRow | undefined;
  session(name: string): SessionRow | undefined;
  idempotency(key: string): IdempotencyRow | undefined;
  hostBinding(hostId: string): HostBindingRow | undefined;
}

/**
 * An append-only list of (seq, key) in seq order, with lazy removal; for newest-first paging.
 * `live(key, seq)` tells an entry whose row is still there: by its seq as well as its key, since a
 * key may come back with a new seq while its old entry is still here (a session name retention
 * deleted, started again; a job id drawn again after retention deleted its job). By the key alone,
 * the old entry counted as live and the key was listed twice.
 */
class SeqList {
  seqs: number[] = [];
  keys: string[] = [];
  #dead = 0;

  push(seq: number, key: string): void {
    this.seqs.push(seq);
    this.keys.push(key);
  }

  /** Add (seq, key) at its place unless it is there (a job live again: a group commit undone). */
  ensure(seq: number, key: string): void {
    const lo = this.#firstAtLeast(seq);
    if (this.keys[lo] === key) return;
    this.seqs.splice(lo, 0, seq);
    this.keys.splice(lo, 0, key);
  }

  /** Walk keys newest first, starting below `before`, while `visit` returns true. */
  walk(before: number | undefined, live: (key: string, seq: number) => boolean, visit: (key: string) => boolean): void {
    let i = before === undefined ? this.seqs.length - 1 : this.#firstAtLeast(before) - 1;
    for (; i >= 0; i--) {
      const key = this.keys[i]!;
      if (!live(key, this.seqs[i]!)) continue;
      if (!visit(key)) return;
    }
  }

  /** The index of the first entry whose seq is `seq` or more (the length if none is). */
  #firstAtLeast(seq: number): number {
    let lo = 0;
    let hi = this.seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.seqs[mid]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** A key left the map it indexes: compact once half the list is dead. */
  died(live: (key: string, seq: number) => boolean): void {
    if (++this.#dead > 1024 && this.#dead * 2 > this.keys.length) {
      const seqs: number[] = [];
      const keys: string[] = [];
      for (let i = 0; i < this.keys.length; i++) {
        if (live(this.keys[i]!, this.seqs[i]!)) {
          seqs.push(this.seqs[i]!);
          keys.push(this.keys[i]!);
        }
      }
      this.seqs = seqs;
      this.keys = keys;
      this.#dead = 0;
    }
  }
}

/**
 * The committed state in memory and its indexes. Indexes are derived from rows only, in `apply`:
 * the lifecycle modules never maintain them. With `fullHistory` (memory mode) this is the whole
 * state; the SQLite store uses it as the hot part (every non-terminal job, every launcher, the
 * recent rest) and reads history from the database.
 */
export class MemoryState {
  readonly jobs = new Map<string, JobRow>();
  readonly sessions = new Map<string, SessionRow>();
  readonly launchers = new Map<string, LauncherRow>();
  readonly idempotency = new Map<string, IdempotencyRow>();
  /** host bindings (the SQLite store reads them from its file instead: `loader`) */
  readonly hostBindings = new Map<string, HostBindingRow>();

  readonly ready = new ReadyIndex();
  readonly deadlines = new DeadlineHeap<string>();
  /** session -> its active job id */
  readonly sessionActive = new Map<string, string>();
  /** session -> its pending job ids, oldest first */
  readonly sessionPending = new Map<string, string[]>();
  /** launcher -> job ids it holds */
  readonly launcherActive = new Map<string, Set<string>>();
  /** every active (claimed, running, stopping) job id */
  readonly active = new Set<string>();
  /** launcher -> its job ids with a stop it has not been told about (`stopPending`) */
  readonly stopsPending = new Map<string, Set<string>>();
  /** terminal job ids in the order they ended */
  #ended: string[] = [];
  #endedHead = 0;
  pendingCount = 0;
  /** UTF-8 bytes of the prompts of pending jobs (admission control: MAX_QUEUED_BYTES) */
  pendingBytes = 0;
  readonly #pendingSizes = new Map<string, number>();
  /** UTF-8 bytes of the messages sessions hold for their next turn (admission, like pendingBytes) */
  messageBytes = 0;
  /** UTF-8 bytes of the child outcomes sessions hold (heldOutcomeBytes; admission, like pendingBytes) */
  outcomeBytes = 0;
  jobSeq = 0;
  sessionSeq = 0;
  lastEventId = 0;
  /**
   * Jobs by status, kept by `apply` (every status change, insert and deletion goes through it):
   * what `/metrics` reads at each scrape, never a walk over history. Counts every job the store
   * holds, the SQLite store's ended jobs in the file included (`addStatusCounts` at start).
   */
  readonly #byStatus = new Map<JobStatus, number>();

  // indexes of history, kept only when this is the whole state
  readonly #jobOrder = new SeqList();
  /** every non-terminal job in seq order, in both modes: lists of live jobs walk this, not history */
  readonly #liveOrder = new SeqList();
  readonly #isLive = (id: string, seq: number): boolean => {
    const job = this.jobs.get(id);
    return job !== undefined && job.seq === seq && !isTerminal(job.status);
  };
  readonly #isJob = (id: string, seq: number): boolean => this.jobs.get(id)?.seq === seq;
  readonly #isSession = (name: string, seq: number): boolean => this.sessions.get(name)?.seq === seq;
  readonly #sessionOrder = new SeqList();
  readonly #sessionJobs = new Map<string, Set<string>>();
  readonly #children = new Map<string, Set<string>>();

  constructor(
    readonly fullHistory: boolean,
    readonly loader?: StateLoader,
  ) {}

  job(id: string): JobRow | undefined {
    const row = this.jobs.get(id);
    if (row || !this.loader) return row;
    const loaded = this.loader.job(id);
    if (loaded) {
      this.jobs.set(id, loaded);
      // a finished job read back from the file joins the hot window, and leaves it with the rest
      if (isTerminal(loaded.status)) this.#ended.push(id);
    }
    return loaded;
  }

  session(name: string): SessionRow | undefined {
    const row = this.sessions.get(name);
    if (row || !this.loader) return row;
    const loaded = this.loader.session(name);
    if (loaded) this.sessions.set(name, loaded);
    return loaded;
  }

  idempotencyRow(key: string): IdempotencyRow | undefined {
    return this.idempotency.get(key) ?? this.loader?.idempotency(key);
  }

  hostBinding(hostId: string): HostBindingRow | undefined {
    return this.hostBindings.get(hostId) ?? this.loader?.hostBinding(hostId);
  }

  /** Apply a committed change set to the rows and every index. */
  apply(changes: ChangeSet): void {
    this.jobSeq = Math.max(this.jobSeq, changes.jobSeq);
    this.sessionSeq = Math.max(this.sessionSeq, changes.sessionSeq);
    for (const [name, c] of changes.sessions) this.#applySession(name, c);
    for (const [id, c] of changes.jobs) this.#applyJob(id, c);
    for (const [id, c] of changes.launchers) this.#applyLauncher(id, c);
    for (const row of changes.idempotency) this.idempotency.set(row.key, row);
    for (const row of changes.hostBindings) this.hostBindings.set(row.hostId, row);
  }

  /** Replace one field set of a committed row outside a transaction (output length, sign of life). */
  patchJob(id: string, patch: Partial<JobRow>): void {
    const row = this.jobs.get(id);
    if (row) this.jobs.set(id, nextJob(row, patch));
  }
  patchLauncher(id: string, patch: Partial<LauncherRow>): void {
    const row = this.launchers.get(id);
    if (row) this.launchers.set(id, nextLauncher(row, patch));
  }

  #applyJob(id: string, c: RowChange<JobRow>): void {
    const before = c.kind === 'insert' ? undefined : (this.jobs.get(id) ?? c.before);
    // the transaction's version, unless a write outside transactions (output length) changed the
    // committed row meanwhile: then its patch goes on top of that row
    const after =
      c.kind === 'delete' ? undefined : c.kind === 'insert' || before === c.before ? c.after : nextJob(before!, c.patch);
    if (before?.status !== after?.status) {
      if (before) this.#countStatus(before.status, -1);
      if (after) this.#countStatus(after.status, 1);
    }
    if (!before && after) {
      if (this.fullHistory) {
        this.#jobOrder.push(after.seq, id);
        let set = this.#sessionJobs.get(after.sessionName);
        if (!set) this.#sessionJobs.set(after.sessionName, (set = new Set()));
        set.add(id);
      }
      if (!isTerminal(after.status)) this.#liveOrder.push(after.seq, id);
    }
    // a live job's deadline, when it is new, back (an undone group commit turned an ended job back:
    // a sweep may have taken its deadline while it had ended) or moved (a delivery's, counted from
    // its claim: the earlier one, once due, is let go; dueTimeouts drops ended jobs)
    if (after && !isTerminal(after.status) && after.timeoutMs !== null) {
      const wasLive = before !== undefined && !isTerminal(before.status);
      if (!wasLive || after.timeoutMs !== before.timeoutMs) this.deadlines.push(after.createdAt + after.timeoutMs, id);
    }
    const wasPending = before?.status === 'pending';
    const isPending = after?.status === 'pending';
    if (wasPending && !isPending) this.#pendingRemove(before!.sessionName, id);
    if (!wasPending && isPending) this.#pendingInsert(after!.sessionName, id, after!.seq, after!.prompt);

    const wasActive = before !== undefined && isActive(before.status);
    const nowActive = after !== undefined && isActive(after.status);
    const moved = before?.launcherId !== after?.launcherId;
    if (wasActive && (!nowActive || moved)) {
      if (this.sessionActive.get(before!.sessionName) === id) this.sessionActive.delete(before!.sessionName);
      const held = before!.launcherId === null ? undefined : this.launcherActive.get(before!.launcherId);
      held?.delete(id);
      if (held?.size === 0) this.launcherActive.delete(before!.launcherId!);
      this.active.delete(id);
    }
    if (nowActive && (!wasActive || moved)) {
      this.sessionActive.set(after!.sessionName, id);
      if (after!.launcherId !== null) {
        let held = this.launcherActive.get(after!.launcherId);
        if (!held) this.launcherActive.set(after!.launcherId, (held = new Set()));
        held.add(id);
      }
      this.active.add(id);
    }

    const stopWas = before?.stopPending && before.launcherId !== null ? before.launcherId : null;
    const stopIs = after?.stopPending && after.launcherId !== null ? after.launcherId : null;
    if (stopWas !== null && stopWas !== stopIs) {
      const set = this.stopsPending.get(stopWas);
      set?.delete(id);
      if (set?.size === 0) this.stopsPending.delete(stopWas);
    }
    if (stopIs !== null && stopIs !== stopWas) {
      let set = this.stopsPending.get(stopIs);
      if (!set) this.stopsPending.set(stopIs, (set = new Set()));
      set.add(id);
    }

    if (before?.readySince != null && (after?.readySince == null || after.routeKey !== before.routeKey)) {
      this.ready.remove(before);
    }
    if (after?.readySince != null) this.ready.insert(after);

    const ends = before !== undefined && !isTerminal(before.status) && (after === undefined || isTerminal(after.status));
    if (after && isTerminal(after.status) && !(before && isTerminal(before.status))) this.#ended.push(id);

    if (after) this.jobs.set(id, after);
    if (ends) this.#liveOrder.died(this.#isLive);
    // only an undone group commit turns an ended job back (sqlite-group.ts); its entry may be gone
    if (before !== undefined && isTerminal(before.status) && after !== undefined && !isTerminal(after.status)) {
      this.#liveOrder.ensure(after.seq, id);
    }
    if (!after) {
      this.jobs.delete(id);
      if (this.fullHistory) {
        this.#sessionJobs.get(before!.sessionName)?.delete(id);
        this.#jobOrder.died(this.#isJob);
      }
    }
  }

  #pendingInsert(session: string, id: string, seq: number, prompt: string): void {
    this.pendingCount++;
    const size = Buffer.byteLength(prompt, 'utf8');
    this.#pendingSizes.set(id, size);
    this.pendingBytes += size;
    let list = this.sessionPending.get(session);
    if (!list) this.sessionPending.set(session, (list = []));
    let i = list.length;
    while (i > 0 && (this.jobs.get(list[i - 1]!)?.seq ?? 0) > seq) i--;
    list.splice(i, 0, id);
  }

  #pendingRemove(session: string, id: string): void {
    this.pendingCount--;
    this.pendingBytes -= this.#pendingSizes.get(id) ?? 0;
    this.#pendingSizes.delete(id);
    const list = this.sessionPending.get(session);
    if (!list) return;
    const i = list.indexOf(id);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.sessionPending.delete(session);
  }

  #applySession(name: string, c: RowChange<SessionRow>): void {
    if (c.kind === 'insert') {
      this.messageBytes += queuedMessageBytes(c.after.messages);
      this.outcomeBytes += heldOutcomeBytes(c.after);
      this.sessions.set(name, c.after);
      if (this.fullHistory) {
        this.#sessionOrder.push(c.after.seq, name);
        if (c.after.parentName !== null) {
          let set = this.#children.get(c.after.parentName);
          if (!set) this.#children.set(c.after.parentName, (set = new Set()));
          set.add(name);
        }
      }
    } else if (c.kind === 'update') {
      const current = this.sessions.get(name) ?? c.before;
      if (c.patch.messages !== undefined) this.messageBytes += queuedMessageBytes(c.patch.messages) - queuedMessageBytes(current.messages);
      // delete + set: the map's order is least recently changed first (see evictSessions)
      this.sessions.delete(name);
      // the transaction's version, unless the row it started from is no longer the one held
      const next = current === c.before ? c.after : nextSession(current, c.patch);
      if (c.patch.callbacks !== undefined || c.patch.inFlight !== undefined) this.outcomeBytes += heldOutcomeBytes(next) - heldOutcomeBytes(current);
      this.sessions.set(name, next);
    } else {
      const gone = this.sessions.get(name) ?? c.before;
      this.messageBytes -= queuedMessageBytes(gone.messages);
      this.outcomeBytes -= heldOutcomeBytes(gone);
      this.sessions.delete(name);
      if (this.fullHistory) {
        if (c.before.parentName !== null) this.#children.get(c.before.parentName)?.delete(name);
        this.#sessionJobs.delete(name);
        this.#sessionOrder.died(this.#isSession);
      }
    }
  }

  #applyLauncher(id: string, c: RowChange<LauncherRow>): void {
    const before = c.kind === 'insert' ? undefined : (this.launchers.get(id) ?? c.before);
    if (c.kind === 'delete') {
      this.launchers.delete(id);
      this.ready.forgetLauncher(id);
      return;
    }
    const after = c.kind === 'insert' ? c.after : nextLauncher(before!, c.patch);
    this.launchers.set(id, after);
  }

  // --- derived views -------------------------------------------------------------------------

  /** `max`: the most entries of each list (the newest). */
  sessionExtras(s: SessionRow, max: number): SessionExtras {
    const activeJobId = this.sessionActive.get(s.name) ?? null;
    const jobs = this.#sessionJobs.get(s.name);
    const children = this.#children.get(s.name);
    return {
      activeJobId,
      busy: activeJobId !== null || (this.sessionPending.get(s.name)?.length ?? 0) > 0,
      jobIds: newest(jobs, max),
      jobCount: jobs?.size ?? 0,
      children: newest(children, max),
      childCount: children?.size ?? 0,
    };
  }

  /** Every child of a session, oldest first (a tree walk, not a wire view). */
  childNames(name: string): string[] {
    return [...(this.#children.get(name) ?? [])];
  }

  isBusy(name: string): boolean {
    return this.sessionActive.has(name) || this.sessionPending.has(name);
  }

  hasChildren(name: string): boolean {
    return (this.#children.get(name)?.size ?? 0) > 0;
  }

  hasJobs(name: string): boolean {
    return (this.#sessionJobs.get(name)?.size ?? 0) > 0;
  }

  listJobs(f: ListJobsFilter): JobRow[] {
    const out: JobRow[] = [];
    const take = (id: string): boolean => {
      const job = this.jobs.get(id);
      if (!job) return true;
      if (f.before !== undefined && job.seq >= f.before) return true;
      if (f.statuses && !f.statuses.has(job.status)) return true;
      if (f.launcherId !== undefined && job.launcherId !== f.launcherId) return true;
      if (f.terminal !== undefined && isTerminal(job.status) !== f.terminal) return true;
      out.push(job);
      return out.length < f.limit;
    };
    if (f.sessionName !== undefined) {
      const ids = [...(this.#sessionJobs.get(f.sessionName) ?? [])];
      for (let i = ids.length - 1; i >= 0 && take(ids[i]!); i--);
    } else if (f.statuses && [...f.statuses].every(isActive)) {
      // claimed, running, stopping: the active jobs, not a walk past every pending one
      const ids = [...this.active].sort((a, b) => this.jobs.get(b)!.seq - this.jobs.get(a)!.seq);
      for (const id of ids) if (!take(id)) break;
    } else if (f.terminal === false || (f.statuses && ![...f.statuses].some(isTerminal))) {
      this.#liveOrder.walk(f.before, this.#isLive, take);
    } else {
      this.#jobOrder.walk(f.before, this.#isJob, take);
    }
    return out;
  }

  /** Jobs by status: every job the store holds, history included (statuses with none left out). */
  statusCounts(): Partial<Record<JobStatus, number>> {
    const out: Partial<Record<JobStatus, number>> = {};
    for (const [status, n] of this.#byStatus) if (n > 0) out[status] = n;
    return out;
  }

  /** Count jobs that are not applied here (the SQLite store's ended jobs, read from the file at start). */
  addStatusCounts(counts: Iterable<{ status: JobStatus; n: number }>): void {
    for (const { status, n } of counts) this.#countStatus(status, n);
  }

  #countStatus(status: JobStatus, n: number): void {
    this.#byStatus.set(status, (this.#byStatus.get(status) ?? 0) + n);
  }

  listSessions(f: ListSessionsFilter): SessionRow[] {
    const out: SessionRow[] = [];
    this.#sessionOrder.walk(
      f.before,
      this.#isSession,
      (name) => {
        const s = this.sessions.get(name)!;
        if (f.parent !== undefined && s.parentName !== f.parent) return true;
        if (f.root === true && s.parentName !== null) return true;
        if (f.status !== undefined && (this.isBusy(name) ? 'busy' : 'idle') !== f.status) return true;
        out.push(s);
        return out.length < f.limit;
      },
    );
    return out;
  }

  /** Terminal jobs in the order they ended, oldest first (ids may have left since). */
  *endedIds(): IterableIterator<string> {
    for (let i = this.#endedHead; i < this.#ended.length; i++) yield this.#ended[i]!;
  }

  /** Drop the `n` oldest entries of the ended list. */
  dropEnded(n: number): void {
    this.#endedHead += n;
    if (this.#endedHead > 1024 && this.#endedHead * 2 > this.#ended.length) {
      this.#ended = this.#ended.slice(this.#endedHead);
      this.#endedHead = 0;
    }
  }

  get endedCount(): number {
    return this.#ended.length - this.#endedHead;
  }

  /** Forget a terminal job from memory only (it stays in the database). */
  evictJob(id: string): void {
    const job = this.jobs.get(id);
    if (job && isTerminal(job.status)) this.jobs.delete(id);
  }

  /**
   * Forget idle sessions from memory only, least recently changed first, until at most `keep`
   * remain holding at most `maxBytes` by `sizeOf` (busy ones and those with undelivered callbacks
   * or messages stay).
   */
  evictSessions(keep: number, maxBytes = Number.POSITIVE_INFINITY, sizeOf: (s: SessionRow) => number = () => 0): void {
    let bytes = 0;
    if (maxBytes !== Number.POSITIVE_INFINITY) for (const s of this.sessions.values()) bytes += sizeOf(s);
    if (this.sessions.size <= keep && bytes <= maxBytes) return;
    for (const [name, s] of this.sessions) {
      if (this.sessions.size <= keep && bytes <= maxBytes) break;
      if (this.isBusy(name) || s.callbacks.length > 0 || s.messages.length > 0 || s.deliveryJobId !== null) continue;
      this.sessions.delete(name);
      bytes -= sizeOf(s);
    }
  }
}
