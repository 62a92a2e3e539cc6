import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type CreateJobRequest,
  type JobDescriptor,
} from '@agentq/protocol';
import { InterruptedError } from '../src/index.js';
import { cli, coordinator, envelope, recordCalls, whenCalled, type CliRun } from './helpers.js';

const DescriptorSchema = CliEnvelope(CliCommandData.start);
const descriptor = (r: CliRun) => envelope<{ ok: true; data: JobDescriptor }>(r, DescriptorSchema).data;
const usageMessage = (r: CliRun) => {
  assert.equal(r.code, 2, r.stdout + r.stderr);
  const env = envelope<Failure>(r, CliFailure);
  assert.equal(env.error.code, 'usage_error');
  return env.error.message;
};

describe('agentq start: where the prompt comes from', () => {
  it('-p - reads the prompt from stdin, without its final newline', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['start', 'alpha', '-p', '-', '--json'], { stdin: 'review\nthe "parser"\n' });
    assert.equal(r.code, 0, r.stdout);
    assert.equal(descriptor(r).prompt, 'review\nthe "parser"');
  });

  it('--prompt-file reads it from a file, and - is stdin there too', async (t) => {
    const c = await coordinator(t);
    const dir = await mkdtemp(join(tmpdir(), 'agentq-prompt-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'prompt.md');
    await writeFile(file, '# Task\n\nfix issue 42 — 日本語 too\n');
    const fromFile = await cli(c.url, ['start', 'alpha', '--prompt-file', file, '--json']);
    assert.equal(descriptor(fromFile).prompt, '# Task\n\nfix issue 42 — 日本語 too');
    const fromStdin = await cli(c.url, ['start', 'beta', '--prompt-file', '-', '--json'], { stdin: 'piped' });
    assert.equal(descriptor(fromStdin).prompt, 'piped');
  });

  it('refuses two prompts, an empty one, and a file it cannot read', async (t) => {
    const c = await coordinator(t);
    assert.match(
      usageMessage(await cli(c.url, ['start', 'a', '-p', 'x', '--prompt-file', '/etc/hostname', '--json'])),
      /once/,
    );
    assert.match(usageMessage(await cli(c.url, ['start', 'a', '-p', '-', '--json'], { stdin: '\n' })), /empty/);
    assert.match(usageMessage(await cli(c.url, ['start', 'a', '-p', '-', '--json'])), /empty/);
    assert.match(
      usageMessage(await cli(c.url, ['start', 'a', '--prompt-file', '/nonexistent/p.md', '--json'])),
      /ENOENT/,
    );
    assert.deepEqual((await c.client.listJobs()).jobs, [], 'nothing was created');
  });
});

describe('agentq start: what the job asks for', () => {
  it('--require key=value (repeatable) sends requires', async (t) => {
    const c = await coordinator(t);
    const requests = recordCalls(c.core, 'createJob') as CreateJobRequest[];
    const r = await cli(c.url, [
      'start',
      'alpha',
      '-p',
      'x',
      '--require',
      'gpu=a100',
      '--require',
      'zone = eu-1',
      '--json',
    ]);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual(requests[0]?.requires, { gpu: 'a100', zone: 'eu-1' });

    assert.match(
      usageMessage(await cli(c.url, ['start', 'b', '-p', 'x', '--require', 'gpu', '--json'])),
      /not key=value/,
    );
    assert.match(
      usageMessage(await cli(c.url, ['start', 'b', '-p', 'x', '--require', 'gpu=a', '--require', 'gpu=b', '--json'])),
      /already required as gpu=a/,
    );
  });

  it('a job that requires labels no launcher has is accepted and says why it waits (status shows pending_reason)', async (t) => {
    const c = await coordinator(t);
    await c.client.register({ hostname: 'cpu-box', labels: { gpu: 'none' } });
    const started = descriptor(await cli(c.url, ['start', 'train', '-p', 'x', '--require', 'gpu=a100', '--json']));
    assert.deepEqual(started.requires, { gpu: 'a100' });
    assert.equal(started.pending_reason, 'no online launcher has gpu=a100');
    const text = await cli(c.url, ['status', started.job_id]);
    assert.equal(text.code, 3, 'still pending: exit 3');
    assert.match(text.stdout, /waiting\s+no online launcher has gpu=a100/);
  });

  it('--budget sets the tree budget of a new session and --max-cost the turn\'s ceiling; both in dollars', async (t) => {
    const c = await coordinator(t);
    const requests = recordCalls(c.core, 'createJob') as CreateJobRequest[];
    const r = await cli(c.url, ['start', 'lead', '-p', 'x', '--budget', '2.50', '--max-cost', '0.5', '--json']);
    assert.equal(r.code, 0, r.stdout);
    assert.deepEqual([requests[0]?.budget_usd, requests[0]?.max_cost_usd], [2.5, 0.5]);
    assert.equal((await c.client.getSession('lead')).budget_usd, 2.5);
    assert.equal((await cli(c.url, ['resume', 'lead', '-p', 'y', '--max-cost', '1', '--json'])).code, 0);
    assert.equal(requests[1]?.max_cost_usd, 1);
    for (const bad of ['0', '-1', 'lots', '1e9']) {
      assert.match(usageMessage(await cli(c.url, ['start', 'b', '-p', 'x', '--budget', bad, '--json'])), /US dollars/, bad);
    }
    // a budget belongs to the session a start creates
    assert.match(usageMessage(await cli(c.url, ['resume', 'lead', '-p', 'y', '--budget', '1', '--json'])), /budget/);
  });

  it('--timeout none asks for no timeout (timeout_ms: null), overriding the coordinator default', async (t) => {
    const c = await coordinator(t);
    const requests = recordCalls(c.core, 'createJob') as CreateJobRequest[];
    const r = await cli(c.url, ['start', 'alpha', '-p', 'x', '--timeout', 'none', '--json']);
    assert.equal(r.code, 0, r.stdout);
    assert.equal(requests[0]?.timeout_ms, null);
    assert.equal(descriptor(r).timeout_ms, null);
  });

  it('inside a job, the parent defaults to $AGENTQ_SESSION_NAME; --parent wins; --no-parent opts out', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
    await c.client.createJob({ type: 'start_session', session_name: 'other', prompt: 'p' });
    const env = { AGENTQ_SESSION_NAME: 'boss' };
    const inherited = descriptor(await cli(c.url, ['start', 'kid1', '-p', 'x', '--json'], { env }));
    assert.equal(inherited.parent_session_name, 'boss');
    const explicit = descriptor(await cli(c.url, ['start', 'kid2', '-p', 'x', '--parent', 'other', '--json'], { env }));
    assert.equal(explicit.parent_session_name, 'other');
    const none = descriptor(await cli(c.url, ['start', 'kid3', '-p', 'x', '--no-parent', '--json'], { env }));
    assert.equal(none.parent_session_name, null);
    const outside = descriptor(await cli(c.url, ['start', 'kid4', '-p', 'x', '--json']));
    assert.equal(outside.parent_session_name, null);
  });

  it('resume does not take its parent from $AGENTQ_SESSION_NAME', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
    await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'p' });
    const requests = recordCalls(c.core, 'createJob') as CreateJobRequest[];
    const r = await cli(c.url, ['resume', 'alpha', '-p', 'again', '--json'], { env: { AGENTQ_SESSION_NAME: 'boss' } });
    assert.equal(r.code, 0, r.stdout);
    assert.equal(requests[0]?.parent_session_name, undefined);
  });

  it('a launcher already waiting takes the job at once: the answer says claimed, not pending', async (t) => {
    const c = await coordinator(t);
    await c.launcher.id();
    const parked = once(c.core.waiters, 'parked');
    const claimed = c.launcher.claim();
    await parked;
    const r = await cli(c.url, ['start', 'alpha', '-p', 'x', '--json']);
    assert.equal(r.code, 0, 'accepted');
    const d = descriptor(r);
    assert.equal(d.status, 'claimed');
    assert.equal(d.terminal, false);
    assert.equal(d.exit_code, 3);
    assert.equal((await claimed).job_id, d.job_id);
  });
});

describe('agentq start --follow', () => {
  it("streams the job's output on stdout while waiting, then prints the final descriptor", async (t) => {
    const c = await coordinator(t);
    let sawFirstLine!: () => void;
    const firstLineShown = new Promise<void>((resolve) => (sawFirstLine = resolve));
    const starting = cli(c.url, ['start', 'alpha', '-p', 'go', '--wait', '--follow'], {
      onStdout: (all) => {
        if (all.includes('line 1\n')) sawFirstLine();
      },
    });
    const job = await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'line 1\n');
    // shown while the job is still running: streamed, not printed at the end
    await firstLineShown;
    assert.equal((await c.client.getJob(job.job_id)).status, 'running');
    await c.launcher.output(job.job_id, 7, 'line 2 (no newline)');
    await c.launcher.complete(job.job_id, 'done');
    const r = await starting;
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.startsWith('line 1\nline 2 (no newline)\n'), r.stdout);
    assert.match(r.stdout, new RegExp(`\\n${job.job_id}  completed\\n`));
    assert.match(r.stdout, /result:\n {4}done/);
  });

  it('with --json the output goes to stderr and stdout keeps its one envelope; --follow implies --wait', async (t) => {
    const c = await coordinator(t);
    const starting = cli(c.url, ['start', 'alpha', '-p', 'go', '--follow', '--json']);
    const job = await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'progress…\n');
    await c.launcher.fail(job.job_id, 'broken');
    const r = await starting;
    assert.equal(r.code, 4);
    assert.equal(r.stderr, 'progress…\n');
    const d = descriptor(r);
    assert.equal(d.status, 'failed');
    assert.equal(d.error, 'broken');
  });

  it('stops following when --wait-timeout passes: exit 3, the job keeps running', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['start', 'alpha', '-p', 'go', '--follow', '--wait-timeout', '50ms', '--json']);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    const d = descriptor(r);
    assert.equal(d.terminal, false);
    assert.equal((await c.client.getJob(d.job_id)).terminal, false);
  });
});

describe('agentq start --wait, interrupted', () => {
  it('Ctrl-C reads the job once more: one that started during the wait is shown running, not pending', async (t) => {
    const c = await coordinator(t);
    const parked = whenCalled(c.core, 'waitJob', (_id: string, timeoutMs: number) => timeoutMs > 0);
    const interrupt = new AbortController();
    const waiting = cli(c.url, ['start', 'alpha', '-p', 'go', '--wait', '--json'], { signal: interrupt.signal });
    await parked;
    // the long-poll answers only when the job ends: its last snapshot is the pending one
    await c.launcher.claimAndStart();
    interrupt.abort(new InterruptedError());
    const r = await waiting;
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(descriptor(r).status, 'running');
  });
});
