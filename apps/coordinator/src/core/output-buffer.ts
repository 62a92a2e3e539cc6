/**
 * A job's output: a byte stream of which the newest `maxBytes` are kept (oldest chunks dropped
 * first). Offsets are positions in the whole stream, so readers can follow it across drops.
 */
export class OutputBuffer {
  #chunks: Buffer[] = [];
  /** stream offset of the first retained byte */
  #start = 0;
  #total = 0;
  #retained = 0;
  #waiters = new Set<() => void>();

  constructor(private readonly maxBytes: number) {}

  get totalBytes(): number {
    return this.#total;
  }
  get retainedBytes(): number {
    return this.#retained;
  }
  get truncated(): boolean {
    return this.#start > 0;
  }

  /**
   * Append `data`, which the sender says starts at stream offset `offset`. Bytes already
   * received (a retried batch) are skipped, so a retry never stores output twice.
   * A batch that starts past the end means the coordinator lost bytes the launcher had sent (a
   * restart: output is not journaled; the launcher never skips a batch). Offsets must stay the
   * launcher's, so the gap counts as dropped output: what came before it leaves the retained
   * window and `truncated` is set.
   * Returns the number of new bytes stored.
   */
  append(offset: number, data: string | Buffer): number {
    let buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (offset > this.#total) {
      this.#chunks = [];
      this.#retained = 0;
      this.#start = this.#total = offset;
    }
    if (offset < this.#total) {
      const overlap = this.#total - offset;
      if (overlap >= buf.length) return 0;
      buf = buf.subarray(overlap);
    }
    if (buf.length === 0) return 0;
    this.#chunks.push(buf);
    this.#total += buf.length;
    this.#retained += buf.length;
    while (this.#retained > this.maxBytes && this.#chunks.length > 0) {
      const first = this.#chunks[0]!;
      const excess = this.#retained - this.maxBytes;
      if (first.length <= excess) {
        this.#chunks.shift();
        this.#retained -= first.length;
        this.#start += first.length;
      } else {
        this.#chunks[0] = first.subarray(excess);
        this.#retained -= excess;
        this.#start += excess;
      }
    }
    for (const wake of this.#waiters) wake();
    this.#waiters.clear();
    return buf.length;
  }

  /** The last `tailBytes` retained bytes. */
  tail(tailBytes: number): { text: string; offset: number; end: number } {
    return this.read(Math.max(this.#start, this.#total - tailBytes), tailBytes);
  }

  /**
   * Up to `limit` bytes from stream offset `from` (clamped to what is retained), on UTF-8
   * character boundaries: leading continuation bytes are skipped, and a character the limit cuts
   * in two is left for the next read, unless it is the first one (a limit smaller than the next
   * character answers that character whole, so that a reader always moves on).
   */
  read(from: number, limit: number): { text: string; offset: number; end: number } {
    const buf = Buffer.concat(this.#chunks, this.#retained);
    const first = Math.min(Math.max(from, this.#start), this.#total) - this.#start;
    let s = first;
    while (s < buf.length && (buf[s]! & 0xc0) === 0x80) s++;
    let e = Math.min(buf.length, first + limit);
    if (e < buf.length) {
      const cut = utf8Boundary(buf, e);
      e = cut > s ? cut : Math.min(buf.length, s + utf8Width(buf[s]!));
    }
    e = Math.max(s, e);
    return { text: buf.subarray(s, e).toString('utf8'), offset: this.#start + s, end: this.#start + e };
  }

  /** Resolve when more output arrives (or `signal` aborts). */
  whenAppended(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const wake = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.#waiters.delete(wake);
        resolve();
      };
      this.#waiters.add(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** The largest index <= `end` that does not split a UTF-8 character. */
function utf8Boundary(buf: Buffer, end: number): number {
  let i = end;
  // walk back over continuation bytes to the lead byte of the last character
  while (i > 0 && (buf[i - 1]! & 0xc0) === 0x80) i--;
  if (i === 0) return end;
  return i - 1 + utf8Width(buf[i - 1]!) <= end ? end : i - 1;
}

/** The bytes of the character whose lead byte this is. */
function utf8Width(lead: number): number {
  return lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1;
}
