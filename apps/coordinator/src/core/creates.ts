import type { CreateJobRequest } from '@agentq/protocol';
import type { Admission } from './admission.js';
import type { Turn } from './agent-tokens.js';
import type { CoreContext } from './context.js';
import { CoordinatorError } from './errors.js';
import { requestHash, scopedKey, seenWith } from './idempotency.js';
import type { JobRow } from './rows.js';
import type { Tx } from './store/store.js';
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
export async function createOne(
  ctx: CoreContext,
  admission: Admission,
  req: CreateJobRequest,
  actor: string | null,
  idempotencyKey?: string,
  turn?: Turn,
): Promise<{ job: JobRow; created: boolean }> {
  const { jobs, created } = await ctx.store.transaction((tx) => {
    if (turn === undefined) announce(tx, [req]);
    return once(tx, actor, idempotencyKey, req, async () => {
      if (turn !== undefined) {
        await sessions.checkTurnGoesOn(tx, turn);
        announce(tx, [req]);
      }
      await admission.check([req]);
      return [await sessions.createJob(ctx, tx, req, actor)];
    });
  });
  return { job: jobs[0]!, created };
}

/**
 * Create many jobs, all or none; a refusal names the failing index. An Idempotency-Key works as
 * for one job: the same key and jobs answer the jobs the first request created.
 */
export function createMany(
  ctx: CoreContext,
  admission: Admission,
  reqs: readonly CreateJobRequest[],
  actor: string | null,
  idempotencyKey?: string,
  turn?: Turn,
): Promise<{ jobs: JobRow[]; created: boolean }> {
  return ctx.store.transaction((tx) => {
    if (turn === undefined) announce(tx, reqs);
    // hashed as the request body, so a key first used for one job is reused, not replayed, here
    return once(tx, actor, idempotencyKey, { jobs: reqs }, async () => {
      if (turn !== undefined) {
        await sessions.checkTurnGoesOn(tx, turn);
        announce(tx, reqs);
      }
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
  });
}

/**
 * Tell the store which sessions the creates read (Tx.aheadOfCreates), at the start (the reads go
 * with the Idempotency-Key's); after the turn's job when an agent's token asks: checkTurnGoesOn
 * locks that job's session first, so the sessions are locked in the same order as without the hint.
 */
function announce(tx: Tx, reqs: readonly CreateJobRequest[]): void {
  tx.aheadOfCreates?.(
    reqs.map((r) => ({ session: r.session_name, parent: r.parent_session_name ?? null, start: r.type === 'start_session' })),
  );
}

/**
 * Run `create` once per Idempotency-Key (none: every time). A key seen with the same body answers
 * the jobs it created (`created: false`); with another body, 409 idempotency_key_reused.
 */
async function once(
  tx: Tx,
  actor: string | null,
  idempotencyKey: string | undefined,
  body: unknown,
  create: () => Promise<JobRow[]>,
): Promise<{ jobs: JobRow[]; created: boolean }> {
  if (idempotencyKey === undefined) return { jobs: await create(), created: true };
  const key = scopedKey(actor, idempotencyKey);
  const hash = requestHash(body);
  const seen = await seenWith(tx, key, hash, idempotencyKey);
  if (seen) return { jobs: await replayed(tx, seen.jobIds, idempotencyKey), created: false };
  let jobs: JobRow[];
  try {
    jobs = await create();
  } catch (err) {
    // the same request, sent again (to another coordinator, or on another of its pool's
    // connections) while this one ran, may have committed its session and key since the key
    // was read above (PostgreSQL reads each statement afresh): then this is its replay
    if (!(err instanceof CoordinatorError) || err.code !== 'session_exists') throw err;
    const now = await tx.idempotency(key);
    if (now?.requestHash !== hash) throw err;
    return { jobs: await replayed(tx, now.jobIds, idempotencyKey), created: false };
  }
  await tx.putIdempotency({ key, requestHash: hash, jobIds: jobs.map((j) => j.id), createdAt: tx.now });
  return { jobs, created: true };
}

/** The jobs a key created, read again for its replay. */
async function replayed(tx: Tx, ids: readonly string[], idempotencyKey: string): Promise<JobRow[]> {
  const jobs: JobRow[] = [];
  for (const id of ids) {
    const job = await tx.job(id);
    // it ended and history retention deleted it since (JOB_RETENTION_MS under the key's 24 h):
    // creating it again would run the same request twice, which the key is there to prevent
    if (!job) {
      throw new CoordinatorError(
        'job_not_found',
        `the job this Idempotency-Key created, ${id}, has ended and been deleted by history retention; send the create with a new key to run it again`,
        { job_id: id, idempotency_key: idempotencyKey },
      );
    }
    jobs.push(job);
  }
  return jobs;
}
