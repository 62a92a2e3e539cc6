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
  toJSON(): { id: number; type: EventType; at: string; job: EventJob } {
    return { id: this.id, type: this.type, at: this.at, job: this.job };
  }
}

class SessionEventView {
  readonly #row: SessionRow;
  /** derived from indexes that move on: taken when the event is committed */
  readonly #extras: SessionExtras;
  constructor(
    readonly id: number,
    readonly type: EventType,
    readonly at: string,
    row: SessionRow,
    extras: SessionExtras,
  ) {
    this.#row = row;
    this.#extras = extras;
  }
  get session(): Session {
    return toWireSession(this.#row, this.#extras);
  }
  toJSON(): { id: number; type: EventType; at: string; session: Session } {
    return { id: this.id, type: this.type, at: this.at, session: this.session };
  }
}

export const jobEvent = (id: number, type: EventType, at: string, row: JobRow): LifecycleEvent =>
  new JobEventView(id, type, at, row) as unknown as LifecycleEvent;

export const sessionEvent = (id: number, type: EventType, at: string, row: SessionRow, extras: SessionExtras): LifecycleEvent =>
  new SessionEventView(id, type, at, row, extras) as unknown as LifecycleEvent;
