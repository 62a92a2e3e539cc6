/** What the queue needs from an item: a creation sequence number and two link slots. */
export interface QueueLinks<T> {
  readonly seq: number;
  prev: T | null;
  next: T | null;
  queued: boolean;
}

/**
 * The jobs that can be claimed now, in creation order (strict FIFO), as an intrusive doubly
 * linked list. `push` of a new job (always the newest) and `shift` are O(1); `remove` is O(1).
 * `insert` puts back a job that waited (its session was busy, or it was requeued) at its
 * creation-order place, scanning from the head over the older ready jobs only, which in a FIFO
 * queue are few: everything older than it was claimable before it.
 */
export class ReadyQueue<T extends QueueLinks<T>> {
  #head: T | null = null;
  #tail: T | null = null;
  #size = 0;

  get size(): number {
    return this.#size;
  }

  peek(): T | null {
    return this.#head;
  }

  insert(item: T): void {
    if (item.queued) return;
    if (this.#tail === null || this.#tail.seq < item.seq) return this.#linkAfter(item, this.#tail);
    let before: T | null = null;
    let cursor = this.#head;
    while (cursor !== null && cursor.seq < item.seq) {
      before = cursor;
      cursor = cursor.next;
    }
    this.#linkAfter(item, before);
  }

  shift(): T | null {
    const item = this.#head;
    if (item) this.remove(item);
    return item;
  }

  remove(item: T): void {
    if (!item.queued) return;
    if (item.prev) item.prev.next = item.next;
    else this.#head = item.next;
    if (item.next) item.next.prev = item.prev;
    else this.#tail = item.prev;
    item.prev = item.next = null;
    item.queued = false;
    this.#size--;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let c = this.#head; c !== null; c = c.next) yield c;
  }

  #linkAfter(item: T, before: T | null): void {
    item.prev = before;
    item.next = before ? before.next : this.#head;
    if (item.next) item.next.prev = item;
    else this.#tail = item;
    if (before) before.next = item;
    else this.#head = item;
    item.queued = true;
    this.#size++;
  }
}
