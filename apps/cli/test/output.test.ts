import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type CliOutput } from '@agentq/protocol';
import { cli, coordinator, envelope, type TestCoordinator } from './helpers.js';

const OutputSchema = CliEnvelope(CliCommandData.output);
const out = (r: { stdout: string; stderr: string; code: number }) =>
  envelope<{ ok: true; data: CliOutput }>(r, OutputSchema).data;

/** Resolves once a follower's long-poll for new output (a read with `wait_ms`) reached `core`. */
function parkedFollow(core: TestCoordinator['core']): Promise<void> {
  return new Promise((resolve) => {
    const original = core.readOutput.bind(core);
    core.readOutput = (jobId, q, signal) => {
      const read = original(jobId, q, signal);
      if (q.wait_ms !== undefined) {
        core.readOutput = original;
        resolve();
      }
      return read;
    };
  });
}

describe('agentq output', () => {
  it('prints the output so far, exit 0 even while the job runs', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'line one\nline two\n');

    const text = await cli(c.url, ['output', job.job_id]);
    assert.equal(text.code, 0);
    assert.equal(text.stdout, 'line one\nline two\n');

    const data = out(await cli(c.url, ['output', job.job_id, '--json']));
    assert.equal(data.output, 'line one\nline two\n');
    assert.equal(data.total_bytes, 18);
    assert.equal(data.terminal, false);
  });

  it('is a bounded preview: the last 16 KiB by default, --tail for another size', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    const big = 'x'.repeat(20 * 1024 - 4) + 'END\n';
    await c.launcher.output(job.job_id, 0, big);

    const preview = out(await cli(c.url, ['output', job.job_id, '--json']));
    assert.equal(preview.total_bytes, 20 * 1024);
    assert.equal(preview.output.length, 16 * 1024);
    assert.ok(preview.output.endsWith('END\n'));
    assert.equal(preview.offset, 4 * 1024);

    const tail = await cli(c.url, ['output', job.job_id, '--tail', '4']);
    assert.equal(tail.stdout, 'END\n');
    assert.match(tail.stderr, /last 4 of 20480 bytes/);
  });

  it('unknown job: exit 5', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['output', 'job_0123456789ab']);
    assert.equal(r.code, 5);
    assert.match(r.stderr, /job_not_found/);
  });

  it('--follow streams new output until the job ends, then exits with its outcome', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'one\n');

    // each step waits for the follower to have printed the previous one: it streams, no sleeps
    const printed = new Map<string, () => void>();
    const whenPrinted = (text: string) => new Promise<void>((resolve) => printed.set(text, resolve));
    const sawOne = whenPrinted('one\n');
    const sawTwo = whenPrinted('one\ntwo\n');
    const following = cli(c.url, ['output', job.job_id, '--follow'], { onStdout: (all) => printed.get(all)?.() });
    await sawOne;
    await c.launcher.output(job.job_id, 4, 'two\n');
    await sawTwo;
    assert.equal((await c.client.getJob(job.job_id)).status, 'running');
    await c.launcher.fail(job.job_id, 'gave up');
    const r = await following;
    assert.equal(r.code, 4);
    assert.equal(r.stdout, 'one\ntwo\n');
  });

  it('--follow --json gathers everything into one envelope', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'a');
    const following = cli(c.url, ['output', job.job_id, '--follow', '--json']);
    await c.launcher.output(job.job_id, 1, 'b');
    await c.launcher.complete(job.job_id, 'ok');
    const r = await following;
    assert.equal(r.code, 0);
    const data = out(r);
    assert.equal(data.output, 'ab');
    assert.equal(data.offset, 0);
    assert.equal(data.next_offset, 2);
    assert.equal(data.status, 'completed');
  });

  it('--follow: bytes the coordinator dropped before they were read are a note in the text, and dropped_bytes with --json', async (t) => {
    const c = await coordinator(t, { outputMaxBytes: 64 });
    for (const json of [false, true]) {
      const job = await c.client.createJob({ type: 'start_session', session_name: `drops-${json}`, prompt: 'x' });
      await c.launcher.claimAndStart();
      await c.launcher.output(job.job_id, 0, 'one\n');
      const following = cli(c.url, ['output', job.job_id, '--follow', ...(json ? ['--json'] : [])]);
      await parkedFollow(c.core);
      // the follower has read 'one\n' and waits at offset 4; 100 bytes come at once over a cap of
      // 64: all but the newest 64 bytes (offsets 40 to 104) are gone before it can read them
      await c.launcher.output(job.job_id, 4, `${'a'.repeat(36)}${'b'.repeat(63)}\n`);
      await c.launcher.complete(job.job_id, 'ok');
      const r = await following;
      assert.equal(r.code, 0);
      if (!json) {
        assert.match(r.stdout, /^one\n\[… 36 bytes dropped by the coordinator …\]\n/);
        assert.ok(r.stdout.endsWith(`${'b'.repeat(63)}\n`));
        continue;
      }
      const data = out(r);
      // the output is the job's bytes only, no note; with what was dropped it spans offset..next_offset
      assert.doesNotMatch(data.output, /dropped/);
      assert.ok(data.output.endsWith(`${'b'.repeat(63)}\n`));
      assert.equal(data.dropped_bytes, 36);
      assert.equal(Buffer.byteLength(data.output) + data.dropped_bytes, data.next_offset - data.offset);
    }
  });
});
