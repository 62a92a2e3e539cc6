import type { EventType, Job, Launcher, LifecycleEvent, Session } from '@agentq/protocol';
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import { iso } from './clock.js';

type Payload = { job: Job } | { session: Session } | { launcher: Launcher };
export type Listener = (event: LifecycleEvent) => void;

/**
 * The one emitter of typed lifecycle events (`job.created`, `launcher.stale`, ...). `emit`
 * never throws: a failing listener is logged and the others still run. The newest
 * `replaySize` events are kept so SSE clients can resume with Last-Event-ID.
 */
export class EventLog {
  #nextId = 1;
  #ring: LifecycleEvent[] = [];
  #ringStart = 0;
  #listeners = new Set<Listener>();

  constructor(
    private readonly replaySize: number,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  get lastId(): number {
    return this.#nextId - 1;
  }

  /** After a restore: continue numbering after the last event id the journal saw. */
  continueAfter(lastId: number): void {
    this.#nextId = Math.max(this.#nextId, lastId + 1);
  }

  /** Whether anyone would see an event (lets hot paths skip building snapshots). */
  get wanted(): boolean {
    return this.replaySize > 0 || this.#listeners.size > 0;
  }

  emit(type: EventType, payload: () => Payload): void {
    if (!this.wanted) {
      this.#nextId++;
      return;
    }
    const event = { id: this.#nextId++, type, at: iso(this.clock.now()), ...payload() } as LifecycleEvent;
    if (this.replaySize > 0) {
      if (this.#ring.length < this.replaySize) this.#ring.push(event);
      else {
        this.#ring[this.#ringStart] = event;
        this.#ringStart = (this.#ringStart + 1) % this.replaySize;
      }
    }
    for (const listener of this.#listeners) {
      try {
        listener(event);
      } catch (err) {
        this.log.error({ err, event_type: type }, 'event listener failed');
      }
    }
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Events with id > `afterId` still in the window, oldest first, and whether some were lost. */
  since(afterId: number): { events: LifecycleEvent[]; gap: boolean; oldestId: number } {
    const ordered = [...this.#ring.slice(this.#ringStart), ...this.#ring.slice(0, this.#ringStart)];
    const oldestId = ordered[0]?.id ?? this.#nextId;
    return { events: ordered.filter((e) => e.id > afterId), gap: afterId + 1 < oldestId, oldestId };
  }
}
