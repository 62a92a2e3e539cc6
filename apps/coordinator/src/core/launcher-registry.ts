import { EventEmitter } from 'node:events';
import type { PollResponse } from '@agentq/protocol';
import type { Clock } from './clock.js';
import { launcherUnknown } from './errors.js';
import { newId } from './ids.js';
import type { LauncherRecord, PollWaiter } from './launcher-record.js';

/**
 * The registry of launchers and their parked long-polls. It knows who is registered, who is
 * alive and who is waiting; what happens to a launcher's jobs is the coordinator's business.
 */
export class LauncherRegistry {
  readonly #launchers = new Map<string, LauncherRecord>();
  /** parked polls that can take a job, longest-waiting first */
  readonly #jobWaiters = new Set<PollWaiter>();
  /**
   * Internal signals for tests and benchmarks (not on the wire): `parked` and `unparked`
   * (launcher id) when a long-poll starts and stops waiting.
   */
  readonly signals = new EventEmitter<{ parked: [string]; unparked: [string] }>();

  constructor(private readonly clock: Clock) {}

  get size(): number {
    return this.#launchers.size;
  }

  values(): IterableIterator<LauncherRecord> {
    return this.#launchers.values();
  }

  get(launcherId: string): LauncherRecord | undefined {
    return this.#launchers.get(launcherId);
  }

  newId(): string {
    return newId('lnch_', (x) => this.#launchers.has(x));
  }

  add(launcher: LauncherRecord): void {
    this.#launchers.set(launcher.id, launcher);
  }

  /** Whether it was registered (and is now forgotten). */
  delete(launcher: LauncherRecord): boolean {
    return this.#launchers.delete(launcher.id);
  }

  /** A launcher that may poll and report: registered and not declared stale (else 401). */
  live(launcherId: string): LauncherRecord {
    const launcher = this.#launchers.get(launcherId);
    if (!launcher) throw launcherUnknown(launcherId);
    if (launcher.status === 'stale') throw launcherUnknown(launcherId, 'was declared stale');
    return launcher;
  }

  /** A sign of life. */
  touch(launcher: LauncherRecord): void {
    launcher.lastSeen = this.clock.now();
  }

  /**
   * Park a poll until something answers it (`answer`, a job waiter being taken), `holdMs`
   * passes (null = 204) or `signal` aborts (the client left).
   */
  park(launcher: LauncherRecord, capacity: number, signal: AbortSignal, holdMs: number): Promise<PollResponse | null> {
    return new Promise((resolve) => {
      let settled = false;
      const waiter: PollWaiter = {
        launcher,
        capacity,
        signal,
        finish: (answer) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          launcher.waiters.delete(waiter);
          this.#jobWaiters.delete(waiter);
          // a poll that ends because its client left is no sign of life
          if (!signal.aborted) this.touch(launcher);
          resolve(answer);
          this.signals.emit('unparked', launcher.id);
        },
      };
      const onAbort = () => waiter.finish(null);
      const timer = setTimeout(() => waiter.finish(null), holdMs);
      signal.addEventListener('abort', onAbort, { once: true });
      launcher.waiters.add(waiter);
      if (capacity > 0) this.#jobWaiters.add(waiter);
      this.signals.emit('parked', launcher.id);
    });
  }

  /** The longest-waiting parked poll that can take a job (clients that left are skipped). */
  takeJobWaiter(): PollWaiter | undefined {
    for (const waiter of this.#jobWaiters) {
      this.#jobWaiters.delete(waiter);
      if (!waiter.signal.aborted) return waiter;
      waiter.finish(null);
    }
    return undefined;
  }

  get hasJobWaiters(): boolean {
    return this.#jobWaiters.size > 0;
  }

  /** Answer the launcher's parked poll, if it has one. */
  answer(launcher: LauncherRecord, answer: PollResponse): boolean {
    const [waiter] = launcher.waiters;
    waiter?.finish(answer);
    return waiter !== undefined;
  }

  /** Answer every parked poll of the launcher (or of all launchers) with `answer`. */
  answerAll(answer: PollResponse | null, launcher?: LauncherRecord): void {
    const launchers = launcher ? [launcher] : [...this.#launchers.values()];
    for (const l of launchers) for (const w of [...l.waiters]) w.finish(answer);
  }

  counts(): { online: number; stale: number; parked_polls: number } {
    let online = 0;
    let stale = 0;
    let parked = 0;
    for (const l of this.#launchers.values()) {
      if (l.status === 'stale') stale++;
      else online++;
      parked += l.waiters.size;
    }
    return { online, stale, parked_polls: parked };
  }
}
