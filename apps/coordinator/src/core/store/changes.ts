import { isTerminal, type EventType } from '@agentq/protocol';
import type { HostBindingRow, IdempotencyRow, JobRow, LauncherRow, SessionRow } from '../rows.js';
import type { Commit, EntityRef } from './store.js';

/*
 * A transaction's changes, as the stores apply and persist them. Each touched row is recorded
 * once: `before` is the committed version when the transaction first touched it, `after` its
 * version at the end, and `patch` the fields changed (so that writes outside transactions, a
 * launcher's last sign of life or a job's output length, are not overwritten by an older copy).
 */
export type RowChange<T> =
  | { kind: 'insert'; before: undefined; after: T; patch: T }
  | { kind: 'update'; before: T; after: T; patch: Partial<T> }
  | { kind: 'delete'; before: T; after: undefined; patch: null };

export interface ChangeSet {
  jobs: Map<string, RowChange<JobRow>>;
  sessions: Map<string, RowChange<SessionRow>>;
  launchers: Map<string, RowChange<LauncherRow>>;
  idempotency: IdempotencyRow[];
  hostBindings: HostBindingRow[];
  events: { type: EventType; ref: EntityRef }[];
  jobSeq: number;
  sessionSeq: number;
  /**
   * Ready jobs handed to this transaction's claim (`Tx.readyJobsFor`), by id, with their route
   * keys. Those it left ready (a claim capped by MAX_ANSWER_BYTES) are announced as ready again
   * at the commit, so that another parked poll takes them (PostgreSQL: `PgTx.lockedReady`).
   */
  offered: Map<string, string>;
}

export function emptyChangeSet(jobSeq: number, sessionSeq: number): ChangeSet {
  return { jobs: new Map(), sessions: new Map(), launchers: new Map(), idempotency: [], hostBindings: [], events: [], jobSeq, sessionSeq, offered: new Map() };
}

/**
 * A transaction's events, without the `session.updated` events of a session that a later one of
 * the same transaction repeats: every event carries its entity as committed, so those are the same
 * event. A transaction that ends 20,000 children of one parent (a tree stop) emits one for the
 * parent, not 20,000 copies of it, each weighed and sent to every event stream.
 */
export function compactEvents(events: ChangeSet['events']): ChangeSet['events'] {
  const last = new Map<string, number>();
  let updates = 0;
  events.forEach((e, i) => {
    if (e.type !== 'session.updated' || !('session' in e.ref)) return;
    last.set(e.ref.session, i);
    updates++;
  });
  // every commit comes here: one with no repeat is returned as it is, after a single pass
  if (last.size === updates) return events;
  return events.filter((e, i) => !(e.type === 'session.updated' && 'session' in e.ref && last.get(e.ref.session) !== i));
}

/** Record that `key`'s row becomes `after` (undefined: deleted); `patch` is what changed. */
export function record<T>(
  map: Map<string, RowChange<T>>,
  key: string,
  committed: T | undefined,
  after: T | undefined,
  patch: Partial<T> | null,
): void {
  const prev = map.get(key);
  if (!prev) {
    if (committed === undefined) {
      if (after !== undefined) map.set(key, { kind: 'insert', before: undefined, after, patch: after });
      return;
    }
    if (after === undefined) map.set(key, { kind: 'delete', before: committed, after: undefined, patch: null });
    else map.set(key, { kind: 'update', before: committed, after, patch: { ...patch } });
    return;
  }
  if (prev.kind === 'insert') {
    if (after === undefined) map.delete(key);
    else map.set(key, { kind: 'insert', before: undefined, after, patch: after });
    return;
  }
  if (prev.kind === 'delete') {
    if (after !== undefined) map.set(key, { kind: 'update', before: prev.before, after, patch: { ...after } });
    return;
  }
  if (after === undefined) map.set(key, { kind: 'delete', before: prev.before, after: undefined, patch: null });
  else map.set(key, { kind: 'update', before: prev.before, after, patch: { ...prev.patch, ...patch } });
}

/** The hints a committed change set gives the core's reactions (events are added by the store). */
export function hintsOf(changes: ChangeSet): Omit<Commit, 'events'> {
  const commit: Omit<Commit, 'events'> = {
    readyKeys: new Map(),
    launchersToWake: new Set(),
    ended: new Set(),
    launchersChanged: false,
  };
  for (const c of changes.jobs.values()) {
    const a = c.after;
    const b = c.before;
    if (!a) continue;
    if (a.readySince !== null && a.routeKey !== null && (b?.readySince ?? null) === null) {
      countReady(commit.readyKeys, a.routeKey);
    }
    if (a.stopPending && !b?.stopPending && a.launcherId !== null) commit.launchersToWake.add(a.launcherId);
    if (isTerminal(a.status) && (!b || !isTerminal(b.status))) commit.ended.add(a.id);
  }
  // offered to a claim that left them ready: still ready (a change that took them is not)
  for (const [id, key] of changes.offered) {
    const c = changes.jobs.get(id);
    if (c && (c.after?.readySince ?? null) === null) continue;
    countReady(commit.readyKeys, key);
  }
  for (const c of changes.launchers.values()) {
    if (c.kind !== 'update' || c.before.status !== c.after.status) commit.launchersChanged = true;
    if (c.kind === 'delete') commit.launchersToWake.add(c.before.id);
    else if (c.after.status === 'deregistering' && c.before?.status !== 'deregistering') commit.launchersToWake.add(c.after.id);
  }
  return commit;
}

/** One more job of route `key` became ready. */
export function countReady(readyKeys: Map<string, number>, key: string): void {
  readyKeys.set(key, (readyKeys.get(key) ?? 0) + 1);
}

/** The change set that undoes `c` once `c` has been applied (a group of commits that could not be written). */
export function inverseOf(c: ChangeSet): ChangeSet {
  const flip = <T>(changes: Map<string, RowChange<T>>): Map<string, RowChange<T>> => {
    const out = new Map<string, RowChange<T>>();
    for (const [key, r] of changes) {
      if (r.kind === 'insert') out.set(key, { kind: 'delete', before: r.after, after: undefined, patch: null });
      else if (r.kind === 'delete') out.set(key, { kind: 'insert', before: undefined, after: r.before, patch: r.before });
      else {
        // only the fields the change set wrote: a write outside transactions since (output length,
        // sign of life) stays
        const patch = Object.fromEntries(Object.keys(r.patch).map((f) => [f, r.before[f as keyof T]])) as Partial<T>;
        out.set(key, { kind: 'update', before: r.after, after: r.before, patch });
      }
    }
    return out;
  };
  return { ...emptyChangeSet(c.jobSeq, c.sessionSeq), jobs: flip(c.jobs), sessions: flip(c.sessions), launchers: flip(c.launchers) };
}
