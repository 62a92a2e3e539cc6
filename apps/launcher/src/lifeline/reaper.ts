#!/usr/bin/env node
import { readFileSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { endGroups, type Group } from './proc.js';

/**
 * The lifeline's far end: a small process the launcher starts once, in its own process group, with
 * a pipe to its stdin. The launcher writes one JSON line per executor process group it starts
 * (`{"watch":{"pgid":..,"start_time":..}}`) and ends (`{"forget":pgid}`). When the pipe closes,
 * the launcher is gone, however it died (SIGKILL included): the reaper ends every group still
 * watched (SIGTERM, then SIGKILL after the grace period in argv[2]), settles the launcher's
 * record (argv[3]: see settleRecord) and exits.
 *
 * It ignores SIGINT, SIGTERM and SIGHUP: a service manager's stop signal reaches every process of
 * the service, and the launcher is then draining its jobs on purpose; the reaper must only act
 * when the launcher itself is gone.
 */
const graceMs = Number(process.argv[2] ?? 10_000);
const recordPath = process.argv[3];
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => {});

const watched = new Map<number, Group>();
const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on('line', (line) => {
  let msg: { watch?: Group; forget?: number };
  try {
    msg = JSON.parse(line) as typeof msg;
  } catch {
    return;
  }
  if (msg.watch && Number.isInteger(msg.watch.pgid)) watched.set(msg.watch.pgid, msg.watch);
  if (typeof msg.forget === 'number') watched.delete(msg.forget);
});
lines.once('close', () => {
  void endGroups([...watched.values()], Number.isFinite(graceMs) ? graceMs : 10_000).finally(() => {
    if (recordPath) settleRecord(recordPath);
    process.exit(0);
  });
});

/**
 * The launcher died and its groups are ended. A record that names who the launcher was (its
 * launcher ids) is left for the next launcher to tell the coordinator (`replaces`); the groups
 * it lists are gone, and a later launcher signals a group only while it is still the one
 * recorded (its leader's start time). It is left as it is, not rewritten: the reaper makes no
 * new file in a state directory someone may be deleting. A record naming no launcher is
 * deleted; one already gone (the launcher deleted it as it ended cleanly) stays gone.
 */
function settleRecord(path: string): void {
  try {
    const record = JSON.parse(readFileSync(path, 'utf8')) as { launcher_ids?: unknown; predecessors?: unknown };
    const named = (list: unknown) => Array.isArray(list) && list.length > 0;
    if (!named(record.launcher_ids) && !named(record.predecessors)) rmSync(path, { force: true });
  } catch {
    // unreadable or gone: nothing of it is left to keep
  }
}
