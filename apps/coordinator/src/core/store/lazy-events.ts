import type { EventJob, EventType, LifecycleEvent, Session } from '@agentq/protocol';
import type { JobRow, SessionRow } from '../rows.js';
import { toWireJob, toWireSession, type SessionExtras } from '../wire.js';

/*
 * Job and session events hold the committed row (rows are never mutated) and make the wire
 * object when it is read, each time: a listener reads it once (metrics), SSE serialises each event
 * once (EventLog.framed), and most events are never read at all.
 *
 * Why: every commit made a full wire copy of each row it touched, one per event (about seven per
 * job), and the replay window keeps the last EVENT_REPLAY_SIZE events, so those copies lived long
 * enough to be promoted to the old generation: most of the old-space garbage of a busy
 * coordinator, and its heap's growth under load (docs/benchmarks.md). A row is smaller than its
 * wire view and, while the job is in memory, often the same object the state holds.
 *
 * They serialise (toJSON) exactly like the plain objects they replace: `{ id, type, at, job }`.
 */

class JobEventView {
  readonly #row: JobRow;
  constructor(
    readonly id: number,
    readonly type: EventType,
    readonly at: string,
    row: JobRow,
  ) {
    this.#row = row;
  }
  get job(): EventJob {
    return toWireJob(this.#row);
  }
  /** the committed row itself (what jobFactsOf gives) */
  get row(): JobRow {
    return this.#row;
  }
  /** the bytes of its large strings, from the row (no wire view made) */
  get heldBytes(): number {
    const r = this.#row;
    return r.prompt.length + (r.result?.length ?? 0) + (r.error?.length ?? 0);
  }
  toJSON(): { id: number; type: EventType; at: string; job: EventJob } {
    return { id: this.id, type: this.type, at: this.at, job: this.job };
  }
}

/**
 * A session's derived view (active job, jobs, children) as of its event's commit: taken then, or
 * a function that reads it later as it was then (the SQLite store reads job and child lists from
 * the file, bounded by the sequence numbers of the commit: most events are never read, so most of
 * those reads are never made).
 */
export type EventExtras = SessionExtras | (() => SessionExtras);

class SessionEventView {
  readonly #row: SessionRow;
  #extras: EventExtras;
  constructor(
    readonly id: number,
    readonly type: EventType,
    readonly at: string,
    row: SessionRow,
    extras: EventExtras,
  ) {
    this.#row = row;
    this.#extras = extras;
  }
  get session(): Session {
    if (typeof this.#extras === 'function') this.#extras = this.#extras();
    return toWireSession(this.#row, this.#extras);
  }
  /** the bytes of its large strings, from the row (no wire view made) */
  get heldBytes(): number {
    const s = this.#row;
    let n = (s.lastResult?.length ?? 0) + (s.lastError?.length ?? 0);
    for (const c of s.callbacks) n += 256 + (c.result?.length ?? 0) + (c.error?.length ?? 0);
    for (const m of s.messages) n += 256 + m.text.length;
    return n;
  }
  toJSON(): { id: number; type: EventType; at: string; session: Session } {
    return { id: this.id, type: this.type, at: this.at, session: this.session };
  }
}

export const jobEvent = (id: number, type: EventType, at: string, row: JobRow): LifecycleEvent =>
  new JobEventView(id, type, at, row) as unknown as LifecycleEvent;

export const sessionEvent = (id: number, type: EventType, at: string, row: SessionRow, extras: EventExtras): LifecycleEvent =>
  new SessionEventView(id, type, at, row, extras) as unknown as LifecycleEvent;

/** The bytes of an event's large strings when it is one made here (from its row); else undefined. */
export function heldBytesOf(e: LifecycleEvent): number | undefined {
  const view: unknown = e;
  return view instanceof JobEventView || view instanceof SessionEventView ? view.heldBytes : undefined;
}

/**
 * What a listener that counts jobs (metrics) reads of a job event: the row's own fields, times in
 * milliseconds. Job metrics read four events of every job; making each one's wire view for that
 * (every field, every timestamp formatted, then parsed back) was most of what they cost.
 */
export type JobFacts = Pick<JobRow, 'id' | 'type' | 'status' | 'createdAt' | 'claimedAt' | 'startedAt' | 'completedAt' | 'callbackOf'>;

const msOrNull = (at: string | null | undefined): number | null => (at ? Date.parse(at) : null);

/** A job event's facts: its row when the event is one made here, else read from its wire job; undefined for other events. */
export function jobFactsOf(e: LifecycleEvent): JobFacts | undefined {
  const view: unknown = e;
  if (view instanceof JobEventView) return view.row;
  if (!('job' in e)) return undefined;
  const job = e.job;
  return {
    id: job.job_id,
    type: job.type,
    status: job.status,
    createdAt: Date.parse(job.created_at),
    claimedAt: msOrNull(job.claimed_at),
    startedAt: msOrNull(job.started_at),
    completedAt: msOrNull(job.completed_at),
    callbackOf: job.callback_of ?? null,
  };
}
