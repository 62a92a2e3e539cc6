import { createHash } from 'node:crypto';
import { CoordinatorError } from './errors.js';
import type { IdempotencyRow } from './rows.js';
import type { Tx } from './store/store.js';

/*
 * What creates (creates.ts) and stops (stops.ts) share about `Idempotency-Key`: keys are per token,
 * a request is known by the hash of its body (or, for a stop, of what it names), and a key seen
 * with another request is refused. Keys live for IDEMPOTENCY_TTL_MS (sweeper.ts).
 */

/** The key's row key: per token (a key has no spaces: the header's pattern). */
export function scopedKey(actor: string | null, idempotencyKey: string): string {
  return `${actor ?? '-'} ${idempotencyKey}`;
}

/** A stable hash of a request (objects compared whatever their key order). */
export function requestHash(body: unknown): string {
  const sorted = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
        )
      : v;
  return createHash('sha256').update(JSON.stringify(sorted(body))).digest('hex');
}

/**
 * The row of a key already seen with this request, or undefined when the key is new; a key seen
 * with another request is 409 idempotency_key_reused (naming the first request's first job).
 */
export async function seenWith(tx: Tx, key: string, hash: string, idempotencyKey: string): Promise<IdempotencyRow | undefined> {
  const seen = await tx.idempotency(key);
  if (seen && seen.requestHash !== hash) {
    throw new CoordinatorError('idempotency_key_reused', 'this Idempotency-Key was used with a different request', {
      idempotency_key: idempotencyKey,
      ...(seen.jobIds[0] === undefined ? {} : { job_id: seen.jobIds[0] }),
    });
  }
  return seen;
}
