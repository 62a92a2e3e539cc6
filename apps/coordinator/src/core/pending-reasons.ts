import type { Job } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { namingHost, routeFromKey, unservedReason } from './routing.js';
import type { JobRow } from './rows.js';
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
  const online = (await store.listLaunchers()).filter((l) => l.status === 'online');
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
    const session = route.affinity ? await store.getSession(job.sessionName) : undefined;
    const why = unservedReason(namingHost(route, session), online);
    if (why) out.set(job.id, why);
  }
  return out;
}
