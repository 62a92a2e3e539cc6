import type { Job } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { onlineLaunchers } from './launchers.js';
import { namingHost, routeFromKey, unservedReason } from './routing.js';
import { treeSpent, type JobRow } from './rows.js';
import { toWireJob } from './wire.js';

/** A job as clients see it, with why it is still waiting when it is pending. */
export async function wireJob(ctx: CoreContext, job: JobRow): Promise<Job> {
  return toWireJob(job, (await pendingReasons(ctx, [job])).get(job.id) ?? null);
}

/** Why each pending job is still waiting (see docs/routing.md). */
export async function pendingReasons(ctx: CoreContext, jobs: readonly JobRow[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const pending = jobs.filter((j) => j.status === 'pending');
  if (pending.length === 0) return out;
  const { store } = ctx;
  const online = await onlineLaunchers(store);
  for (const job of pending) {
    if (job.readySince === null || job.routeKey === null) {
      const session = await store.getSession(job.sessionName);
      const extras = session ? await store.sessionExtras(session) : null;
      const blocker = extras?.activeJobId ?? null;
      out.set(
        job.id,
        blocker
          ? `waiting for job ${blocker} of session ${job.sessionName} to end`
          : `waiting behind older jobs of session ${job.sessionName}`,
      );
      continue;
    }
    const route = routeFromKey(job.routeKey);
    const session = route.affinity || job.parentSessionName !== null ? await store.getSession(job.sessionName) : undefined;
    // a child of a tree that spent its budget since the job was queued: it will not run (jobs.ts claim)
    const root = session && session.parentName !== null ? await store.getSession(session.rootName) : undefined;
    if (treeSpent(root)) {
      out.set(job.id, `session tree ${root!.name} has spent its budget: this job will not run (a launcher that would take it ends it, failed budget_exceeded)`);
      continue;
    }
    const why = unservedReason(namingHost(route, session), online);
    if (why) out.set(job.id, why);
  }
  return out;
}
