import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Launcher } from '@agentq/protocol';
import { applyLauncherEvents, isFresherLauncher, type LauncherEvent } from '../web/lib/launchers.js';

// The launchers a page has, without a browser: which launcher event changes which launcher.

const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
function launcher(id: string, heartbeat: number, status: Launcher['status'] = 'online'): Launcher {
  return {
    launcher_id: id,
    hostname: id,
    project_dir: null,
    executor_type: 'test',
    max_jobs: null,
    version: null,
    registered_at: at(0),
    last_heartbeat: at(heartbeat),
    seconds_since_heartbeat: 0,
    status,
    active_jobs: [],
    labels: {},
    project_roots: [],
    host_id: null,
    portable_sessions: false,
    created_by: null,
  };
}
let seq = 0;
const event = (type: LauncherEvent['type'], l: Launcher): LauncherEvent => ({ id: ++seq, type, at: at(seq), launcher: l });
const statuses = (list: Launcher[]) => list.map((l) => `${l.launcher_id} ${l.status} ${l.last_heartbeat.slice(17, 19)}`);

test('a launcher being deregistered that goes silent shows stale (the same heartbeat, a later status)', () => {
  // DELETE /launchers/{id} of a launcher that no longer polls, then the heartbeat timeout: the
  // coordinator's stale event carries the heartbeat of the deregistering one
  const deregistering = launcher('l1', 5, 'deregistering');
  const stale = launcher('l1', 5, 'stale');
  assert.equal(isFresherLauncher(stale, deregistering), true);
  assert.equal(isFresherLauncher(deregistering, stale), false, 'a stale launcher never changes again');
  assert.deepEqual(statuses(applyLauncherEvents([launcher('l1', 5)], [event('launcher.deregistering', deregistering), event('launcher.stale', stale)], (l) => l)), ['l1 stale 05']);
  // an answer read after it went stale, with the deregistering event replayed on it
  assert.deepEqual(statuses(applyLauncherEvents([stale], [event('launcher.deregistering', deregistering)], (l) => l)), ['l1 stale 05']);
});

test('a version of a launcher replaces the page\'s only when newer: a later heartbeat, or a later status at the same one', () => {
  const read = launcher('l1', 9); // read after heartbeats the events do not carry
  assert.deepEqual(statuses(applyLauncherEvents([read], [event('launcher.registered', launcher('l1', 1))], (l) => l)), ['l1 online 09']);
  assert.deepEqual(statuses(applyLauncherEvents([read], [event('launcher.deregistering', launcher('l1', 9, 'deregistering'))], (l) => l)), ['l1 deregistering 09']);
  // a deregistering launcher still polls (it may finish its jobs): a list read since is newer
  assert.deepEqual(statuses(applyLauncherEvents([launcher('l1', 12, 'deregistering')], [event('launcher.deregistering', launcher('l1', 9, 'deregistering'))], (l) => l)), ['l1 deregistering 12']);
  assert.deepEqual(statuses(applyLauncherEvents([read], [event('launcher.stale', launcher('l1', 9, 'stale'))], (l) => l)), ['l1 stale 09']);
});

test('a removed launcher leaves whatever the version the page has, and one that registers is put last', () => {
  const list = [launcher('l1', 9, 'stale'), launcher('l2', 3)];
  const out = applyLauncherEvents(list, [event('launcher.removed', launcher('l1', 1, 'stale')), event('launcher.registered', launcher('l3', 4))], (l) => l);
  assert.deepEqual(statuses(out), ['l2 online 03', 'l3 online 04']);
  assert.deepEqual(statuses(list), ['l1 stale 09', 'l2 online 03'], 'the list given is not changed');
});
