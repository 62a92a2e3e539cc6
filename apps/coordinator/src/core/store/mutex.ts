/** One holder at a time, first come first served; free when nobody holds it (no timer, no tick). */
export class Mutex {
  #held = false;
  readonly #queue: (() => void)[] = [];

  acquire(): Promise<void> | undefined {
    if (!this.#held) {
      this.#held = true;
      return undefined;
    }
    return new Promise((resolve) => this.#queue.push(resolve));
  }

  release(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#held = false;
  }
}
