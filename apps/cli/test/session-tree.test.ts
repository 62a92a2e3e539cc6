import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type CliSessionTree,
  type Session,
  type SessionList,
  type StopSessionResponse,
} from '@agentq/protocol';
import { renderSessions, renderSessionTree } from '../src/index.js';
import { cli, coordinator, envelope, type TestCoordinator } from './helpers.js';

/** boss (completed its first job) → kid (completed) → a callback resume of boss, pending. */
async function parentAndChild(c: TestCoordinator) {
  const bossJob = await c.client.createJob({
    type: 'start_session',
    session_name: 'boss',
    prompt: 'delegate',
    agent_name: 'lead',
  });
  await c.launcher.claimAndStart();
  await c.launcher.complete(bossJob.job_id, 'delegated');
  const kidJob = await c.client.createJob({
    type: 'start_session',
    session_name: 'kid',
    prompt: 'do it',
    parent_session_name: 'boss',
  });
  await c.launcher.claimAndStart();
  await c.launcher.complete(kidJob.job_id, 'did it');
  const callback = (await c.client.listJobs({ session_name: 'boss' })).jobs.find((j) => j.callback_of !== null);
  assert.ok(callback, 'the coordinator created a callback resume for boss');
  return { bossJob, kidJob, callback };
}

const zero = { input_tokens: 0, output_tokens: 0, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };

describe('agentq sessions <name>: the tree', () => {
  it('shows the session, its jobs with callbacks marked, and its children with theirs', async (t) => {
    const c = await coordinator(t);
    const { bossJob, kidJob, callback } = await parentAndChild(c);

    const r = await cli(c.url, ['sessions', 'boss', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const tree = envelope<{ ok: true; data: CliSessionTree }>(r, CliEnvelope(CliCommandData.session_tree)).data;
    assert.equal(tree.session.session_name, 'boss');
    assert.deepEqual(
      tree.jobs.map((j) => j.job_id),
      [bossJob.job_id, callback.job_id],
      'oldest first',
    );
    assert.deepEqual(callback.callback_of, [kidJob.job_id]);
    assert.equal(tree.children.length, 1);
    assert.equal(tree.children[0]?.session.session_name, 'kid');
    assert.deepEqual(
      tree.children[0]?.jobs.map((j) => j.job_id),
      [kidJob.job_id],
    );

    const text = (await cli(c.url, ['sessions', 'boss'])).stdout;
    const lines = text.trimEnd().split('\n');
    assert.match(lines[0] as string, /^boss {2}busy {2}agent lead$/);
    assert.match(lines[1] as string, new RegExp(`^├─ ${bossJob.job_id} {2}start +completed .* delegated$`));
    assert.match(lines[2] as string, new RegExp(`^├─ ${callback.job_id} {2}callback +pending .* ← kid$`));
    assert.match(lines[3] as string, /^└─ kid {2}idle {2}last completed$/);
    assert.match(lines[4] as string, new RegExp(`^ {3}└─ ${kidJob.job_id} {2}start +completed .* did it$`));
  });

  it('a session with many children: every one is shown, and Node prints no listener warning on stderr', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'hub', prompt: 'fan out' });
    const names = Array.from({ length: 40 }, (_, i) => `spoke-${String(i).padStart(2, '0')}`);
    for (const name of names) await c.client.createJob({ type: 'start_session', session_name: name, prompt: 'x', parent_session_name: 'hub' });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));

    // as bin/agentq.js runs it: with a signal (Ctrl-C), which each request listens on
    const r = await cli(c.url, ['sessions', 'hub', '--json'], { signal: new AbortController().signal });
    assert.equal(r.code, 0, r.stdout);
    const tree = envelope<{ ok: true; data: CliSessionTree }>(r, CliEnvelope(CliCommandData.session_tree)).data;
    assert.deepEqual(tree.children.map((n) => n.session.session_name).sort(), names);
    // a warning is emitted on the next tick: let it come before looking
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(warnings.map((w) => `${w.name}: ${w.message}`), []);
  });

  it('a session with more children than the coordinator lists (MAX_SESSION_LIST_ITEMS): the newest are drawn, the older counted', async (t) => {
    const c = await coordinator(t, { maxSessionListItems: 3 });
    await c.client.createJob({ type: 'start_session', session_name: 'hub', prompt: 'fan out' });
    const names = Array.from({ length: 5 }, (_, i) => `spoke-${i}`);
    for (const name of names) await c.client.createJob({ type: 'start_session', session_name: name, prompt: 'x', parent_session_name: 'hub' });

    const r = await cli(c.url, ['sessions', 'hub', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const tree = envelope<{ ok: true; data: CliSessionTree }>(r, CliEnvelope(CliCommandData.session_tree)).data;
    assert.deepEqual(tree.children.map((n) => n.session.session_name), names.slice(-3));
    assert.equal(tree.session.children_count, 5);
    assert.equal(tree.session.children_truncated, true);

    const lines = (await cli(c.url, ['sessions', 'hub'])).stdout.trimEnd().split('\n');
    const older = lines.findIndex((l) => l.includes('older child session'));
    assert.equal(lines[older], '├─ … 2 older child session(s) not shown (agentq sessions --parent hub)');
    assert.match(lines[older + 1] as string, /^├─ spoke-2 {2}busy/, 'before the children drawn: they are older');
  });

  it('an unknown session is exit 5 (session_not_found)', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['sessions', 'ghost', '--json']);
    assert.equal(r.code, 5);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'session_not_found');
  });

  it('list filters do not go with a name', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['sessions', 'boss', '--status', 'idle', '--json']);
    assert.equal(r.code, 2);
    assert.match(envelope<Failure>(r, CliFailure).error.message, /without a session name/);
  });

  it('shows usage and cost per node when there are any, and the tree total on a parent', () => {
    const session = (name: string, over: Partial<Session>): Session =>
      ({
        session_name: name,
        status: 'idle',
        agent_name: null,
        last_job_status: 'completed',
        pending_callbacks: [],
        pending_messages: [],
        usage: zero,
        cost_usd: 0,
        tree_usage: zero,
        tree_cost_usd: 0,
        ...over,
      }) as Session;
    const tree: CliSessionTree = {
      session: session('boss', {
        usage: {
          input_tokens: 1200,
          output_tokens: 340,
          cache_read_input_tokens: 5000,
          cache_creation_input_tokens: 0,
        },
        cost_usd: 0.0123,
        tree_usage: {
          input_tokens: 2400,
          output_tokens: 680,
          cache_read_input_tokens: 5000,
          cache_creation_input_tokens: 0,
        },
        tree_cost_usd: 0.0456,
      }),
      jobs: [],
      more_jobs: true,
      children: [{ session: session('kid', {}), jobs: [], more_jobs: false, children: [] }],
    };
    const lines = renderSessionTree(tree, Date.now()).split('\n');
    assert.equal(
      lines[0],
      'boss  idle  last completed · 1,200 in · 340 out · cache 5,000 read · $0.0123 · tree $0.0456',
    );
    assert.equal(lines[1], '├─ … older jobs not shown (agentq list --all --session boss)');
    assert.equal(lines[2], '└─ kid  idle  last completed', 'nothing used: no usage shown');
  });
});

describe('agentq sessions', () => {
  it('has a USAGE column once a session has used something', () => {
    const base = {
      status: 'idle',
      agent_name: null,
      parent_session_name: null,
      active_job_id: null,
      last_job_status: null,
    };
    const data = {
      sessions: [
        { ...base, session_name: 'a', updated_at: new Date().toISOString(), usage: zero, cost_usd: 0 },
        {
          ...base,
          session_name: 'b',
          updated_at: new Date().toISOString(),
          usage: { ...zero, input_tokens: 10, output_tokens: 2 },
          cost_usd: 1.5,
        },
      ],
      next_cursor: null,
    } as unknown as SessionList;
    const text = renderSessions(data, Date.now());
    assert.match(text, /^SESSION +STATUS .* USAGE$/m);
    assert.match(text, /^b +idle .* 10 in · 2 out · \$1\.50$/m);
    assert.doesNotMatch(renderSessions({ ...data, sessions: data.sessions.slice(0, 1) }, Date.now()), /USAGE/);
  });
});

describe('agentq session stop', () => {
  it('stops what the session is doing and reports each job; exit 0 (2 when idle)', async (t) => {
    const c = await coordinator(t);
    const { callback } = await parentAndChild(c);
    const r = await cli(c.url, ['session', 'stop', 'boss', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const data = envelope<{ ok: true; data: StopSessionResponse }>(r, CliEnvelope(CliCommandData.session_stop)).data;
    assert.equal(data.session_name, 'boss');
    assert.deepEqual(
      data.stopped.map((s) => [s.job_id, s.status]),
      [[callback.job_id, 'stopped']],
    );
    // nothing left to stop: the coordinator refuses (session_idle), exit 2
    const again = await cli(c.url, ['session', 'stop', 'boss', '--json']);
    assert.equal(again.code, 2);
    assert.equal(envelope<Failure>(again, CliFailure).error.code, 'session_idle');
  });

  it('--tree stops the sessions under it too, with a SESSION column', async (t) => {
    const c = await coordinator(t);
    const boss = await c.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'delegate' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(boss.job_id, 'delegated');
    const kid = await c.client.createJob({ type: 'start_session', session_name: 'kid', prompt: 'do it', parent_session_name: 'boss' });
    const alone = await cli(c.url, ['session', 'stop', 'boss']);
    assert.equal(alone.code, 2, 'boss itself is idle');
    const r = await cli(c.url, ['session', 'stop', 'boss', '--tree']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^SESSION +JOB +OUTCOME +STATUS$/m);
    assert.match(r.stdout, new RegExp(`^kid +${kid.job_id} +stopped +stopped$`, 'm'));
    assert.equal((await c.client.getSession('boss')).callback_job_id, null, 'boss is not woken by its stopped child');
  });

  it('an unknown session is exit 5; no session name is a usage error', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['session', 'stop', 'ghost']);
    assert.equal(r.code, 5);
    assert.match(r.stderr, /\(session_not_found\)/);
    const missing = await cli(c.url, ['session', '--json']);
    assert.equal(missing.code, 2);
    assert.match(envelope<Failure>(missing, CliFailure).error.message, /missing command: agentq session <stop>/);
  });
});
