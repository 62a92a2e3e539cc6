import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type LifecycleEvent,
} from '@agentq/protocol';
import { InterruptedError } from '../src/index.js';
import { cli, coordinator, deadUrl, envelope, whenCalled, type CliRun } from './helpers.js';
import { tcpProxy } from '@agentq/client/test/tcp-proxy';

const WatchLine = CliEnvelope(CliCommandData.watch);

/** Every stdout line is one envelope of one event. */
function events(r: CliRun): LifecycleEvent[] {
  return r.stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((line) => envelope<{ ok: true; data: LifecycleEvent }>({ ...r, stdout: line }, WatchLine).data);
}

describe('agentq watch', () => {
  it('--type with a name that is no event type or group is a usage error (exit 2), not a watch that prints nothing for ever', async (t) => {
    const c = await coordinator(t);
    for (const type of ['job.complete', 'bogus', 'job,jobs', ',']) {
      const r = await cli(c.url, ['watch', '--type', type, '--count', '1']);
      assert.equal(r.code, 2, `${type}: ${r.stderr}`);
      assert.match(r.stderr, /--type/);
    }
    const json = await cli(c.url, ['watch', '--type', 'job.complete', '--json']);
    assert.equal(json.code, 2);
    assert.equal(envelope<Failure>(json, CliFailure).error.code, 'usage_error');
    // groups, the group.* form and every event type are accepted
    await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    const ok = await cli(c.url, ['watch', '--since', '0', '--type', 'job.*,session,launcher.stale', '--count', '2']);
    assert.equal(ok.code, 0, ok.stderr);
  });

  it('--since replays what happened; --count ends it; --json is one envelope per event', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    const r = await cli(c.url, ['watch', '--since', '0', '--count', '2', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const seen = events(r);
    assert.equal(seen.length, 2);
    assert.deepEqual(new Set(seen.map((e) => e.type)), new Set(['session.created', 'job.created']));
    const created = seen.find((e) => e.type === 'job.created');
    assert.ok(created && 'job' in created && created.job.job_id === job.job_id);
  });

  it('--count counts events, not the notice of a gap before them', async (t) => {
    // a replay window of 2: the first of the 3 events is missed, and a gap notice comes first
    const c = await coordinator(t, { eventReplaySize: 2 });
    await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    await c.client.createJob({ type: 'start_session', session_name: 'beta', prompt: 'x' });
    const r = await cli(c.url, ['watch', '--since', '0', '--count', '1', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(events(r).map((e) => e.type), ['stream.gap', 'job.created']);
  });

  it('prints live events as lines for people, filtered by type and session', async (t) => {
    const c = await coordinator(t);
    const other = await c.client.createJob({ type: 'start_session', session_name: 'other', prompt: 'x' });
    // from the start of the replay window on, so no event can slip by before the stream is open
    const watching = cli(c.url, [
      'watch',
      '--since',
      '0',
      '--type',
      'job.completed,job.failed',
      '--session',
      'alpha',
      '--count',
      '1',
    ]);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    await c.client.stopJob(other.job_id);
    await c.launcher.claimAndStart(); // alpha's job: other's was stopped
    await c.launcher.complete(job.job_id);
    const r = await watching;
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 1, r.stdout);
    assert.match(
      lines[0] as string,
      new RegExp(`^\\d\\d:\\d\\d:\\d\\d {2}job\\.completed +${job.job_id} {2}alpha {2}completed {2}on lnch_`),
    );
  });

  it('--job follows one job; launcher events are types too', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    await c.client.createJob({ type: 'start_session', session_name: 'beta', prompt: 'x' });
    await c.client.stopJob(job.job_id);
    const one = events(await cli(c.url, ['watch', '--since', '0', '--job', job.job_id, '--count', '2', '--json']));
    assert.deepEqual(
      one.map((e) => e.type),
      ['job.created', 'job.stopped'],
    );
    await c.launcher.id();
    const launchers = events(
      await cli(c.url, ['watch', '--since', '0', '--type', 'launcher', '--count', '1', '--json']),
    );
    assert.equal(launchers[0]?.type, 'launcher.registered');
  });

  it('a removed launcher is shown as removed, with the status it had, not as still online', async (t) => {
    const c = await coordinator(t);
    const id = await c.launcher.id();
    await c.client.deleteLauncher(id, { self: true });
    const r = await cli(c.url, ['watch', '--since', '0', '--type', 'launcher.removed', '--count', '1']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`launcher\\.removed\\s+${id}\\s+\\S+\\s+removed \\(was online\\)\\n$`));
  });

  it('Ctrl-C ends it with exit 0; a coordinator that never answers is exit 1', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    const interrupt = new AbortController();
    const r = await cli(c.url, ['watch', '--since', '0'], {
      signal: interrupt.signal,
      onStdout: () => interrupt.abort(new InterruptedError()),
    });
    assert.equal(r.code, 0);
    assert.ok(r.stdout.length > 0);

    const down = await cli(await deadUrl(), ['watch', '--json']);
    assert.equal(down.code, 1);
    assert.equal(envelope<Failure>(down, CliFailure).error.code, 'coordinator_unreachable');
  });

  it('a stream lost before any event resumes after the newest event of when it opened: what came meanwhile is printed', async (t) => {
    const c = await coordinator(t);
    const opened = whenCalled(c.core.events, 'subscribe', () => true);
    let onLost!: () => void;
    const lost = new Promise<void>((resolve) => (onLost = resolve));
    const watching = cli(c.url, ['watch', '--type', 'job.created', '--count', '1', '--json'], {
      onStderr: (s) => {
        if (s.includes('event stream lost')) onLost();
      },
    });
    await opened;
    const restarting = c.restart();
    await lost;
    // made while the coordinator is down and the watch has no stream: only a resume brings it
    const { job } = await c.core.createJob({ type: 'start_session', session_name: 'meanwhile', prompt: 'x' });
    await restarting;
    // the restarted coordinator's own listeners are in place: the next one is the watch's stream
    await whenCalled(c.core.events, 'subscribe', () => true);
    // a watch that lost its place prints this one instead (one that resumed has printed the other)
    await c.client.createJob({ type: 'start_session', session_name: 'after', prompt: 'x' });
    const r = await watching;
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(
      events(r).map((e) => ('job' in e ? e.job.job_id : e.type)),
      [job.job_id],
    );
  });

  it('a stream whose connection goes silent (frozen, not closed) is given up after three keepalives and resumed', { timeout: 20_000 }, async (t) => {
    // keepalive every 100 ms (a third of the idle timeout)
    const c = await coordinator(t, { httpIdleTimeoutMs: 300 });
    const proxy = await tcpProxy(t, c.url);
    const first = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    let lines = 0;
    let second: Promise<string> | undefined;
    const watching = cli(proxy.url, ['watch', '--since', '0', '--type', 'job.created', '--count', '2', '--json'], {
      onStdout: (all) => {
        if (all.split('\n').length - 1 === lines) return;
        lines = all.split('\n').length - 1;
        if (lines !== 1) return;
        // the stream is open and has delivered: the network now forgets its connection
        proxy.freeze('drop');
        // awaited after the watch: its answer and the watch's stream are independent connections,
        // and the stream may deliver the job's event first
        second = c.client.createJob({ type: 'start_session', session_name: 'beta', prompt: 'y' }).then((j) => j.job_id);
        second.catch(() => undefined); // awaited below; a failure is reported there
      },
    });
    const r = await watching;
    assert.equal(r.code, 0, r.stderr);
    const seen = events(r);
    assert.deepEqual(seen.map((e) => 'job' in e && e.job.job_id), [first.job_id, await second]);
    // given up once, for the frozen connection; on a loaded machine a keepalive 100 ms apart may
    // also come late enough (300 ms) for a healthy stream to be given up and resumed: each time
    // after an event, and neither event printed twice (above)
    assert.match(r.stderr, /^(agentq: event stream lost; reconnecting after event \d+\n)+$/);
  });
});
