import type { Database as Db } from 'better-sqlite3';
import type { CoordinatorError } from '../errors.js';
import type { ChangeSet } from './changes.js';
import type { Commit } from './store.js';

/*
 * Group commit for the SQLite store. The first change set of a turn of the event loop is
 * committed on its own, at once, as a lone request needs. One that follows it in the same turn
 * opens a SQLite transaction (the group) that the rest of the turn joins; each change set is
 * written into it under a savepoint (better-sqlite3 nests a transaction that way), so one that
 * fails is refused alone and changes nothing. It is applied in memory at once, so the next
 * transaction sees it, but its events and its answer wait: the group is committed once the event
 * loop has taken every request that was ready (setImmediate), and only then are its events
 * delivered and its transactions resolved. Concurrent requests thus share one commit (one write
 * of each page they touch) instead of one each. If the commit fails, every change set of the
 * group is undone in memory (in reverse) and each of its transactions is refused with 503
 * `storage_unavailable`: nothing of it was seen outside, since answers that might show it wait
 * for the group (Store.settled, app.ts).
 */

/** What the group commit needs of the store. */
export interface GroupHost {
  db(): Db;
  /** the store's transaction lock: a group is committed between transactions, never inside one */
  lock(): Promise<void> | undefined;
  unlock(): void;
  /** a commit of the group is on disk: its events go out */
  deliver(commit: Commit): void;
  /** undo one change set of a group that could not be written (called newest first) */
  undo(changes: ChangeSet): void;
  /** what to restore if the group is undone (event numbering), taken when it opens */
  snapshot(): () => void;
  /** a write succeeded / failed (logs the change of state, makes the 503) */
  wrote(): void;
  refused(err: unknown): CoordinatorError;
}

interface Group {
  /** each change set written into it, in order */
  readonly changes: ChangeSet[];
  /** their commits, delivered once the group is on disk */
  readonly commits: Commit[];
  /** undo for what was applied in memory outside transactions (output), then the snapshot */
  readonly undo: (() => void)[];
  readonly done: Promise<void>;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

export class CommitGroups {
  readonly #host: GroupHost;
  #open: Group | undefined;
  /** why the open group's SQLite transaction is gone, if a failed write took it (see #lost) */
  #lostBy: CoordinatorError | undefined;
  /** whether a commit was written on its own in this turn of the event loop */
  #turnHadCommit = false;
  /** the store closes: no group opens any more (what comes is written alone, or refused once closed) */
  #closing = false;

  constructor(host: GroupHost) {
    this.#host = host;
  }

  /** Resolves when the open group is on disk; undefined when there is none (Store.settled). */
  get settled(): Promise<void> | undefined {
    return this.#open?.done;
  }

  /**
   * Before a change set is written: the group it joins (opened if a commit was already written
   * in this turn), or undefined when it is to be written and committed on its own now.
   */
  join(): Group | undefined {
    this.#undoIfLost(); // called under the store's lock (persist)
    return this.#open ?? (this.#turnHadCommit && !this.#closing ? this.#begin() : undefined);
  }

  /** A change set was written: into `group`, or on its own (then it is on disk already). */
  written(group: Group | undefined, changes: ChangeSet): void {
    if (group) {
      group.changes.push(changes);
      return;
    }
    this.#host.wrote();
    this.#turnHadCommit = true; // false until now: join() gives a group once it is set
    setImmediate(() => (this.#turnHadCommit = false));
  }

  /** A commit was applied: its events wait for its group, or go out now. */
  committed(commit: Commit): void {
    if (this.#open) this.#open.commits.push(commit);
    else this.#host.deliver(commit);
  }

  /** Something applied in memory outside a transaction joined the open group: how to undo it. */
  onUndo(undo: () => void): boolean {
    if (!this.#open || !this.#host.db().inTransaction) return false;
    this.#open.undo.push(undo);
    return true;
  }

  /**
   * A write failed and is refused. Some errors (disk full, I/O) make SQLite give up the whole
   * transaction rather than the savepoint: then the open group is lost with it. It is undone
   * under the store's lock (the next change set, or the group's commit), never in the middle of a
   * transaction that may have read from it.
   */
  failed(err: unknown): CoordinatorError {
    const error = this.#host.refused(err);
    if (this.#open && !this.#host.db().inTransaction) this.#lostBy ??= error;
    return error;
  }

  /** The open group's SQLite transaction is gone (a failed write or read rolled it back): undo it. */
  #undoIfLost(): void {
    if (!this.#open || this.#host.db().inTransaction) return;
    this.#undo(this.#open, this.#lostBy ?? this.#host.refused(new Error('the open transaction was rolled back')));
  }

  /** Commit the open group now, and open none after it (the store closes). */
  async close(): Promise<void> {
    this.#closing = true;
    if (this.#open) await this.#commit(this.#open);
  }

  #begin(): Group {
    this.#host.db().exec('BEGIN');
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const done = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    done.catch(() => {}); // its transactions see the failure; nobody else must
    const group: Group = { changes: [], commits: [], undo: [this.#host.snapshot()], done, resolve, reject };
    this.#open = group;
    setImmediate(() => void this.#commit(group));
    return group;
  }

  /** Commit the group; taken like a transaction, so never in the middle of one. */
  async #commit(group: Group): Promise<void> {
    const wait = this.#host.lock();
    if (wait) await wait;
    let written = false;
    try {
      if (this.#open !== group) return; // undone already (a write that failed took it with it)
      this.#undoIfLost();
      if (this.#open !== group) return;
      try {
        this.#host.db().exec('COMMIT');
        this.#open = undefined;
        written = true;
        this.#host.wrote();
      } catch (err) {
        this.#undo(group, this.#host.refused(err));
      }
    } finally {
      this.#host.unlock();
    }
    if (!written) return;
    for (const commit of group.commits) this.#host.deliver(commit);
    group.resolve();
  }

  /** The group could not be written: roll it back in the file, undo it in memory, refuse its transactions. */
  #undo(group: Group, error: CoordinatorError): void {
    this.#open = undefined;
    this.#lostBy = undefined;
    const db = this.#host.db();
    if (db.inTransaction) {
      try {
        db.exec('ROLLBACK');
      } catch {
        // already rolled back by SQLite
      }
    }
    for (let i = group.changes.length - 1; i >= 0; i--) this.#host.undo(group.changes[i]!);
    for (let i = group.undo.length - 1; i >= 0; i--) group.undo[i]!();
    group.reject(error);
  }
}
