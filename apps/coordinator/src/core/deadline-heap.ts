/** A binary min-heap of (deadline, value): job timeouts fire in deadline order without a scan. */
export class DeadlineHeap<T> {
  #items: Array<{ at: number; value: T }> = [];

  get size(): number {
    return this.#items.length;
  }

  push(at: number, value: T): void {
    const items = this.#items;
    items.push({ at, value });
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]!.at <= items[i]!.at) break;
      [items[parent], items[i]] = [items[i]!, items[parent]!];
      i = parent;
    }
  }

  /** Remove and return every value whose deadline is at or before `now`. */
  popDue(now: number): T[] {
    const due: T[] = [];
    while (this.#items.length > 0 && this.#items[0]!.at <= now) due.push(this.#pop());
    return due;
  }

  #pop(): T {
    const items = this.#items;
    const top = items[0]!;
    const last = items.pop()!;
    if (items.length > 0) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < items.length && items[l]!.at < items[m]!.at) m = l;
        if (r < items.length && items[r]!.at < items[m]!.at) m = r;
        if (m === i) break;
        [items[m], items[i]] = [items[i]!, items[m]!];
        i = m;
      }
    }
    return top.value;
  }
}
