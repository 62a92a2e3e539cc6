import type { RegisterLauncherRequest } from '@agentq/protocol';
import { liveLauncher, txLog, type CoreContext } from './context.js';
import { CoordinatorError } from './errors.js';
import { newId } from './ids.js';
import { end, loseClaim } from './jobs.js';
import { launcherIdentity } from './routing.js';
import type { HostBindingRow, LauncherRow } from './rows.js';
import type { Store, Tx } from './store/store.js';

/*
 * Launchers: registration, signs of life, deregistration, and what happens to the jobs of one
 * that leaves or goes silent (claimed jobs go back to the queue; running ones are interrupted).
 */

/** How long a stale launcher stays listed (status `stale`) before it is forgotten. */
/** The launchers whose status is `online`, as the store reads them most cheaply. */
export async function onlineLaunchers(store: Store): Promise<LauncherRow[]> {
  return store.onlineLaunchers ? store.onlineLaunchers() : (await store.listLaunchers()).filter((l) => l.status === 'online');
}

export const STALE_LAUNCHER_KEEP_MS = 60 * 60 * 1000;

/**
 * The token a registration came with, for binding its host identity (authentication on, a
 * `launcher`-role token): `valid` says whether a token name is still in force.
 */
export interface HostBinder {
  readonly tokenName: string;
  valid(tokenName: string): boolean;
}

export async function register(
  ctx: CoreContext,
  tx: Tx,
  req: RegisterLauncherRequest,
  o: { createdBy: string | null; tokenHash: string | null; binder?: HostBinder | undefined },
): Promise<{ row: LauncherRow; replaced: string[] }> {
  const { labels, roots, hostId, executorType } = launcherIdentity(req);
  if (o.binder) {
    // read once for all the identities, and only if one has no binding (registeredBeforeBindings);
    // on the transaction's connection: a registration holds one, and another may never come
    let read: Promise<LauncherRow[]> | undefined;
    const launchers = () => (read ??= tx.launchers());
    for (const identity of hostIdentities(hostId, labels)) await bindHost(ctx, tx, identity, o.binder, launchers);
  }
  const registration: Registration = {
    hostname: req.hostname ?? null,
    projectDir: req.project_dir ?? roots[0] ?? null,
    executorType,
    maxJobs: req.max_jobs ?? null,
    version: req.version ?? null,
    labels,
    roots,
    hostId,
    portable: req.portable_sessions ?? false,
  };
  // keys are per token (a key has no spaces: the field's pattern), as Idempotency-Keys are
  const registrationKey = req.registration_key === undefined ? null : `${o.createdBy ?? '-'} ${req.registration_key}`;
  if (registrationKey !== null) {
    const earlier = await tx.launcherByRegistrationKey(registrationKey);
    if (earlier?.status === 'online') return replay(ctx, tx, earlier, registration, req, o.tokenHash);
    // stale or being deregistered: the registration it made is over; this is a new one
    if (earlier) await tx.updateLauncher(earlier.id, { registrationKey: null });
  }
  let id = newId('lnch_');
  while (await tx.launcher(id)) id = newId('lnch_');
  const row: LauncherRow = {
    id,
    ...registration,
    registeredAt: tx.now,
    lastSeen: tx.now,
    status: 'online',
    staleAt: null,
    createdBy: o.createdBy,
    tokenHash: o.tokenHash,
    registrationKey,
  };
  // PostgreSQL: a retry committed by another coordinator since the lookup above holds the key (a
  // unique index): the insert fails, and the transaction runs again and finds that launcher
  await tx.insertLauncher(row);
  txLog(ctx, tx).info({ launcher_id: id, hostname: row.hostname, labels, roots, created_by: o.createdBy }, 'launcher registered');
  tx.emit('launcher.registered', { launcher: id });
  const replaced = await replacePredecessors(ctx, tx, row, req.replaces ?? []);
  // counted once the launchers it replaces are gone: a launcher restarted on its host takes its
  // predecessor's place, even when every place is taken (refused, the whole registration is undone)
  await makeRoom(ctx, tx);
  return { row, replaced };
}

/**
 * Registrations are bounded (MAX_LAUNCHERS): each launcher is kept in memory and listed whole by
 * `GET /launchers`, and one that stops polling stays listed, stale, for an hour. Without a bound,
 * a script registering in a loop with a launcher token (5,000 launchers with full labels and
 * project roots) took 280 MB and made `GET /launchers` an 84 MB answer that held the event loop,
 * `/health` included, for 16 s; kept up, it would have run the coordinator out of memory. Called
 * with the new launcher counted (and its predecessors gone): past the bound, the launchers stale
 * the longest make room (their polls are refused already: they are only listed, and their jobs were
 * released when they went stale); when every launcher is online or leaving, the registration is
 * refused with 503 `too_many_launchers`. Only counted below the bound, so that a registration does
 * not read every launcher. A soft bound on PostgreSQL: two coordinators may each admit one.
 */
async function makeRoom(ctx: CoreContext, tx: Tx): Promise<void> {
  const { maxLaunchers, heartbeatTimeoutSeconds } = ctx.config;
  let count = await tx.launcherCount();
  if (count <= maxLaunchers) return;
  const stale = (await tx.launchers()).filter((l) => l.status === 'stale').sort((a, b) => (a.staleAt ?? 0) - (b.staleAt ?? 0));
  for (const l of stale) {
    if (count <= maxLaunchers) break;
    // as the sweeper forgets one: locked, and still stale (PostgreSQL: another may have just done it)
    if ((await tx.launcher(l.id))?.status !== 'stale') continue;
    await tx.deleteLauncher(l.id);
    tx.emit('launcher.removed', { launcher: l.id });
    txLog(ctx, tx).info({ launcher_id: l.id, max_launchers: maxLaunchers }, 'stale launcher forgotten to make room for a registration (MAX_LAUNCHERS)');
    count--;
  }
  if (count > maxLaunchers) {
    throw new CoordinatorError(
      'too_many_launchers',
      `${maxLaunchers} launchers are registered (MAX_LAUNCHERS) and none of them is stale; retry later`,
      { max_launchers: maxLaunchers, retry_after_seconds: Math.max(1, Math.ceil(heartbeatTimeoutSeconds)) },
    );
  }
}

/** What a registration says about the launcher: the fields a retry of it must send again. */
type Registration = Pick<
  LauncherRow,
  'hostname' | 'projectDir' | 'executorType' | 'maxJobs' | 'version' | 'labels' | 'roots' | 'hostId' | 'portable'
>;

/**
 * A registration sent again with the `registration_key` of an online launcher (its first answer
 * was lost: a timeout, a reset connection, a 503 of a proxy): answered with that launcher, as the
 * first try was, rather than with a second launcher whose twin would never poll. The same key
 * with other fields is another registration: refused, as an Idempotency-Key reused for another body.
 */
async function replay(
  ctx: CoreContext,
  tx: Tx,
  earlier: LauncherRow,
  registration: Registration,
  req: RegisterLauncherRequest,
  tokenHash: string | null,
): Promise<{ row: LauncherRow; replaced: string[] }> {
  const differs = (Object.keys(registration) as Array<keyof Registration>).filter(
    (f) => canonical(registration[f]) !== canonical(earlier[f]),
  );
  if (differs.length > 0) {
    throw new CoordinatorError(
      'registration_key_reused',
      `this registration_key registered launcher ${earlier.id} with other fields (${differs.join(', ')}): a retry must send the same registration; a new registration needs a new key`,
      { registration_key: req.registration_key, launcher_id: earlier.id },
    );
  }
  // the retry is a sign of life: the staleness clock starts again from it, not from the first try.
  // Its answer carries a new credential (the first one's secret is not kept), added to those of the
  // earlier answers rather than replacing them: which answer reached the launcher is unknown here.
  // A copy of the registration held up on its way (a proxy retrying upstream, a coordinator
  // waiting for a database connection) may run after the retry the launcher was answered, and
  // would otherwise revoke the credential it holds (401, a new registration, the ghost this
  // key is for)
  const credentials = tokenHash === null ? {} : { tokenHash: addCredential(earlier.tokenHash, tokenHash) };
  const row = await tx.updateLauncher(earlier.id, { lastSeen: tx.now, ...credentials });
  txLog(ctx, tx).info({ launcher_id: row.id, hostname: row.hostname }, 'launcher registration sent again (registration_key): answered with the same launcher');
  // those of `replaces` the first try removed are gone: nothing more is replaced (as without a key)
  return { row, replaced: await replacePredecessors(ctx, tx, row, req.replaces ?? []) };
}

/** How many credentials of answers to one registration stay in force (the newest). */
export const REGISTRATION_CREDENTIALS_KEPT = 8;

/** `LauncherRow.tokenHash` with one more credential's hash, newest first (a few at most). */
function addCredential(held: string | null, hash: string): string {
  const hashes = held === null ? [] : held.split(' ').filter((h) => h !== hash);
  return [hash, ...hashes].slice(0, REGISTRATION_CREDENTIALS_KEPT).join(' ');
}

/** A field's value for comparing (labels by name, whatever order they were sent in). */
function canonical(v: unknown): string {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) return JSON.stringify(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1)));
  return JSON.stringify(v);
}

/**
 * What a registration claims to be, each bound to a token: its host identity (`host_id`, or
 * `hostname:NAME` for a launcher that sends none) and its host name, the `hostname` label, as
 * `hostname:NAME` too. The name counts on its own: jobs are routed to a host by it
 * (`requires: {hostname: …}`), and a launcher sending its own `host_id` with another host's name
 * would otherwise be handed them.
 */
function hostIdentities(hostId: string | null, labels: Readonly<Record<string, string>>): string[] {
  const ids = new Set<string>();
  if (hostId !== null) ids.add(hostId);
  if (labels.hostname !== undefined) ids.add(`hostname:${labels.hostname}`);
  return [...ids];
}

/**
 * A host identity is bound to the first token that registers a launcher with it: a holder of
 * another launcher token cannot register as that host, and so be handed its sessions' resumes and
 * the jobs routed to it. The binding moves to another token once its token is revoked (no longer
 * in the token file); rotating a token's secret under the same name keeps it.
 */
async function bindHost(ctx: CoreContext, tx: Tx, hostId: string, binder: HostBinder, launchers: () => Promise<LauncherRow[]>): Promise<void> {
  const bound = (await tx.hostBinding(hostId)) ?? registeredBeforeBindings(await launchers(), hostId, binder);
  if (bound?.tokenName === binder.tokenName) return;
  if (bound && binder.valid(bound.tokenName)) {
    txLog(ctx, tx).warn({ host_id: hostId, token_name: binder.tokenName, bound_to: bound.tokenName }, 'launcher refused: its host is bound to another token');
    const what = hostId.startsWith('hostname:') ? `the host name ${hostId.slice('hostname:'.length)}` : `host_id ${hostId}`;
    throw new CoordinatorError(
      'host_bound',
      `${what} is bound to the token ${bound.tokenName}, which registered it first: register this host's launchers with that token, or revoke it (remove it from AUTH_TOKENS_FILE and send SIGHUP) to bind the host to another`,
      { host_id: hostId, bound_to: bound.tokenName },
    );
  }
  if (bound) txLog(ctx, tx).info({ host_id: hostId, token_name: binder.tokenName, bound_to: bound.tokenName }, 'host bound to another token: its token was revoked');
  await tx.putHostBinding({ hostId, tokenName: binder.tokenName, boundAt: tx.now });
}

/**
 * A host that no binding names may still have a launcher, registered with a launcher token in
 * force, from before bindings were kept (a database of SQLite schema 6 or PostgreSQL schema 2 and
 * earlier: the upgrade makes the table empty, and launchers keep their credentials across it, so
 * they never register again). That token registered the host first: without this, any other
 * launcher token could bind a host that is serving, and be handed its sessions' resumes.
 */
function registeredBeforeBindings(launchers: readonly LauncherRow[], hostId: string, binder: HostBinder): HostBindingRow | undefined {
  for (const l of launchers) {
    const by = l.createdBy;
    if (by === null || by === binder.tokenName || !binder.valid(by)) continue;
    if (hostIdentities(l.hostId, l.labels).includes(hostId)) return { hostId, tokenName: by, boundAt: l.registeredAt };
  }
  return undefined;
}

/**
 * A launcher restarted on its host names the launchers of its earlier lives (`replaces`): they
 * are gone, and so are their executors (the lifeline ended them), so their jobs are released now
 * rather than at the heartbeat timeout. Only a launcher of the same host identity registered with
 * the same token can be replaced; others named are left alone (logged), as are unknown ids
 * (already forgotten).
 */
async function replacePredecessors(ctx: CoreContext, tx: Tx, row: LauncherRow, ids: readonly string[]): Promise<string[]> {
  const replaced: string[] = [];
  for (const id of new Set(ids)) {
    const old = await tx.launcher(id);
    if (!old || old.id === row.id) continue;
    if (old.hostId === null || old.hostId !== row.hostId || old.createdBy !== row.createdBy) {
      txLog(ctx, tx).warn(
        { launcher_id: row.id, replaces: old.id },
        'not replacing a launcher of another host or registered with another token',
      );
      continue;
    }
    await removeLauncher(ctx, tx, old, `it was replaced by ${row.id}, restarted on the same host`);
    replaced.push(old.id);
  }
  return replaced;
}

/**
 * Heartbeat: the jobs the launcher must stop. Those of its jobs that are stopping (a safety net
 * for a lost poll answer), and those it says it runs (`running`) that are not its jobs any more:
 * ended while it was out of touch (interrupted when it went stale, timed out), given back to the
 * queue or to another launcher, or deleted. Their next report would be refused and end them, but
 * an executor that prints nothing reports nothing, and would go on working on its session while
 * another turn of that session runs.
 */
export async function heartbeatStops(tx: Tx, launcherId: string, running: readonly string[] = []): Promise<string[]> {
  await liveLauncher(tx, launcherId);
  const active = await tx.activeJobsOfLauncher(launcherId);
  const stops = new Set(active.filter((j) => j.status === 'stopping').map((j) => j.id));
  const held = new Set(active.map((j) => j.id));
  for (const id of running) if (!held.has(id)) stops.add(id);
  return [...stops];
}

/**
 * External removal (`self` false): the launcher is told on its current or next poll, may finish
 * and report its running jobs, and is forgotten once it holds none. `self` true (a launcher
 * leaving), or a stale one: gone at once; jobs it still holds are released.
 */
export async function deleteLauncher(
  ctx: CoreContext,
  tx: Tx,
  launcherId: string,
  self: boolean,
): Promise<'deregistering' | 'removed'> {
  const launcher = await tx.launcher(launcherId);
  if (!launcher) {
    throw new CoordinatorError('launcher_not_found', `launcher ${launcherId} not found`, { launcher_id: launcherId });
  }
  if (self || launcher.status === 'stale') {
    await removeLauncher(ctx, tx, launcher, self ? 'it deregistered itself' : 'it was removed');
    return 'removed';
  }
  if (launcher.status === 'deregistering') return 'deregistering';
  await tx.updateLauncher(launcher.id, { status: 'deregistering' });
  txLog(ctx, tx).info({ launcher_id: launcher.id }, 'launcher marked for deregistration');
  tx.emit('launcher.deregistering', { launcher: launcher.id });
  return 'deregistering';
}

/** A deregistration notice reached the launcher: it is forgotten once it holds no job. */
export async function deregistrationDelivered(ctx: CoreContext, tx: Tx, launcherId: string): Promise<void> {
  const launcher = await tx.launcher(launcherId);
  if (launcher?.status !== 'deregistering') return;
  if ((await tx.activeJobsOfLauncher(launcherId)).length === 0) await removeLauncher(ctx, tx, launcher, 'it was deregistered');
}

export async function removeLauncher(ctx: CoreContext, tx: Tx, launcher: LauncherRow, why: string): Promise<void> {
  // its parked polls are answered `deregistered` after the commit: they are not handed the
  // jobs it is about to release, since a deleted launcher cannot claim
  await tx.deleteLauncher(launcher.id);
  tx.emit('launcher.removed', { launcher: launcher.id });
  await releaseJobs(
    ctx,
    tx,
    launcher,
    `launcher ${launcher.id} left while the job was running (${why})`,
    // a claimed job was not running: this is the error of one that fails claim_attempts_exhausted
    `launcher ${launcher.id} left before it started the job (${why})`,
  );
  txLog(ctx, tx).info({ launcher_id: launcher.id }, `launcher removed: ${why}`);
}

/** No heartbeat or poll for too long: release its jobs; it must register again. */
export async function loseLauncher(ctx: CoreContext, tx: Tx, launcher: LauncherRow): Promise<void> {
  const silent = Math.round((tx.now - launcher.lastSeen) / 1000);
  // lastSeen is kept in memory only while it changes: written now, it survives a restart
  await tx.updateLauncher(launcher.id, { status: 'stale', staleAt: tx.now, lastSeen: launcher.lastSeen });
  txLog(ctx, tx).warn({ launcher_id: launcher.id, silent_seconds: silent }, 'launcher stale');
  await releaseJobs(ctx, tx, launcher, `launcher ${launcher.id} lost: no heartbeat or poll for ${silent} s`);
  tx.emit('launcher.stale', { launcher: launcher.id });
}

/** Claimed-not-started jobs go back to the queue (oldest first); running ones end as interrupted. */
export async function releaseJobs(ctx: CoreContext, tx: Tx, launcher: LauncherRow, why: string, claimedWhy = why): Promise<void> {
  for (const job of await tx.activeJobsOfLauncher(launcher.id)) {
    if (job.status === 'claimed') await loseClaim(ctx, tx, job, claimedWhy);
    else await end(ctx, tx, job, 'interrupted', { error: why, errorCode: 'launcher_lost' });
  }
}
