import { randomBytes } from 'node:crypto';

/**
 * Random bytes for ids, drawn 4 KiB at a time: one system call for hundreds of ids instead of one
 * each (a batch create makes up to a thousand).
 */
const POOL = 4096;
let pool = Buffer.alloc(0);
let used = POOL;

function random6(): string {
  if (used + 6 > pool.length) {
    pool = randomBytes(POOL);
    used = 0;
  }
  const hex = pool.toString('hex', used, used + 6);
  used += 6;
  return hex;
}

/** `prefix` + 12 random hex chars, retried on the (astronomically rare) collision. */
export function newId(prefix: 'job_' | 'lnch_' | 'msg_', taken: (id: string) => boolean = () => false): string {
  for (;;) {
    const id = prefix + random6();
    if (!taken(id)) return id;
  }
}
