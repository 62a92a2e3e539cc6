import type { LifecycleEvent } from '@agentq/protocol';
import type { Logger } from 'pino';

export type Listener = (event: LifecycleEvent) => void;

/** An event as SSE text, made once for every client: with the job prompt, and without it. */
export interface Framed {
  readonly id: number;
  full(): string;
  lean(): string;
}

const frame = (e: LifecycleEvent, data: unknown) => `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * The typed lifecycle events (`job.created`, `launcher.stale`, ...) as committed by the store, in
 * commit order. Listeners (SSE, metrics) never break a commit: a failing one is logged and the
 * others still run. The newest `replaySize` events are kept so SSE clients can resume with
 * Last-Event-ID.
 */
export class EventLog {
  #lastId = 0;
  #ring: LifecycleEvent[] = [];
  #ringStart = 0;
  readonly #listeners = new Set<Listener>();
  readonly #frames = new WeakMap<LifecycleEvent, { full?: string; lean?: string }>();

  constructor(
    private readonly replaySize: number,
    private readonly log: Logger,
  ) {}

  get lastId(): number {
    return this.#lastId;
  }

  /** Continue numbering after `lastId` (the store's, after a restart). */
  continueAfter(lastId: number): void {
    this.#lastId = Math.max(this.#lastId, lastId);
  }

  ingest(events: readonly LifecycleEvent[]): void {
    for (const event of events) {
      if (event.id <= this.#lastId) continue; // already seen (a shared store's echo)
      this.#lastId = event.id;
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
          this.log.error({ err, event_type: event.type }, 'event listener failed');
        }
      }
    }
  }

  subscribe(listener: Listener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  get listenerCount(): number {
    return this.#listeners.size;
  }

  /** Events with id > `afterId` still in the window, oldest first, and whether some were lost. */
  since(afterId: number): { events: LifecycleEvent[]; gap: boolean; oldestId: number } {
    const ordered = [...this.#ring.slice(this.#ringStart), ...this.#ring.slice(0, this.#ringStart)];
    const oldestId = ordered[0]?.id ?? this.#lastId + 1;
    return { events: ordered.filter((e) => e.id > afterId), gap: afterId + 1 < oldestId, oldestId };
  }

  /** The SSE frame of `event`, serialised once however many clients get it. */
  framed(event: LifecycleEvent): Framed {
    let cache = this.#frames.get(event);
    if (!cache) this.#frames.set(event, (cache = {}));
    const c = cache;
    return {
      id: event.id,
      full: () => (c.full ??= frame(event, event)),
      lean: () => {
        if (!('job' in event)) return (c.full ??= frame(event, event));
        if (c.lean !== undefined) return c.lean;
        const { prompt: _prompt, ...job } = event.job;
        return (c.lean = frame(event, { ...event, job: { ...job, prompt_omitted: true } }));
      },
    };
  }
}
