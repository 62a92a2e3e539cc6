import type { Health } from '@agentq/protocol';
import type { ScrapeCounts } from '../metrics/source.js';
import type { CoreContext } from './context.js';
import { isServed, routeFromKey } from './routing.js';
import { within } from './within.js';

/**
 * How long `/health` and `/metrics` wait for the store. A database that takes connections but
 * does not answer (a hung host, a partition) would hold them for the pool's 30 s, past any health
 * probe's timeout (the image's HEALTHCHECK gives 3 s): the store is reported unavailable instead.
 */
export const STATUS_STORE_WAIT_MS = 2000;

/** `work` of the store, or a rejection once STATUS_STORE_WAIT_MS have passed. */
function storeWithin<T>(work: Promise<T>, what: string): Promise<T> {
  return within(work, STATUS_STORE_WAIT_MS, `${what}: the store did not answer within ${STATUS_STORE_WAIT_MS} ms`);
}

/*
 * What the server reports about itself: `GET /health` and the counts `/metrics` reads. Both are
 * read from the store (right whatever coordinator made the change); `parkedPolls` is this
 * coordinator's own, read once the store has answered.
 */

/**
 * `GET /health`, the liveness check: answered whether or not the store can be read. A coordinator
 * cut off from its database is alive, and restarting it would not bring the database back: its
 * counts are then null and `store` says `unavailable` (`GET /ready` is what refuses).
 */
export async function health(ctx: CoreContext, startedAt: number, parkedPolls: () => number): Promise<Omit<Health, 'overloaded'>> {
  const { store, clock } = ctx;
  const uptime_seconds = Math.round(clock.now() - startedAt) / 1000;
  try {
    const [counts, launchers] = await storeWithin(Promise.all([store.counts(), store.listLaunchers()]), 'health');
    let online = 0;
    let stale = 0;
    for (const l of launchers) {
      if (l.status === 'stale') stale++;
      else online++;
    }
    return {
      status: 'ok',
      uptime_seconds,
      store: 'ok',
      queue_depth: counts.pending,
      jobs_active: counts.active,
      launchers: { online, stale, parked_polls: parkedPolls() },
    };
  } catch (err) {
    // debug: a probe every few seconds would repeat it; the store logs the outage itself
    ctx.log.debug({ err }, 'health: the store could not be read');
    return {
      status: 'ok',
      uptime_seconds,
      store: 'unavailable',
      queue_depth: null,
      jobs_active: null,
      launchers: { online: null, stale: null, parked_polls: parkedPolls() },
    };
  }
}

/** What `/metrics` reads at each scrape (see metrics/source.ts). */
export async function metricsCounts(ctx: CoreContext, parkedPolls: () => number): Promise<ScrapeCounts> {
  const { store } = ctx;
  const [counts, jobsByStatus, buckets, launcherRows] = await storeWithin(
    Promise.all([store.counts(), store.countByStatus(), store.readyBuckets(), store.listLaunchers()]),
    'metrics',
  );
  // ready jobs are bucketed by route: a bucket waits for a free slot when some online launcher
  // serves its route (pending_reason null), else for a matching launcher; the pending jobs that
  // are not ready wait for their session
  const online = launcherRows.filter((l) => l.status === 'online');
  let freeSlot = 0;
  let unserved = 0;
  for (const b of buckets) {
    const route = routeFromKey(b.key);
    if (isServed(route, online)) freeSlot += b.size;
    else unserved += b.size;
  }
  const stale = launcherRows.filter((l) => l.status === 'stale').length;
  return {
    queueDepth: counts.pending,
    pendingByWait: {
      free_slot: freeSlot,
      matching_launcher: unserved,
      // read apart from the buckets (a store with a pool may see a commit between the two)
      session: Math.max(0, counts.pending - freeSlot - unserved),
    },
    jobsByStatus,
    launchers: { online: launcherRows.length - stale, stale },
    parkedPolls: parkedPolls(),
  };
}
