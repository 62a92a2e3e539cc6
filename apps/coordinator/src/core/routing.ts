import { posix } from 'node:path';
import type { Labels, RegisterLauncherRequest } from '@agentq/protocol';
import type { Affinity, JobRow, LauncherRow, SessionRow } from './rows.js';

/*
 * Routing: which launchers may take a job. A ready job has a route made of
 *   - `requires`: labels the launcher must all have (the job's own `requires`);
 *   - `dir`: the directory it runs in, which must be inside one of the launcher's project roots
 *     (null: the launcher's default directory, any launcher);
 *   - `affinity`: once a session has run, the host (and executor type) it lives on; for a
 *     portable session, the executor type only.
 * Jobs with equal routes share a bucket of the ready queue (routeKey), so a poll looks at the
 * buckets its launcher serves, never at every pending job. See docs/routing.md.
 */
export interface Route {
  readonly requires: Labels | null;
  readonly dir: string | null;
  readonly affinity: Affinity | null;
}

/** Lexical normalisation: `..` resolved, no trailing slash (the launcher resolves symlinks). */
export function normalizeDir(dir: string): string {
  const n = posix.normalize(dir);
  return n.length > 1 && n.endsWith('/') ? n.slice(0, -1) : n;
}

export function isInside(dir: string, root: string): boolean {
  if (root === '/') return dir.startsWith('/');
  return dir === root || dir.startsWith(`${root}/`);
}

/** The route of a job about to be offered, given its session (affinity comes from there). */
export function routeOf(job: JobRow, session: SessionRow): Route {
  const requires = job.requires && Object.keys(job.requires).length > 0 ? job.requires : null;
  // a session bound to a host runs in its directory there; a portable one where its job says
  const a = session.affinity;
  const dir = a && a.hostId !== null ? a.workingDir : job.projectDir === null ? null : normalizeDir(job.projectDir);
  return { requires, dir, affinity: a };
}

/** The key of the route of a job any launcher may take (no requires, no directory, no affinity). */
export const ANY_ROUTE_KEY = '[[],null,null]';

/**
 * A stable key for a route: equal routes, equal keys. The route of a job any launcher may take,
 * most jobs', has one key, a constant (not made again for each job offered).
 */
export function routeKey(route: Route): string {
  if (route.requires === null && route.dir === null && route.affinity === null) return ANY_ROUTE_KEY;
  return encodeRoute(route);
}

/** routeKey's encoding of every route (the constant above is its value for the open route). */
export function encodeRoute(route: Route): string {
  const req = route.requires
    ? Object.keys(route.requires)
        .sort()
        .map((k) => [k, route.requires![k]])
    : [];
  const a = route.affinity;
  return JSON.stringify([req, route.dir, a ? [a.hostId, a.executorType] : null]);
}

/** The route a key stands for (what matching needs; the affinity's hostname is not in it). */
export function routeFromKey(key: string): Route {
  const [req, dir, a] = JSON.parse(key) as [[string, string][], string | null, [string | null, string | null] | null];
  return {
    requires: req.length ? Object.fromEntries(req) : null,
    dir,
    affinity: a ? { hostId: a[0], executorType: a[1], workingDir: dir, hostname: null } : null,
  };
}

/**
 * `route` with its affinity's hostname read from `session` (a route key holds the host id only):
 * what unservedReason names the host by.
 */
export function namingHost(route: Route, session: SessionRow | undefined): Route {
  if (!route.affinity) return route;
  return { ...route, affinity: { ...route.affinity, hostname: session?.affinity?.hostname ?? null } };
}

/** Whether `launcher` may take jobs of `route` (it must also be online: the caller checks). */
export function serves(launcher: LauncherRow, route: Route): boolean {
  if (route.requires) {
    for (const [k, v] of Object.entries(route.requires)) if (launcher.labels[k] !== v) return false;
  }
  if (route.affinity) {
    if (route.affinity.hostId !== null && launcher.hostId !== route.affinity.hostId) return false;
    if (route.affinity.executorType !== null && launcher.executorType !== route.affinity.executorType) return false;
  }
  if (route.dir !== null && !servesDir(launcher, route.dir)) return false;
  return true;
}

/**
 * Whether a launcher serves `dir`: inside one of its roots; a relative directory is taken from
 * its first root, so any launcher with a root serves it unless it climbs out (`../x`).
 */
function servesDir(launcher: LauncherRow, dir: string): boolean {
  if (!dir.startsWith('/')) return launcher.roots.length > 0 && dir !== '..' && !dir.startsWith('../');
  return launcher.roots.some((root) => isInside(dir, root));
}

/** Whether some launcher in `online` serves `route`: its jobs wait for a free slot, not for a launcher. */
export function isServed(route: Route, online: readonly LauncherRow[]): boolean {
  return online.some((l) => serves(l, route));
}

/**
 * Why no launcher in `online` serves `route`, or null when one does. Each part of the route is
 * checked against the launchers that pass the parts before it (the session's host and executor,
 * then the labels, then the directory), so the reason names what those launchers lack: a label
 * that only launchers of another host have, or a root that only launchers without the labels
 * have, is still missing.
 */
export function unservedReason(route: Route, online: readonly LauncherRow[]): string | null {
  if (isServed(route, online)) return null;
  if (online.length === 0) return 'no launcher is online';
  let pool = online;
  let lacking = (what: string) => `no online launcher ${what}`;
  const a = route.affinity;
  if (a && a.hostId === null) {
    pool = online.filter((l) => l.executorType === a.executorType);
    if (pool.length === 0) return `session runs on ${a.executorType} launchers, and none is online`;
    lacking = (what) => `session runs on ${a.executorType} launchers, and none online ${what}`;
  } else if (a) {
    const onHost = online.filter((l) => l.hostId === a.hostId);
    const host = a.hostname ?? a.hostId;
    if (onHost.length === 0) {
      // a launcher restarted without its state directory (a new container, another --state-dir)
      // has its old name but a new host identity: say so, or the host looks online
      if (a.hostname !== null && online.some((l) => l.hostname === a.hostname)) {
        return `session lives on host ${host} (host_id ${a.hostId}), which is offline; the online launcher named ${host} is another host (another host-id in its state directory)`;
      }
      return `session lives on host ${host}, which is offline`;
    }
    const sameExecutor = onHost.filter((l) => a.executorType === null || l.executorType === a.executorType);
    if (sameExecutor.length === 0) return `session lives on host ${host}, which has no online ${a.executorType} launcher`;
    pool = a.workingDir === null ? sameExecutor : sameExecutor.filter((l) => servesDir(l, a.workingDir!));
    if (pool.length === 0) return `session lives in ${a.workingDir} on host ${host}, which no online launcher there serves`;
    lacking = (what) => `session lives on host ${host}, where no online launcher ${what}`;
  }
  // the launchers left, as the directory's reason names them
  let which = '';
  if (route.requires) {
    const required = Object.entries(route.requires);
    for (const [k, v] of required) {
      if (!pool.some((l) => l.labels[k] === v)) return lacking(`has ${k}=${v}`);
    }
    const all = required.map(([k, v]) => `${k}=${v}`).join(', ');
    pool = pool.filter((l) => required.every(([k, v]) => l.labels[k] === v));
    if (pool.length === 0) return lacking(`has all of ${all}`);
    which = `with ${all} `;
  }
  if (route.dir !== null && !pool.some((l) => servesDir(l, route.dir!))) return lacking(`${which}serves ${route.dir}`);
  return 'no online launcher matches';
}

/** A launcher's effective labels, roots and host identity, from what it registered with. */
export function launcherIdentity(req: RegisterLauncherRequest): {
  labels: Labels;
  roots: string[];
  hostId: string | null;
  executorType: string | null;
} {
  const labels: Record<string, string> = { ...(req.labels ?? {}) };
  // the original launcher's fields count as labels: one that sends only them still matches `requires`
  if (req.hostname && labels.hostname === undefined) labels.hostname = req.hostname;
  const executorType = req.executor_type ?? labels.executor ?? null;
  if (executorType && labels.executor === undefined) labels.executor = executorType;
  const rawRoots = req.project_roots ?? (req.project_dir ? [req.project_dir] : []);
  const roots = [...new Set(rawRoots.map(normalizeDir))];
  const hostId = req.host_id ?? (req.hostname ? `hostname:${req.hostname}` : null);
  return { labels, roots, hostId, executorType };
}
