import assert from 'node:assert/strict';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { resolveExecutor } from '../src/index.js';
import { coordinator, fixture, launcher, outputOf, settled, tempDir } from './helpers.js';

interface ClaudeCall {
  args: string[];
  prompt: string;
  cwd: string;
}

test('claude-code executor: start, then resume with the stored session id (fake claude on PATH)', async (t) => {
  const { c, client } = await coordinator(t);
  const bin = tempDir(t);
  const callLog = join(bin, 'calls.jsonl');
  // `claude` on PATH is a shell wrapper around the compiled fake
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${process.execPath}" "${fixture('fake-claude.js')}" "$@"\n`);
  chmodSync(join(bin, 'claude'), 0o755);
  process.env['FAKE_CLAUDE_LOG'] = callLog;
  t.after(() => delete process.env['FAKE_CLAUDE_LOG']);
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'] },
    { env: { ...process.env, PATH: `${bin}:${process.env['PATH']}` } },
  );

  const start = await client.createJob({
    type: 'start_session',
    session_name: 'claude-session',
    agent_name: 'researcher',
    prompt: 'Summarise the README',
  });
  const started = await settled(client, start.job_id);
  assert.equal(started.status, 'completed', started.error ?? '');
  assert.equal(started.result, 'Answer to: Summarise the README');
  const sessionId = started.executor_session_id;
  assert.ok(sessionId, 'the session id from the init line was reported');
  assert.equal(
    await outputOf(client, start.job_id),
    'Working on: Summarise the README\n[tool Read] {"file_path":"README.md"}\n',
  );

  const resume = await client.createJob({ type: 'resume_session', session_name: 'claude-session', prompt: 'Now shorter' });
  const resumed = await settled(client, resume.job_id);
  assert.equal(resumed.status, 'completed', resumed.error ?? '');
  assert.equal(resumed.result, 'Answer to: Now shorter');
  assert.equal(resumed.executor_session_id, sessionId);

  const calls = readFileSync(callLog, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as ClaudeCall);
  assert.equal(calls.length, 2);
  assert.deepEqual(calls[0]!.args, ['-p', '--output-format', 'stream-json', '--verbose', '--agent', 'researcher']);
  assert.equal(calls[0]!.prompt, 'Summarise the README');
  // the resume job inherits the session's agent; claude keeps it on resume anyway, passing it is harmless
  assert.deepEqual(calls[1]!.args, [
    '-p',
    '--output-format',
    'stream-json',
    '--verbose',
    '--resume',
    sessionId,
    '--agent',
    'researcher',
  ]);
  assert.equal(calls[1]!.prompt, 'Now shorter');
});

test('claude-code executor: a result with is_error fails the job with its message', async (t) => {
  const { c, client } = await coordinator(t);
  const bin = tempDir(t);
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${process.execPath}" "${fixture('fake-claude.js')}" "$@"\n`);
  chmodSync(join(bin, 'claude'), 0o755);
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()) },
    { env: { ...process.env, PATH: `${bin}:${process.env['PATH']}` } },
  );
  const job = await client.createJob({ type: 'start_session', session_name: 'refused', prompt: 'please FAIL' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /the fake model refused/);
});

test('claude-code executor: a missing claude CLI fails the job saying so', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()) },
    { env: { ...process.env, AGENTQ_CLAUDE_BIN: '/nonexistent/claude' } },
  );
  const job = await client.createJob({ type: 'start_session', session_name: 'no-cli', prompt: 'hi' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /claude CLI \(\/nonexistent\/claude\) was not found/);
});

test('demo executor: streams a few lines and quotes the prompt', async (t) => {
  const { c, client } = await coordinator(t);
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('demo', process.cwd()) },
    { env: { ...process.env, AGENTQ_DEMO_STEP_MS: '0' } },
  );
  const job = await client.createJob({ type: 'start_session', session_name: 'demo', prompt: 'Say hi' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'Demo agent received: "Say hi"');
  assert.match(await outputOf(client, job.job_id), /Starting session "demo"[\s\S]*Writing the answer/);
  assert.match(done.executor_session_id ?? '', /^demo-/);
});
