import { isTerminal } from '@agentq/protocol';
import type { CoreContext } from './context.js';
import { end, endPending, loseClaim, requestStop, stoppedStatus } from './jobs.js';
import { loseLauncher, onlineLaunchers, STALE_LAUNCHER_KEEP_MS } from './launchers.js';
import { isServed, namingHost, routeFromKey, unservedReason } from './routing.js';
import { holdsNoInput, isDelivery } from './rows.js';
import type { Tx } from './store/store.js';

/** Idempotency-Keys are honoured for this long. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
/** History rows deleted per sweep at most (a sweep stays short however much is due). */
const HISTORY_BATCH = 1000;

/**
 * The sweeper: what happens because time passed. Run by a timer (every SWEEP_INTERVAL_MS); tests
 * call it after moving a ManualClock. Each change is its own transaction.
 */
export class Sweeper {
  /**
   * route key -> when the sweeper first saw no online launcher able to take its jobs; read from a
   * durable store at the first sweep and written back when it changes, so a restart goes on
   * counting JOB_SCHEDULE_TIMEOUT instead of starting it over
   */
  readonly #unservedSince = new Map<string, number>();
  #unservedLoaded = false;
  /** `#unservedSince` has changed since the store last kept it */
  #unservedChanged = false;

  constructor(
    private readonly ctx: CoreContext,
    /** launchers with a poll parked on this coordinator: a parked poll is a sign of life */
    private readonly parkedLaunchers: () => string[],
  ) {}

  async sweep(): Promise<void> {
    const { store, clock } = this.ctx;
    const now = clock.now();
    for (const id of this.parkedLaunchers()) await store.touchLauncher(id, now);
    // several coordinators on one store: exactly one sweeps (the others only keep their parked
    // launchers alive, above)
    if (store.sweeperLease && !(await store.sweeperLease())) {
      // another coordinator sweeps now: should this one sweep again, it reads what that one kept
      this.#unservedLoaded = false;
      return;
    }
    await this.#launchers(now);
    await this.#leases(now);
    await this.#timeouts(now);
    await this.#unmatched(now);
    await this.#history(now);
    await store.purgeIdempotency(now - IDEMPOTENCY_TTL_MS);
    await store.purgeEvents?.(now);
    await store.foldJobCounts?.();
    store.trimCache();
  }

  /** No heartbeat or poll for too long: stale. Stale for an hour: forgotten. */
  async #launchers(now: number): Promise<void> {
    const { store, config } = this.ctx;
    const staleMs = config.heartbeatTimeoutSeconds * 1000;
    for (const l of await store.listLaunchers()) {
      if (l.status === 'stale') {
        if (now - (l.staleAt ?? now) < STALE_LAUNCHER_KEEP_MS) continue;
        await store.transaction(async (tx) => {
          if ((await tx.launcher(l.id))?.status !== 'stale') return;
          await tx.deleteLauncher(l.id);
          tx.emit('launcher.removed', { launcher: l.id });
        });
      } else if (now - l.lastSeen > staleMs) {
        await store.transaction(async (tx) => {
          const current = await tx.launcher(l.id);
          if (current && current.status !== 'stale' && now - current.lastSeen > staleMs) await loseLauncher(this.ctx, tx, current);
        });
      }
    }
  }

  /** A claim not reported `started` within the lease goes back to the queue. */
  async #leases(now: number): Promise<void> {
    const { store, config } = this.ctx;
    const leaseMs = config.claimLeaseSeconds * 1000;
    for (const id of await store.expiredClaims(now - leaseMs)) {
      await store.transaction(async (tx) => {
        const job = await tx.job(id);
        if (!job || job.startedAt !== null || job.claimedAt === null || now - job.claimedAt <= leaseMs) return;
        if (job.status === 'claimed') {
          await loseClaim(this.ctx, tx, job, `claim lease of ${config.claimLeaseSeconds} s expired before it was started`);
        } else if (job.status === 'stopping') {
          await end(this.ctx, tx, job, stoppedStatus(job.stopReason), { error: 'stopped before its launcher started it' });
        }
      });
    }
  }

  /**
   * A job past its timeout: a pending one ends now (not a delivery: its time counts from its
   * claim); a running one is asked to stop.
   */
  async #timeouts(now: number): Promise<void> {
    const { store } = this.ctx;
    for (const id of await store.dueTimeouts(now)) {
      await store.transaction(async (tx) => {
        const job = await tx.job(id);
        if (!job || isTerminal(job.status)) return;
        // its deadline may have moved since it was listed (a delivery taken: jobs.ts claim)
        if (job.timeoutMs === null || job.createdAt + job.timeoutMs > now) return;
        if (job.status === 'pending') {
          // a delivery's timeout counts once a launcher takes it: it waits for its session's host
          if (!isDelivery(job)) await endPending(this.ctx, tx, job, 'timeout', null);
        } else if (job.status !== 'stopping') {
          // a stop already under way keeps its reason: the request came first, so it ends `stopped`
          await requestStop(this.ctx, tx, job, 'timeout', null);
        }
      });
    }
  }

  /**
   * Ready jobs that no online launcher could take for JOB_SCHEDULE_TIMEOUT seconds fail; not
   * deliveries: no client waits on them, and failed they would leave the outcomes they carry
   * waiting for new input after the session's host came back. They wait for the host.
   */
  async #unmatched(now: number): Promise<void> {
    const { store, config } = this.ctx;
    const timeoutMs = config.scheduleTimeoutSeconds * 1000;
    if (timeoutMs === 0) return;
    if (!this.#unservedLoaded && store.unservedSince) {
      this.#unservedSince.clear();
      for (const [key, since] of await store.unservedSince()) this.#unservedSince.set(key, since);
      this.#unservedChanged = false;
    }
    this.#unservedLoaded = true;
    let online = await onlineLaunchers(store);
    const seen = new Set<string>();
    for (const bucket of await store.readyBuckets()) {
      seen.add(bucket.key);
      const route = routeFromKey(bucket.key);
      if (isServed(route, online)) {
        if (this.#unservedSince.delete(bucket.key)) this.#unservedChanged = true;
        continue;
      }
      let since = this.#unservedSince.get(bucket.key);
      if (since === undefined) {
        this.#unservedSince.set(bucket.key, (since = now));
        this.#unservedChanged = true;
      }
      if (now - Math.max(since, bucket.headReadySince) < timeoutMs) continue;
      // about to fail jobs: the launchers again, as they are now (one that registered since they
      // were read above, on this coordinator or another, takes them)
      online = await onlineLaunchers(store);
      if (isServed(route, online)) {
        this.#unservedSince.delete(bucket.key);
        this.#unservedChanged = true;
        continue;
      }
      // deliveries are not in it: they wait for their host (however many wait ahead of a job)
      for (const job of await store.readyJobsIn(bucket.key, HISTORY_BATCH)) {
        if (now - Math.max(since, job.readySince ?? now) < timeoutMs) continue;
        await store.transaction(async (tx) => {
          const current = await tx.job(job.id);
          if (current?.status !== 'pending' || current.readySince === null) return;
          // the key holds the session's host id only: name the host as pending_reason does
          const session = route.affinity ? await tx.session(current.sessionName) : undefined;
          const reason = unservedReason(namingHost(route, session), online) ?? 'no online launcher matches';
          await end(this.ctx, tx, current, 'failed', {
            error: `no launcher could take it within ${config.scheduleTimeoutSeconds} s: ${reason}`,
            errorCode: 'no_matching_launcher',
          });
        });
      }
    }
    for (const key of this.#unservedSince.keys()) {
      if (seen.has(key)) continue;
      this.#unservedSince.delete(key);
      this.#unservedChanged = true;
    }
    // written when it changed, not encoded at every sweep to find out
    if (store.keepUnservedSince && this.#unservedChanged) {
      await store.keepUnservedSince(this.#unservedSince);
      this.#unservedChanged = false;
    }
  }

  /**
   * Terminal jobs past JOB_HISTORY_DAYS are deleted, then the sessions left with nothing; each
   * deletion is announced (`job.evicted`, `session.evicted`) in its transaction.
   */
  async #history(now: number): Promise<void> {
    const { store, config } = this.ctx;
    const before = now - config.jobRetentionMs;
    const due = await store.historyDue(before, HISTORY_BATCH);
    if (due.jobs.length + due.sessions.length === 0) return;
    await store.transaction(async (tx) => {
      for (const id of due.jobs) {
        tx.emit('job.evicted', { job: id });
        await tx.deleteJob(id);
      }
      for (const name of due.sessions) {
        if (!(await stillUnused(tx, name, before))) continue;
        tx.emit('session.evicted', { session: name });
        await tx.deleteSession(name);
      }
    });
  }
}

/**
 * `historyDue` chose the session outside this transaction: a resume, a child session, a message
 * or a child's outcome may have committed since (each changes the session's `updatedAt`), and
 * deleting it then would leave that work on a session that no longer exists.
 */
async function stillUnused(tx: Tx, name: string, before: number): Promise<boolean> {
  const s = await tx.session(name);
  if (!s || s.updatedAt > before) return false;
  const root = s.parentName === null ? s : await tx.session(s.rootName);
  if (!holdsNoInput(s, root) || s.deliveryJobId !== null) return false;
  return !(await tx.activeJobOf(name)) && (await tx.pendingJobsOf(name)).length === 0;
}
