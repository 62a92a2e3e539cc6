import { randomBytes } from 'node:crypto';

/** `prefix` + 12 random hex chars, retried on the (astronomically rare) collision. */
export function newId(prefix: 'job_' | 'lnch_' | 'msg_', taken: (id: string) => boolean = () => false): string {
  for (;;) {
    const id = prefix + randomBytes(6).toString('hex');
    if (!taken(id)) return id;
  }
}
