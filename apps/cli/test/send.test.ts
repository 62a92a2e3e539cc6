/**
 * `agentq send <session> <text>` end to end: the real coordinator, the CLI in-process and as the
 * real executable. Queued (delivered now to an idle session, with the next turn of a busy one),
 * exit 5 for an unknown session, exit 2 for a session that takes no more input.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CliCommandData, CliEnvelope, CliFailure, type CliFailure as Failure, type SendMessageResponse } from '@agentq/protocol';
import { cli, coordinator, envelope, type CliRun } from './helpers.js';

const BIN = fileURLToPath(new URL('../../bin/agentq.js', import.meta.url));
const SendSchema = CliEnvelope(CliCommandData.send);

function agentq(args: string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

describe('agentq send', () => {
  it('an idle session: queued and delivered now by a resume job (exit 0)', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'idle-one', prompt: 'p' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id);

    const r = await cli(c.url, ['send', 'idle-one', 'look at the logs too', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const data = envelope<{ ok: true; data: SendMessageResponse }>(r, SendSchema).data;
    assert.equal(data.outcome, 'queued');
    assert.ok(data.job_id);
    const resume = await c.client.getJob(data.job_id);
    assert.deepEqual(resume.message_ids, [data.message_id]);
    assert.match(resume.prompt, /look at the logs too/);

    const text = await cli(c.url, ['send', 'idle-one', 'and the metrics']);
    assert.equal(text.code, 0);
    // the first message's job is still pending: this one waits for the session's next turn
    assert.match(text.stdout, /^queued msg_[0-9a-f]{12} for idle-one: delivered with its next turn\n$/);
  });

  it('a busy session: queued for its next turn; the text may come from stdin', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'busy-one', prompt: 'p' });
    await c.launcher.claimAndStart();
    const r = await cli(c.url, ['send', 'busy-one', '-'], { stdin: 'from a pipe\n' });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^queued msg_\w+ for busy-one: delivered with its next turn\n$/);
    const [m] = (await c.client.getSession('busy-one')).pending_messages;
    assert.equal(m?.text, 'from a pipe');
  });

  it('an unknown session: exit 5 (session_not_found), from the real executable too', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['send', 'nobody', 'hello', '--json']);
    assert.equal(r.code, 5);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'session_not_found');
    const bin = await agentq(['send', 'nobody', 'hello'], { AGENTQ_URL: c.url });
    assert.equal(bin.code, 5);
    assert.match(bin.stderr, /^agentq: session nobody not found \(session_not_found\)/);
  });

  it('a session that takes no more input: exit 2 (session_closed), from the real executable too', async (t) => {
    const c = await coordinator(t);
    const never = await c.client.createJob({ type: 'start_session', session_name: 'never', prompt: 'p' });
    await c.client.stopJob(never.job_id);
    const r = await cli(c.url, ['send', 'never', 'hello', '--json']);
    assert.equal(r.code, 2);
    const failure = envelope<Failure>(r, CliFailure).error;
    assert.equal(failure.code, 'session_closed');
    assert.match(failure.message, /can no longer take input/);
    const bin = await agentq(['send', 'never', 'hello', '--json'], { AGENTQ_URL: c.url });
    assert.equal(bin.code, 2);
    assert.equal(envelope<Failure>(bin, CliFailure).error.code, 'session_closed');
  });

  it('an empty message is a usage error (exit 2), sent nowhere', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'quiet', prompt: 'p' });
    const r = await cli(c.url, ['send', 'quiet', '   ', '--json']);
    assert.equal(r.code, 2);
    assert.equal(envelope<Failure>(r, CliFailure).error.code, 'usage_error');
    assert.deepEqual((await c.client.getSession('quiet')).pending_messages, []);
  });

  it('the text "--json" after -- is the message, not the option: the answer is text', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'literal', prompt: 'p' });
    await c.launcher.claimAndStart();
    const r = await cli(c.url, ['send', 'literal', '--', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^queued msg_\w+ for literal: delivered with its next turn\n$/);
    assert.equal((await c.client.getSession('literal')).pending_messages[0]?.text, '--json');
    // an error after parsing is text too, and one before it (commander's) when --json is only an operand
    const unknown = await cli(c.url, ['send', 'nobody', '--', '--json']);
    assert.equal(unknown.code, 5);
    assert.equal(unknown.stdout, '');
    assert.match(unknown.stderr, /^agentq: session nobody not found \(session_not_found\)/);
    const missing = await cli(c.url, ['send', '--', '--json']);
    assert.equal(missing.code, 2);
    assert.equal(missing.stdout, '');
    assert.match(missing.stderr, /^agentq: missing required argument 'text'/);
  });
});
