import type { LifecycleEvent } from '@agentq/protocol';
import type { Logger } from 'pino';
import { jsonBytes } from '../json-bytes.js';
import { heldBytesOf } from './store/lazy-events.js';

export type Listener = (event: LifecycleEvent) => void;

/**
 * An event as SSE bytes, made once for every client: with the job prompt, and without it. Bytes,
 * not text: a string written to a socket is encoded again for each socket (300 clients of an
 * event with a 1 MiB prompt would encode 300 MiB); a Buffer is written to each as it is.
 */
export interface Framed {
  readonly id: number;
  full(): Buffer;
  lean(): Buffer;
}

const END = Buffer.from('\n\n');
/** An SSE frame; the event's large strings (a prompt, a result) are encoded once for all its frames (json-bytes.ts). */
const frame = (e: LifecycleEvent, data: unknown) => Buffer.concat([Buffer.from(`id: ${e.id}\nevent: ${e.type}\ndata: `), jsonBytes(data), END]);

/**
 * Roughly the memory an event holds on to: its large strings (a job's prompt, result and error;
 * a session's last result and the outcomes and messages it has queued) plus a fixed part.
 */
export function eventSize(e: LifecycleEvent): number {
  // the store's events answer from their rows, without making the wire view
  const held = heldBytesOf(e);
  if (held !== undefined) return 1024 + held;
  let n = 1024;
  if ('job' in e) n += (e.job.prompt?.length ?? 0) + (e.job.result?.length ?? 0) + (e.job.error?.length ?? 0);
  else if ('session' in e) {
    const s = e.session;
    n += (s.last_result?.length ?? 0) + (s.last_error?.length ?? 0);
    for (const c of s.pending_callbacks) n += 256 + (c.result?.length ?? 0) + (c.error?.length ?? 0);
    for (const m of s.pending_messages) n += 256 + (m.text?.length ?? 0);
  }
  return n;
}

/**
 * The event as sent by default: a job without its prompt, a session without the texts it has
 * queued (EventSession); `event` itself when there is nothing to leave out.
 */
function leanOf(event: LifecycleEvent): LifecycleEvent {
  if ('job' in event) {
    const { prompt: _prompt, ...job } = event.job;
    return { ...event, job: { ...job, prompt_omitted: true } };
  }
  if (!('session' in event)) return event;
  const s = event.session;
  if (s.pending_messages.length === 0 && s.pending_callbacks.length === 0) return event;
  return {
    ...event,
    session: {
      ...s,
      pending_messages: s.pending_messages.map(({ text: _text, ...m }) => m),
      pending_callbacks: s.pending_callbacks.map(({ result: _result, error: _error, ...n }) => n),
      pending_texts_omitted: true,
    },
  };
}

/**
 * The typed lifecycle events (`job.created`, `launcher.stale`, ...) as committed by the store, in
 * commit order. Listeners (SSE, metrics) never break a commit: a failing one is logged and the
 * others still run. The newest events are kept so SSE clients can resume with Last-Event-ID: at
 * most `replaySize` of them, holding at most `replayBytes` (eventSize): events about 1 MiB
 * prompts would otherwise keep a gigabyte of jobs long gone alive.
 */
export class EventLog {
  #lastId = 0;
  /** the replay window, oldest first from #head (slots before it are cleared, compacted now and then) */
  #ring: (LifecycleEvent | undefined)[] = [];
  #sizes: number[] = [];
  #head = 0;
  #ringBytes = 0;
  readonly #listeners = new Set<Listener>();
  readonly #frames = new WeakMap<LifecycleEvent, { full?: Buffer; lean?: Buffer }>();

  constructor(
    private readonly replaySize: number,
    private readonly log: Logger,
    private readonly replayBytes = Number.POSITIVE_INFINITY,
  ) {}

  get lastId(): number {
    return this.#lastId;
  }

  /**
   * Continue numbering after `lastId` (the store's, after a restart). `usedUpTo`: the last id
   * the previous run used, when known; the ids after it up to `lastId` were never used, so a
   * client resuming from it (or from within them) has missed nothing.
   */
  continueAfter(lastId: number, usedUpTo?: number): void {
    this.#lastId = Math.max(this.#lastId, lastId);
    if (usedUpTo !== undefined && usedUpTo <= lastId) this.#unused = { from: usedUpTo, to: lastId };
  }

  /** ids reserved before a restart and never used (see continueAfter) */
  #unused: { from: number; to: number } | undefined;

  ingest(events: readonly LifecycleEvent[]): void {
    for (const event of events) {
      if (event.id <= this.#lastId) continue; // already seen (a shared store's echo)
      this.#lastId = event.id;
      if (this.replaySize > 0) this.#keep(event);
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch (err) {
          this.log.error({ err, event_type: event.type }, 'event listener failed');
        }
      }
    }
  }

  #keep(event: LifecycleEvent): void {
    const size = eventSize(event);
    this.#ring.push(event);
    this.#sizes.push(size);
    this.#ringBytes += size;
    // the newest event is always kept, however large
    while (this.#ring.length - this.#head > 1 && (this.#ring.length - this.#head > this.replaySize || this.#ringBytes > this.replayBytes)) {
      this.#ringBytes -= this.#sizes[this.#head]!;
      this.#ring[this.#head] = undefined; // let go of it now, not at the next compaction
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#ring.length) {
      this.#ring = this.#ring.slice(this.#head);
      this.#sizes = this.#sizes.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Events held for replay, and their eventSize. */
  get replayWindow(): { events: number; bytes: number } {
    return { events: this.#ring.length - this.#head, bytes: this.#ringBytes };
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
    const ordered = this.#ring.slice(this.#head) as LifecycleEvent[];
    const oldestId = ordered[0]?.id ?? this.#lastId + 1;
    // the ids a restart skipped: nothing was sent under them
    const seen = this.#unused && afterId >= this.#unused.from && afterId <= this.#unused.to ? this.#unused.to : afterId;
    return { events: ordered.filter((e) => e.id > afterId), gap: seen + 1 < oldestId, oldestId };
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
        if (c.lean !== undefined) return c.lean;
        const lean = leanOf(event);
        return lean === event ? (c.full ??= frame(event, event)) : (c.lean = frame(event, lean));
      },
    };
  }
}
