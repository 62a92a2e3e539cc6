import type { Job, JobStatus, LifecycleEvent } from '@agentq/protocol';
import { createParser } from 'eventsource-parser';
import { retryAfterMs, type Api } from './api.js';
import { sleep } from './sleep.js';

export type StreamState = 'connecting' | 'live' | 'retrying' | 'needs-token';

/** One status change of a job, as seen on the event stream. */
export interface TimelineEntry {
  event_id: number;
  type: string;
  at: string;
  status: JobStatus;
  launcher_id: string | null;
  error: string | null;
}

/**
 * Events as the views get them. The stream leaves job prompts out (`prompt_omitted`): they come
 * here as `prompt: ''`, which `mergeJob` does not let replace a prompt read from the API.
 */
export type ViewEvent =
  | Exclude<LifecycleEvent, { job: unknown }>
  | (Omit<Extract<LifecycleEvent, { job: unknown }>, 'job'> & { job: Job });

/** What a batch listener gets: every lifecycle event since the previous frame, oldest first. */
export type Batch = readonly ViewEvent[];

const MAX_BACKOFF_MS = 15_000;
/** A stream silent this many keepalive intervals is dead, though not closed: reconnect. */
const KEEPALIVES_MISSED = 3;
/** the coordinator's keepalive interval until its opening comment says (15 s by default) */
const DEFAULT_KEEPALIVE_MS = 15_000;

/**
 * The live feed: `GET /events` read with fetch() rather than EventSource, because EventSource
 * cannot send the Authorization header that a coordinator with auth on requires. The text is
 * parsed by eventsource-parser; a dropped stream reconnects with capped, jittered backoff (at
 * least the `Retry-After` of a 429 or 503 that refused it, up to 10 s) and
 * `Last-Event-ID`, so no event is lost while the coordinator's replay window covers the gap
 * (otherwise views are told to re-read: `onResync`).
 *
 * Events are handed to views in batches, at most one per animation frame: a burst of thousands
 * of events costs one render, not thousands.
 */
export class EventStream {
  readonly #api: Api;
  readonly #maxTimelineJobs: number;
  #state: StreamState = 'connecting';
  #abort: AbortController | null = null;
  /** replay the coordinator's window on the first connection: it fills the job timelines */
  #lastId = '0';
  #connectedOnce = false;
  /** the newest event the coordinator had when the page first connected (see isHistory) */
  #historyUpTo = 0;
  /** the coordinator process of the last connection, as its opening comment names it */
  #coordinator: string | undefined;
  /** how long the stream may be silent before the connection is taken for dead (see #run) */
  #silenceMs = KEEPALIVES_MISSED * DEFAULT_KEEPALIVE_MS;
  #queue: ViewEvent[] = [];
  #scheduled = false;
  #resyncWanted = false;
  readonly #batchListeners = new Set<(batch: Batch) => void>();
  readonly #resyncListeners = new Set<() => void>();
  readonly #stateListeners = new Set<(state: StreamState) => void>();
  /** status changes per job id, for the job view's timeline (the newest jobs only) */
  readonly timeline = new Map<string, TimelineEntry[]>();

  constructor(api: Api, options: { maxTimelineJobs?: number } = {}) {
    this.#api = api;
    this.#maxTimelineJobs = options.maxTimelineJobs ?? 5000;
  }

  get state(): StreamState {
    return this.#state;
  }

  /**
   * Whether the event happened before the page first connected: the replayed window, which the
   * API's answers may already be newer than (a session it names may have been deleted since
   * without an event the window still holds).
   */
  isHistory(e: ViewEvent): boolean {
    return e.id <= this.#historyUpTo;
  }

  start(): void {
    if (this.#abort) return;
    const abort = new AbortController();
    this.#abort = abort;
    void this.#run(abort.signal);
  }

  stop(): void {
    this.#abort?.abort();
    this.#abort = null;
  }

  /** Reconnect (after the token changed); views re-read what they show. */
  restart(): void {
    this.stop();
    this.start();
  }

  onBatch(listener: (batch: Batch) => void): () => void {
    this.#batchListeners.add(listener);
    return () => this.#batchListeners.delete(listener);
  }

  onResync(listener: () => void): () => void {
    this.#resyncListeners.add(listener);
    return () => this.#resyncListeners.delete(listener);
  }

  onState(listener: (state: StreamState) => void): () => void {
    this.#stateListeners.add(listener);
    return () => this.#stateListeners.delete(listener);
  }

  async #run(signal: AbortSignal): Promise<void> {
    let attempt = 0;
    while (!signal.aborted) {
      this.#setState(attempt === 0 ? 'connecting' : 'retrying');
      // A connection can die without closing (a NAT or proxy that forgot it, a network that went
      // to sleep): nothing would ever come again and the page would stay "live". The coordinator
      // sends a keepalive comment every K ms (its opening comment says K): when nothing at all
      // has come for a few of them, this connection is given up and the loop reconnects.
      const connection = new AbortController();
      const stop = () => connection.abort();
      signal.addEventListener('abort', stop, { once: true });
      let watchdog: ReturnType<typeof setTimeout> | undefined;
      const heard = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(stop, this.#silenceMs);
      };
      heard();
      // what a refusal (429/503) asked the page to wait before it comes again
      let asked: number | undefined;
      try {
        const res = await fetch('/events', {
          headers: { accept: 'text/event-stream', 'last-event-id': this.#lastId, ...this.#api.headers() },
          signal: connection.signal,
          cache: 'no-store',
        });
        if (await this.#api.checkAuth(res, false)) {
          this.#setState('needs-token'); // until restart() with a new token
          return;
        }
        if (!res.ok || res.body === null) {
          asked = retryAfterMs(res);
          throw new Error(`GET /events answered HTTP ${res.status}`);
        }
        this.#setState('live');
        attempt = 0;
        const firstConnection = !this.#connectedOnce;
        this.#connectedOnce = true;
        const parser = createParser({
          // the coordinator opens with `: connected, last event id N, coordinator P, keepalive K`
          onComment: (comment) => {
            const m = /last event id (\d+)(?:, coordinator ([^\s,]+))?/.exec(comment);
            if (m === null) return;
            const keepalive = /keepalive (\d+)/.exec(comment);
            if (keepalive !== null && Number(keepalive[1]) > 0) {
              this.#silenceMs = KEEPALIVES_MISSED * Number(keepalive[1]);
              heard();
            }
            const previous = this.#coordinator;
            this.#coordinator = m[2];
            if (firstConnection) {
              this.#historyUpTo = Number(m[1]);
              return;
            }
            const wentBack = Number(m[1]) < Number(this.#lastId);
            if (!wentBack && m[2] === previous) return;
            if (wentBack) this.#lastId = m[1]!;
            // numbering went back, or another coordinator process answers: a memory store's
            // restart numbers events afresh, and may have passed the page's Last-Event-ID before
            // it reconnected (its replay would then skip the new process's first events, and
            // nothing tells of the jobs the old one held). None of its events is history, and
            // the views read everything again.
            this.#historyUpTo = 0;
            this.#resyncWanted = true;
            this.#schedule();
          },
          onEvent: (m) => {
            if (m.id !== undefined) this.#lastId = m.id;
            if (m.event === 'stream.gap') {
              // on the first connection the gap is just history the page never had
              if (!firstConnection) {
                this.#resyncWanted = true;
                this.#schedule();
              }
              return;
            }
            const event = JSON.parse(m.data) as LifecycleEvent;
            if ('job' in event) event.job.prompt ??= '';
            this.#enqueue(event as ViewEvent);
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          heard();
          parser.feed(value);
        }
        throw new Error('the event stream ended');
      } catch {
        if (signal.aborted) return;
        this.#setState('retrying');
        const backoff = Math.min(MAX_BACKOFF_MS, 500 * 2 ** attempt++) * (0.5 + Math.random() / 2);
        // an overloaded coordinator asked for a wait (Retry-After): a retry before it is refused again
        await sleep(Math.max(backoff, asked ?? 0), signal);
      } finally {
        clearTimeout(watchdog);
        signal.removeEventListener('abort', stop);
      }
    }
  }

  #setState(state: StreamState): void {
    if (state === this.#state) return;
    this.#state = state;
    for (const l of this.#stateListeners) l(state);
  }

  #enqueue(event: ViewEvent): void {
    this.#queue.push(event);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // a hidden tab gets no animation frames: the timer keeps the queue short there
    requestAnimationFrame(() => this.#flush());
    setTimeout(() => this.#flush(), 250);
  }

  #flush(): void {
    if (!this.#scheduled) return;
    this.#scheduled = false;
    const batch = this.#queue;
    this.#queue = [];
    for (const e of batch) if ('job' in e) this.#record(e);
    if (batch.length > 0) for (const l of this.#batchListeners) l(batch);
    if (this.#resyncWanted) {
      this.#resyncWanted = false;
      for (const l of this.#resyncListeners) l();
    }
  }

  #record(e: Extract<ViewEvent, { job: unknown }>): void {
    const id = e.job.job_id;
    let entries = this.timeline.get(id);
    if (entries === undefined) {
      entries = [];
      this.timeline.set(id, entries);
      if (this.timeline.size > this.#maxTimelineJobs) {
        const oldest = this.timeline.keys().next().value;
        if (oldest !== undefined) this.timeline.delete(oldest);
      }
    }
    if (entries.some((x) => x.event_id === e.id)) return;
    entries.push({ event_id: e.id, type: e.type, at: e.at, status: e.job.status, launcher_id: e.job.launcher_id, error: e.job.error });
  }
}
