import { ReadyQueue, type QueueLinks } from '../ready-queue.js';
import { routeFromKey, serves, type Route } from '../routing.js';
import type { JobRow, LauncherRow } from '../rows.js';

interface Node extends QueueLinks<Node> {
  readonly id: string;
  readonly readySince: number;
}

interface Bucket {
  readonly key: string;
  readonly route: Route;
  readonly queue: ReadyQueue<Node>;
  /** launcher id -> whether it serves this bucket (labels and roots never change for an id) */
  readonly servedBy: Map<string, boolean>;
}

/**
 * The ready queue, bucketed by route key: FIFO (creation order) inside each bucket. A claim looks
 * only at the non-empty buckets its launcher serves and takes the oldest head among them, so its
 * cost depends on the number of routes, not on the number of pending jobs.
 */
export class ReadyIndex {
  readonly #buckets = new Map<string, Bucket>();
  readonly #nodes = new Map<string, Node>();

  get size(): number {
    return this.#nodes.size;
  }

  has(jobId: string): boolean {
    return this.#nodes.has(jobId);
  }

  insert(job: JobRow): void {
    if (job.readySince === null || job.routeKey === null || this.#nodes.has(job.id)) return;
    let bucket = this.#buckets.get(job.routeKey);
    if (!bucket) {
      bucket = { key: job.routeKey, route: routeFromKey(job.routeKey), queue: new ReadyQueue(), servedBy: new Map() };
      this.#buckets.set(job.routeKey, bucket);
    }
    const node: Node = { id: job.id, seq: job.seq, readySince: job.readySince, prev: null, next: null, queued: false };
    this.#nodes.set(job.id, node);
    bucket.queue.insert(node);
  }

  remove(job: JobRow): void {
    const node = this.#nodes.get(job.id);
    if (!node || job.routeKey === null) return;
    this.#nodes.delete(job.id);
    const bucket = this.#buckets.get(job.routeKey);
    if (!bucket) return;
    bucket.queue.remove(node);
    if (bucket.queue.size === 0) this.#buckets.delete(bucket.key);
  }

  /** Launcher `id` is gone: drop its cached answers. */
  forgetLauncher(id: string): void {
    for (const b of this.#buckets.values()) b.servedBy.delete(id);
  }

  /**
   * Ready job ids `launcher` may take, oldest first, skipping those `skip` rejects, at most `max`:
   * a k-way merge over the heads of the buckets it serves.
   */
  takeFor(launcher: LauncherRow, max: number, skip: (id: string) => boolean): string[] {
    const cursors: Node[] = [];
    for (const b of this.#buckets.values()) {
      let ok = b.servedBy.get(launcher.id);
      if (ok === undefined) {
        ok = serves(launcher, b.route);
        b.servedBy.set(launcher.id, ok);
      }
      const head = b.queue.peek();
      if (ok && head) cursors.push(head);
    }
    const out: string[] = [];
    while (out.length < max && cursors.length > 0) {
      let best = 0;
      for (let i = 1; i < cursors.length; i++) if (cursors[i]!.seq < cursors[best]!.seq) best = i;
      const node = cursors[best]!;
      if (!skip(node.id)) out.push(node.id);
      if (node.next) cursors[best] = node.next;
      else cursors.splice(best, 1);
    }
    return out;
  }

  /** Whether `launcher` could take something now (cheap: no list is built). */
  hasFor(launcher: LauncherRow): boolean {
    for (const b of this.#buckets.values()) {
      let ok = b.servedBy.get(launcher.id);
      if (ok === undefined) {
        ok = serves(launcher, b.route);
        b.servedBy.set(launcher.id, ok);
      }
      if (ok && b.queue.size > 0) return true;
    }
    return false;
  }

  /** Non-empty buckets; `headReadySince` is when the oldest job (by creation) became ready. */
  buckets(): { key: string; route: Route; size: number; headReadySince: number }[] {
    return [...this.#buckets.values()].map((b) => ({
      key: b.key,
      route: b.route,
      size: b.queue.size,
      headReadySince: b.queue.peek()?.readySince ?? 0,
    }));
  }

  /** The ids of one bucket's jobs, oldest first. */
  *idsIn(key: string): Generator<string> {
    const b = this.#buckets.get(key);
    if (!b) return;
    for (const n of b.queue) yield n.id;
  }
}
