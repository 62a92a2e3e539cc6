import { EventEmitter } from 'node:events';
import type { PollResponse } from '@agentq/protocol';
import { routeFromKey, serves, type Route } from './routing.js';
import type { LauncherRow } from './rows.js';
import type { Commit } from './store/store.js';

/** A parked `GET /launcher/jobs` (or an empty `POST /launcher/sync`). */
interface Waiter {
  readonly launcher: LauncherRow;
  /** 0: only stop requests and deregistration may answer it */
  readonly capacity: number;
  /** stop requests are answered alone, without jobs (a poll of the original shape: claims.ts) */
  readonly stopsAlone: boolean;
  readonly signal: AbortSignal;
  settled: boolean;
  /** a service transaction for it is running */
  busy: boolean;
  finish(answer: PollResponse | null): void;
}

/** Runs the transaction that answers a poll: deregistration, stops, claims (claims.ts). */
export type Serve = (launcherId: string, capacity: number, stopsAlone: boolean) => Promise<PollResponse | null>;
/** Undo an answer nobody received (claims go back to the queue, stops are told again). */
export type Undo = (launcherId: string, answer: PollResponse) => Promise<void>;

/**
 * The parked long-polls of this coordinator and what wakes them. A commit that makes jobs ready
 * services the longest-waiting parked polls whose launcher may take them, one per new ready
 * job; a commit with a stop or a deregistration for a launcher services that launcher's poll.
 * No polling loop: every answer is caused by a commit (or the hold time, or the client leaving).
 */
export class Dispatcher {
  /** insertion order = longest-waiting first */
  readonly #waiters = new Set<Waiter>();
  readonly #byLauncher = new Map<string, Set<Waiter>>();
  readonly #routes = new Map<string, Route>();
  /** bumped by every commit that could answer a poll: closes the gap between a poll's own try and its parking */
  #epoch = 0;
  #closed = false;
  /** service transactions running now */
  readonly #inflight = new Set<Promise<void>>();
  /**
   * Internal signals for tests and benchmarks (not on the wire): `parked` and `unparked`
   * (launcher id) when a long-poll starts and stops waiting.
   */
  readonly signals = new EventEmitter<{ parked: [string]; unparked: [string] }>();

  constructor(
    private readonly serve: Serve,
    private readonly undo: Undo,
    private readonly onError: (err: unknown) => void,
  ) {}

  get epoch(): number {
    return this.#epoch;
  }

  get parkedCount(): number {
    return this.#waiters.size;
  }

  parkedFor(launcherId: string): number {
    return this.#byLauncher.get(launcherId)?.size ?? 0;
  }

  launchersWithParkedPolls(): string[] {
    return [...this.#byLauncher.keys()];
  }

  /**
   * Park a poll that found nothing, until a commit has something for it, `holdMs` passes (null =
   * 204) or `signal` aborts. `epoch` is this.epoch read before the poll's own attempt.
   */
  park(
    launcher: LauncherRow,
    capacity: number,
    signal: AbortSignal,
    holdMs: number,
    epoch: number,
    stopsAlone = false,
  ): Promise<PollResponse | null> {
    if (this.#closed || signal.aborted) return Promise.resolve(null);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        launcher,
        capacity,
        stopsAlone,
        signal,
        settled: false,
        busy: false,
        finish: (answer) => {
          if (waiter.settled) return;
          waiter.settled = true;
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          this.#waiters.delete(waiter);
          const set = this.#byLauncher.get(launcher.id);
          set?.delete(waiter);
          if (set?.size === 0) this.#byLauncher.delete(launcher.id);
          resolve(answer);
          this.signals.emit('unparked', launcher.id);
        },
      };
      const onAbort = () => waiter.finish(null);
      const timer = setTimeout(() => waiter.finish(null), holdMs);
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.add(waiter);
      let set = this.#byLauncher.get(launcher.id);
      if (!set) this.#byLauncher.set(launcher.id, (set = new Set()));
      set.add(waiter);
      this.signals.emit('parked', launcher.id);
      // something happened between the poll's own attempt and now: try once more
      if (epoch !== this.#epoch) this.#service(waiter);
    });
  }

  /** React to a commit (of this coordinator, or of another one sharing the store). */
  committed(commit: Commit): void {
    if (commit.launchersToWake.size > 0 || commit.readyKeys.size > 0) this.#epoch++;
    for (const id of commit.launchersToWake) {
      const first = [...(this.#byLauncher.get(id) ?? [])].find((w) => !w.busy);
      if (first) this.#service(first);
    }
    if (commit.readyKeys.size === 0) return;
    // parked polls, longest waiting first, until their capacities cover the jobs that became
    // ready, route by route: a poll's capacity counts only against the routes it serves, so a
    // launcher that takes one route's jobs does not leave another route's jobs unoffered while a
    // launcher that serves them stays parked
    const wanted = new Map<Route, number>();
    for (const [key, count] of commit.readyKeys) wanted.set(this.#route(key), count);
    // A poll that serves several of the routes is counted against them in map order, but its claim
    // takes the oldest jobs of all of them: it may take a job another poll was skipped for (one
    // serving only the route it was counted against), and leave that route's job ready while the
    // skipped poll stays parked for its whole hold. Such skipped polls are tried once more when
    // the services of this commit have answered, at most as many as those polls' capacity.
    let unsure = 0;
    const uncertain = new Set<Route>();
    const skipped: Waiter[] = [];
    const started: Promise<void>[] = [];
    for (const waiter of this.#waiters) {
      if (wanted.size === 0 && skipped.length >= unsure) break;
      if (waiter.busy || waiter.capacity === 0 || waiter.signal.aborted) continue;
      const served = [...wanted.keys()].filter((r) => serves(waiter.launcher, r));
      if (served.length === 0) {
        if (skipped.length < unsure && [...uncertain].some((r) => serves(waiter.launcher, r))) skipped.push(waiter);
        continue;
      }
      if (served.length > 1) {
        unsure += waiter.capacity;
        for (const r of served) uncertain.add(r);
      }
      let capacity = waiter.capacity;
      for (const r of served) {
        const left = wanted.get(r)! - capacity;
        capacity = Math.max(0, -left);
        if (left > 0) wanted.set(r, left);
        else wanted.delete(r);
        if (capacity === 0) break;
      }
      started.push(this.#service(waiter));
    }
    if (skipped.length > 0) {
      void Promise.all(started).then(() => {
        for (const waiter of skipped) if (!waiter.settled) this.#service(waiter);
      });
    }
  }

  #route(key: string): Route {
    let route = this.#routes.get(key);
    if (!route) {
      if (this.#routes.size > 10_000) this.#routes.clear();
      this.#routes.set(key, (route = routeFromKey(key)));
    }
    return route;
  }

  /**
   * Resolves when the services started so far have answered (a create waits for its dispatch):
   * true if there were any (one may have taken the job), false at once if none was running.
   */
  async settled(): Promise<boolean> {
    if (this.#inflight.size === 0) return false;
    await Promise.all([...this.#inflight]);
    return true;
  }

  /** Answer the poll if its service transaction finds something; resolves when that has run. */
  #service(waiter: Waiter): Promise<void> {
    if (waiter.busy || waiter.settled) return Promise.resolve();
    waiter.busy = true;
    const running: Promise<void> = this.serve(waiter.launcher.id, waiter.capacity, waiter.stopsAlone).then(
      (answer) => {
        waiter.busy = false;
        if (!answer) return;
        if (waiter.settled || waiter.signal.aborted) {
          // the client left (or the hold ended) while the answer was being made
          this.undo(waiter.launcher.id, answer).catch(this.onError);
          return;
        }
        waiter.finish(answer);
      },
      (err: unknown) => {
        waiter.busy = false;
        this.onError(err);
      },
    );
    this.#inflight.add(running);
    void running.finally(() => this.#inflight.delete(running));
    return running;
  }

  /** Answer every parked poll with 204: the server is closing. */
  close(): void {
    this.#closed = true;
    for (const w of [...this.#waiters]) w.finish(null);
  }

  reopen(): void {
    this.#closed = false;
  }
}
