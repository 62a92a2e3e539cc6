import type { Launcher, LauncherList } from '@agentq/protocol';
import type { Api } from './api.js';

/** Launchers per page read (the coordinator takes up to 1,000): 500 typical ones are about 400 KB. */
export const LAUNCHERS_PAGE = 500;

/**
 * Every launcher, in registration order, read a page at a time following `next_cursor`: in one
 * answer the whole registry (up to MAX_LAUNCHERS, 10,000, with their labels) is several MB. A
 * coordinator older than paging answers them all at once, without `next_cursor`.
 */
export async function readAllLaunchers(api: Api, signal?: AbortSignal, pageSize = LAUNCHERS_PAGE): Promise<Launcher[]> {
  const out: Launcher[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: LauncherList = await api.get<LauncherList>('/launchers', { limit: pageSize, cursor }, signal);
    out.push(...page.launchers);
    const next = page.next_cursor ?? null;
    // a cursor that does not move would read the same page for ever
    if (next === null || next === cursor) return out;
    cursor = next;
  }
}
