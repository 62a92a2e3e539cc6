import type { CoreContext } from './context.js';
import { CoordinatorError } from './errors.js';
import { end, requeue } from './jobs.js';
import type { Tx } from './store/store.js';

/**
 * After a restart on a durable store (docs/operations.md, "Restarts"): pending jobs keep their
 * FIFO places; claimed jobs go back to the head of the queue (a launcher that did get one is
 * refused at `started` and does not run it); running jobs keep running when their launcher is
 * still registered (it has a whole heartbeat timeout to come back) and end `interrupted` when it
 * is not. A claim taken back so is not a lost claim for JOB_MAX_CLAIMS (jobs.ts loseClaim): the
 * restart was not the job's doing. Not run for a shared store: other coordinators are serving
 * those launchers.
 *
 * A restart must come up even when the database cannot be written (a full disk): reading the
 * state needs no space. If these changes cannot be written they are left to the sweeper, which
 * makes the same ones as time passes (claim leases, stale launchers), once writes work again.
 */
export async function recover(ctx: CoreContext): Promise<void> {
  const { store, log } = ctx;
  if (store.shared) return;
  const ids = await store.activeJobIds();
  if (ids.length === 0) return;
  try {
    const { requeued, interrupted } = await store.transaction((tx) => recoverJobs(ctx, tx, ids));
    log.info({ requeued, interrupted, active: ids.length }, 'recovered after restart');
  } catch (err) {
    if (!(err instanceof CoordinatorError) || err.code !== 'storage_unavailable') throw err;
    log.error({ err: err.message, active: ids.length }, 'recovery not written (the database refuses writes): left to the sweeper');
  }
}

async function recoverJobs(ctx: CoreContext, tx: Tx, ids: readonly string[]): Promise<{ requeued: number; interrupted: number }> {
  let requeued = 0;
  let interrupted = 0;
  for (const id of ids) {
    const job = await tx.job(id);
    if (!job) continue;
    if (job.status === 'claimed') {
      await requeue(ctx, tx, job, 'the coordinator restarted before its launcher started it');
      requeued++;
      continue;
    }
    const launcher = job.launcherId === null ? undefined : await tx.launcher(job.launcherId);
    if (!launcher || launcher.status === 'stale') {
      await end(ctx, tx, job, 'interrupted', {
        error: `launcher ${job.launcherId} lost across a coordinator restart`,
        errorCode: 'launcher_lost',
      });
      interrupted++;
    }
  }
  return { requeued, interrupted };
}
