import { createHash } from 'node:crypto';
import type { CreateJobRequest } from '@agentq/protocol';
import type { Admission } from './admission.js';
import type { CoreContext } from './context.js';
import { CoordinatorError } from './errors.js';
import type { JobRow } from './rows.js';
import * as sessions from './sessions.js';

/*
 * The creates clients ask for (`POST /jobs`, `POST /jobs/batch`), each one transaction: admission
 * (queue_full), then sessions.createJob per job.
 */

/**
 * Create a job. With an Idempotency-Key, the same key and body within 24 h (IDEMPOTENCY_TTL_MS,
 * sweeper.ts) return the job the first request created (`created: false`); a different body with
 * the key is refused.
 */
export function createOne(
  ctx: CoreContext,
  admission: Admission,
  req: CreateJobRequest,
  actor: string | null,
  idempotencyKey?: string,
): Promise<{ job: JobRow; created: boolean }> {
  return ctx.store.transaction(async (tx) => {
    if (idempotencyKey !== undefined) {
      // keys are per token (a key has no spaces: the header's pattern)
      const key = `${actor ?? '-'} ${idempotencyKey}`;
      const hash = requestHash(req);
      const seen = await tx.idempotency(key);
      if (seen) {
        if (seen.requestHash !== hash) {
          throw new CoordinatorError('idempotency_key_reused', 'this Idempotency-Key was used with a different request body', {
            idempotency_key: idempotencyKey,
            job_id: seen.jobIds[0],
          });
        }
        const first = await tx.job(seen.jobIds[0]!);
        if (first) return { job: first, created: false };
        // its job ended and history retention deleted it since (JOB_RETENTION_MS under the key's
        // 24 h): creating it again would run the same request twice, which the key is there to prevent
        throw new CoordinatorError(
          'job_not_found',
          `the job this Idempotency-Key created, ${seen.jobIds[0]}, has ended and been deleted by history retention; send the create with a new key to run it again`,
          { job_id: seen.jobIds[0], idempotency_key: idempotencyKey },
        );
      }
      await admission.check([req]);
      let job: JobRow;
      try {
        job = await sessions.createJob(ctx, tx, req, actor);
      } catch (err) {
        // the same request, sent again (to another coordinator, or on another of its pool's
        // connections) while this one ran, may have committed its session and key since the key
        // was read above (PostgreSQL reads each statement afresh): then this is its replay
        if (!(err instanceof CoordinatorError) || err.code !== 'session_exists') throw err;
        const now = await tx.idempotency(key);
        const first = now?.requestHash === hash ? await tx.job(now.jobIds[0]!) : undefined;
        if (!first) throw err;
        return { job: first, created: false };
      }
      await tx.putIdempotency({ key, requestHash: hash, jobIds: [job.id], createdAt: tx.now });
      return { job, created: true };
    }
    await admission.check([req]);
    return { job: await sessions.createJob(ctx, tx, req, actor), created: true };
  });
}

/** Create many jobs, all or none; a refusal names the failing index. */
export function createMany(
  ctx: CoreContext,
  admission: Admission,
  reqs: readonly CreateJobRequest[],
  actor: string | null,
): Promise<JobRow[]> {
  return ctx.store.transaction(async (tx) => {
    await admission.check(reqs);
    const out: JobRow[] = [];
    for (const [i, req] of reqs.entries()) {
      try {
        out.push(await sessions.createJob(ctx, tx, req, actor));
      } catch (err) {
        if (err instanceof CoordinatorError) {
          const field = typeof err.details?.field === 'string' ? `jobs[${i}].${err.details.field}` : `jobs[${i}]`;
          throw new CoordinatorError(err.code, `jobs[${i}]: ${err.message}`, { ...err.details, index: i, field });
        }
        throw err;
      }
    }
    return out;
  });
}

/** A stable hash of a create request, to compare a retried Idempotency-Key's body. */
function requestHash(req: CreateJobRequest): string {
  const sorted = (v: unknown): unknown =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, sorted((v as Record<string, unknown>)[k])]),
        )
      : v;
  return createHash('sha256').update(JSON.stringify(sorted(req))).digest('hex');
}
