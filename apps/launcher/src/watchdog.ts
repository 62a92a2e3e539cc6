/**
 * The executor watchdog (issue 12), for the known ways an agent CLI hangs unattended:
 * - silence: nothing printed on stdout or stderr for `idleMs` (the stream stopped with no
 *   result): `onIdle` fires once;
 * - no exit after the end: once the executor has given its result (or its error), it gets
 *   `exitGraceMs` to exit; then `onExitGraceOver` fires once.
 * After the result only the exit grace applies. 0 disables the idle timeout.
 */
export class Watchdog {
  readonly #idleMs: number;
  readonly #exitGraceMs: number;
  readonly #onIdle: () => void;
  readonly #onExitGraceOver: () => void;
  #idleTimer: NodeJS.Timeout | undefined;
  #graceTimer: NodeJS.Timeout | undefined;
  #finalSeen = false;
  #stopped = false;

  constructor(o: { idleMs: number; exitGraceMs: number; onIdle: () => void; onExitGraceOver: () => void }) {
    this.#idleMs = o.idleMs;
    this.#exitGraceMs = o.exitGraceMs;
    this.#onIdle = o.onIdle;
    this.#onExitGraceOver = o.onExitGraceOver;
    this.activity();
  }

  /** The executor printed something: it is alive. */
  activity(): void {
    if (this.#stopped || this.#finalSeen || this.#idleMs <= 0) return;
    // refresh() re-arms the same timer: cheap enough to call for every chunk of output
    if (this.#idleTimer) this.#idleTimer.refresh();
    else this.#idleTimer = setTimeout(() => this.#fire(this.#onIdle), this.#idleMs);
  }

  /** The executor emitted its result (or error): from now on it only has to exit. */
  finalEvent(): void {
    if (this.#stopped || this.#finalSeen) return;
    this.#finalSeen = true;
    clearTimeout(this.#idleTimer);
    this.#graceTimer = setTimeout(() => this.#fire(this.#onExitGraceOver), this.#exitGraceMs);
  }

  /** The executor exited (or is being stopped for another reason): no more timers. */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#graceTimer);
  }

  #fire(callback: () => void): void {
    if (this.#stopped) return;
    this.stop();
    callback();
  }
}
