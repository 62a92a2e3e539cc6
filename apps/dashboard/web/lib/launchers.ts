import type { Launcher, LauncherList, LifecycleEvent } from '@agentq/protocol';
import type { Api } from './api.js';
import { READ_TIMEOUT_MS, withTimeout } from './timeout.js';

/** Launchers per page read (the coordinator takes up to 1,000): 500 typical ones are about 400 KB. */
export const LAUNCHERS_PAGE = 500;

/** How long the jobs view waits for a page of launchers (its launcher column and filter) before reading again. */
export const LAUNCHERS_READ_TIMEOUT_MS = READ_TIMEOUT_MS;

/**
 * Every launcher, in registration order, read a page at a time following `next_cursor`: in one
 * answer the whole registry (up to MAX_LAUNCHERS, 10,000, with their labels) is several MB. A
 * coordinator older than paging answers them all at once, without `next_cursor`. With
 * `pageTimeoutMs`, a page that has not come by then is given up: ReadTimeout.
 */
export async function readAllLaunchers(
  api: Api,
  signal?: AbortSignal,
  options: { pageSize?: number; pageTimeoutMs?: number } = {},
): Promise<Launcher[]> {
  const { pageSize = LAUNCHERS_PAGE, pageTimeoutMs } = options;
  const out: Launcher[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: LauncherList = await withTimeout(pageTimeoutMs, signal, `GET /launchers`, (s) =>
      api.get<LauncherList>('/launchers', { limit: pageSize, cursor }, s),
    );
    out.push(...page.launchers);
    const next = page.next_cursor ?? null;
    // a cursor that does not move would read the same page for ever
    if (next === null || next === cursor) return out;
    cursor = next;
  }
}

/** A launcher event: one registers or changes (`launcher.*`), or goes (`launcher.removed`). */
export type LauncherEvent = Extract<LifecycleEvent, { launcher: unknown }>;

/**
 * The order a launcher's status moves in (apps/coordinator/src/core/launchers.ts): online, then
 * deregistering (DELETE /launchers/{id}) or stale (silent for the heartbeat timeout); one being
 * deregistered that goes silent becomes stale too, and a stale one never changes again (it is
 * removed, or registers again under a new id).
 */
const STATUS_ORDER: Record<Launcher['status'], number> = { online: 0, deregistering: 1, stale: 2 };

/**
 * Whether `incoming` is newer than `known`, a version of the same launcher. Heartbeats and polls
 * change a launcher without an event (its `last_heartbeat`; its running jobs change with job
 * events), so a version from the event stream, the replayed window above all, may be older than
 * a list read since: put back, it would show the registration's heartbeat age and running jobs.
 * The later heartbeat is the newer version; at the same heartbeat the status only moves on
 * (STATUS_ORDER, each step with its event).
 */
export function isFresherLauncher(incoming: Launcher, known: Launcher): boolean {
  if (incoming.last_heartbeat !== known.last_heartbeat) return incoming.last_heartbeat > known.last_heartbeat;
  return STATUS_ORDER[incoming.status] > STATUS_ORDER[known.status];
}

/**
 * The list after the events: a launcher that registers is put last, one that changes is replaced
 * by its newer version, a removed one leaves (for good: a launcher id is never registered again).
 */
export function applyLauncherEvents<L extends Launcher>(list: L[], events: readonly LauncherEvent[], version: (l: Launcher) => L): L[] {
  let out = list;
  for (const e of events) {
    const i = out.findIndex((l) => l.launcher_id === e.launcher.launcher_id);
    if (e.type === 'launcher.removed') {
      if (i >= 0) out = out.filter((_, j) => j !== i);
    } else if (i < 0) {
      out = [...out, version(e.launcher)];
    } else if (isFresherLauncher(e.launcher, out[i]!)) {
      out = out.map((l, j) => (j === i ? version(e.launcher) : l));
    }
  }
  return out;
}
