import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type DeleteLauncherResponse,
  type Health,
  type Launcher,
  type LauncherList,
  type ListLaunchersQuery,
} from '@agentq/protocol';
import { renderLaunchers } from '../src/index.js';
import { cli, coordinator, deadUrl, envelope, recordCalls } from './helpers.js';

describe('agentq launchers', () => {
  it('shows labels (beyond host and executor) and project roots', () => {
    const at = new Date().toISOString();
    const launcher: Launcher = {
      version: '0.1.0',
      registered_at: at,
      last_heartbeat: at,
      host_id: null,
      portable_sessions: false,
      created_by: null,
      launcher_id: 'lnch_0123456789ab',
      status: 'online',
      hostname: 'gpu-box',
      executor_type: 'claude-code',
      max_jobs: 4,
      active_jobs: ['job_0123456789ab'],
      seconds_since_heartbeat: 3,
      labels: { hostname: 'gpu-box', executor: 'claude-code', gpu: 'a100', zone: 'eu' },
      project_roots: ['/srv/app', '/srv/lib'],
      project_dir: '/srv/app',
    };
    const legacy = {
      ...launcher,
      launcher_id: 'lnch_0123456789ac',
      labels: {},
      project_roots: [],
      project_dir: '/home/me',
    };
    const text = renderLaunchers({ launchers: [launcher, legacy] });
    const [header, first, second] = text.split('\n');
    assert.match(header as string, /^LAUNCHER +STATUS +HOST +EXECUTOR +JOBS +HEARTBEAT +LABELS +ROOTS$/);
    assert.match(
      first as string,
      /^lnch_0123456789ab {2}online +gpu-box +claude-code +1\/4 +3s ago +gpu=a100 zone=eu {2}\/srv\/app,\/srv\/lib$/,
    );
    // a launcher that registered only a project_dir: that is its root
    assert.match(second as string, /^lnch_0123456789ac .* - +\/home\/me$/);
  });

  it('rm deregisters a launcher (deregistering, told on its next poll); an unknown id is exit 5', async (t) => {
    const c = await coordinator(t);
    const id = await c.launcher.id();
    const r = await cli(c.url, ['launchers', 'rm', id, '--json']);
    assert.equal(r.code, 0, r.stdout);
    const data = envelope<{ ok: true; data: DeleteLauncherResponse }>(r, CliEnvelope(CliCommandData.launchers_rm)).data;
    assert.deepEqual([data.launcher_id, data.outcome], [id, 'deregistering']);
    assert.deepEqual(await c.client.poll(id, { holdSeconds: 1 }), { deregistered: true });

    const text = await cli(c.url, ['launchers', 'rm', 'lnch_0123456789ab']);
    assert.equal(text.code, 5);
    assert.match(text.stderr, /^agentq: launcher lnch_0123456789ab not found \(launcher_not_found\)$/m);
  });

  // GET /launchers is paged (500 a page here): the table is the whole registry, read a page at a time
  it('lists every launcher, in registration order, reading the list a page at a time', async (t) => {
    const c = await coordinator(t);
    const ids: string[] = [];
    for (let i = 0; i < 501; i++) ids.push((await c.client.register({ hostname: `host-${i}` })).launcher_id);
    const queries = recordCalls(c.core, 'listLaunchers') as ListLaunchersQuery[];
    const r = await cli(c.url, ['launchers', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const data = envelope<{ ok: true; data: LauncherList }>(r, CliEnvelope(CliCommandData.launchers)).data;
    assert.equal(data.next_cursor, null);
    const listed = data.launchers.map((l) => l.launcher_id);
    assert.equal(new Set(listed).size, 501, 'none twice');
    assert.deepEqual([...listed].sort(), [...ids].sort(), 'none left out');
    assert.deepEqual(data.launchers.map((l) => l.registered_at), data.launchers.map((l) => l.registered_at).sort(), 'registration order');
    assert.deepEqual(
      queries.map((q) => [q.limit, q.cursor !== undefined]),
      [
        [500, false],
        [500, true],
      ],
      'two pages of at most 500, the second from the first one\'s cursor',
    );
  });

  it('a misspelt subcommand is an excess argument, listing stays as it was', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['launchers', 'remove', 'x', '--json']);
    assert.equal(r.code, 2);
    assert.match(envelope<Failure>(r, CliFailure).error.message, /too many arguments for 'launchers'/);
  });
});

describe('agentq health', () => {
  it('answers the coordinator health, exit 0; exit 1 when nothing answers', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const r = await cli(c.url, ['health', '--json']);
    assert.equal(r.code, 0);
    const h = envelope<{ ok: true; data: Health }>(r, CliEnvelope(CliCommandData.health)).data;
    assert.equal(h.status, 'ok');
    assert.equal(h.queue_depth, 1);

    const text = await cli(c.url, ['health']);
    assert.match(text.stdout, new RegExp(`^${c.url} {2}ok, up \\d+`));
    assert.match(text.stdout, /^ {2}queue +1 pending$/m);
    assert.match(text.stdout, /^ {2}launchers +0 online, 0 stale, 0 waiting for work$/m);

    const down = await cli(await deadUrl(), ['health']);
    assert.equal(down.code, 1);
    assert.match(down.stderr, /\(coordinator_unreachable\)\nis the coordinator running\?/);
  });
});
