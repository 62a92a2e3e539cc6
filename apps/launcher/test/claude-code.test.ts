import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import type { CompletedReport, ExecutorInvocation, FailedReport } from '@agentq/protocol';
import { claudeArgs } from '../src/executors/claude-args.js';
import { deniedText } from '../src/executors/claude-stream.js';
import { resolveExecutor } from '../src/index.js';
import { alive, captureLog, coordinator, gone, launcher, outputOf, settled, tempDir } from './helpers.js';
import { BASE_ARGS, CLAUDE_EXECUTOR, FAKE_USAGE, fakeClaude, setup, stoppedTurn } from './claude.js';

test('claude-code executor: start, then resume with the stored session id; usage and cost are reported', async (t) => {
  const { c, client, px, claude } = await setup(t);
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
  // claude's result event, mapped: the four token counts (extra fields dropped), cost, turns, API time
  const [completed] = px.bodies(`/launcher/jobs/${start.job_id}/completed`) as CompletedReport[];
  assert.deepEqual(completed!.usage, FAKE_USAGE);
  assert.equal(completed!.cost_usd, 0.0123);
  assert.equal(completed!.num_turns, 2);
  assert.equal(completed!.duration_api_ms, 4);

  const resume = await client.createJob({ type: 'resume_session', session_name: 'claude-session', prompt: 'Now shorter' });
  const resumed = await settled(client, resume.job_id);
  assert.equal(resumed.status, 'completed', resumed.error ?? '');
  assert.equal(resumed.result, 'Answer to: Now shorter');
  assert.equal(resumed.executor_session_id, sessionId);

  const calls = claude.calls();
  assert.equal(calls.length, 2);
  const mcpArg = calls[0]!.args[4]!;
  assert.match(mcpArg, /^--mcp-config=\/.+\.json$/);
  assert.deepEqual(calls[0]!.args, [...BASE_ARGS, mcpArg, '--allowedTools=mcp__agentq', '--agent=researcher']);
  assert.equal(calls[0]!.prompt, 'Summarise the README');
  // the resume job inherits the session's agent; claude keeps it on resume anyway, passing it is harmless
  assert.deepEqual(calls[1]!.args.filter((a) => !a.startsWith('--mcp-config=')), [
    ...BASE_ARGS,
    '--allowedTools=mcp__agentq',
    '--resume',
    sessionId,
    '--agent=researcher',
  ]);
  assert.equal(calls[1]!.prompt, 'Now shorter');

  // the MCP config starts `agentq mcp` of this installation with the job's variables...
  const server = calls[0]!.mcpConfig!.mcpServers['agentq']!;
  assert.equal(server.type, 'stdio');
  assert.equal(server.command, process.execPath);
  const cliBin = join(dirname(dirname(dirname(dirname(CLAUDE_EXECUTOR)))), '..', 'cli', 'bin', 'agentq.js');
  assert.deepEqual(server.args, [join(cliBin), 'mcp']);
  assert.ok(existsSync(server.args[0]!), 'the agentq CLI it names exists');
  assert.deepEqual(server.env, {
    AGENTQ_SESSION_NAME: 'claude-session',
    AGENTQ_JOB_ID: start.job_id,
    AGENTQ_COORDINATOR_URL: px.url,
    AGENTQ_URL: px.url,
  });
  assert.equal(calls[1]!.mcpConfig!.mcpServers['agentq']!.env['AGENTQ_JOB_ID'], resume.job_id);
  // ...and does not outlive the turn (it could hold the job's token)
  assert.equal(existsSync(mcpArg.slice('--mcp-config='.length)), false, 'the config file was removed');
  void c;
});

test('claude-code executor: AGENTQ_CLAUDE_ARGS is split like a shell would (quotes keep "Read Grep" one word)', async (t) => {
  const { client, claude } = await setup(t, {
    AGENTQ_CLAUDE_ARGS: `--allowedTools "Read Grep" --append-system-prompt 'be brief' --model sonnet`,
    AGENTQ_CLAUDE_MCP: 'false',
  });
  const job = await client.createJob({ type: 'start_session', session_name: 'quoted', prompt: 'hi' });
  assert.equal((await settled(client, job.job_id)).status, 'completed');
  const [call] = claude.calls();
  // AGENTQ_CLAUDE_MCP=false: no MCP server either
  assert.deepEqual(call!.args, [
    ...BASE_ARGS,
    '--allowedTools',
    'Read Grep',
    '--append-system-prompt',
    'be brief',
    '--model',
    'sonnet',
  ]);
  assert.equal(call!.mcpConfig, null);
});

test('claude-code executor: a result with is_error fails the job with its subtype and message; usage still reported', async (t) => {
  const { client, px } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'refused', prompt: 'please FAIL' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, 'claude reported error_during_execution: the fake model refused (exit code 1)');
  const [failed] = px.bodies(`/launcher/jobs/${job.job_id}/failed`) as FailedReport[];
  assert.deepEqual(failed!.usage, FAKE_USAGE);
  assert.equal(failed!.cost_usd, 0.0123);
});

test('claude-code executor: an error_* result fails the job even when claude exits 0', async (t) => {
  const { client } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'turns', prompt: 'MAX_TURNS please' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, 'claude reported error_max_turns: reached the maximum number of turns (2) (exit code 1)');
});

test("claude-code executor: a claude that ends without a result fails the job with claude's last stderr lines", async (t) => {
  const { client } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'refused-option', prompt: 'BAD_OPTION' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error, "claude exited with code 1 without a result; stderr:\nerror: unknown option '--bogus' (exit code 1)");
});

test('claude-code executor: a line claude prints that is longer than an event line may be is output; the turn completes', async (t) => {
  const { client } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'huge-line', prompt: 'HUGE_LINE' });
  const done = await settled(client, job.job_id);
  // it failed with executor_event_too_large: the line went on as one `output` event over 16 MiB
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);
  assert.equal(done.result, 'Answer to: HUGE_LINE');
  // all of it reached the coordinator, which keeps the newest 1 MiB: the end of the line
  const output = await client.getOutput(job.job_id, { offset: 0 });
  const before = 'Working on: HUGE_LINE\n[tool Read] {"file_path":"README.md"}\n';
  assert.equal(output.total_bytes, before.length + 16 * 1024 * 1024 + 1024 + 1);
  assert.equal(output.truncated, true);
  assert.ok(/^x+\n$/.test(output.output), 'what is kept is the end of the line, as it came');
});

test('claude-code executor: the tool calls claude refused for want of permission are in the output', async (t) => {
  const { client } = await setup(t);
  const job = await client.createJob({ type: 'start_session', session_name: 'denied', prompt: 'DENIED' });
  const done = await settled(client, job.job_id);
  // the turn still ends as claude says: the model carried on without the call
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(
    await outputOf(client, job.job_id),
    'Working on: DENIED\n[tool Read] {"file_path":"README.md"}\n[permission denied: Write] {"file_path":"notes.md","content":"the notes"}\n',
  );
});

test('claude-code executor: a stopped turn ends when claude has exited, not before', async (t) => {
  const { claude } = await stoppedTurn(t, 'slow-exit', 'SLOW_EXIT');
  // claude takes a while to go on SIGTERM (its commands, its transcript): the job was stopped,
  // and its slot free for a resume of the same session, while claude still wrote to it
  const [call] = claude.calls();
  assert.equal(alive(call!.pid), false, 'claude has exited');
});

// A stop: the executor waits for claude to exit, then dies. It died at claude's 'exit', which node
// emits before claude's stdout is read to its end: what claude printed last was dropped unread,
// missing from the job's output.
test('claude-code executor: a stopped turn keeps what claude printed before it exited', async (t) => {
  const { client, job } = await stoppedTurn(t, 'last-words', 'LAST_WORDS');
  assert.match(await outputOf(client, job.job_id), /last words\n$/);
});

test('claude-code executor: a claude that exits leaving a process that holds its stdout and stderr still ends the turn', async (t) => {
  const { c, client } = await coordinator(t);
  const claude = fakeClaude(t);
  // the idle timeout would end the job too, but as executor_idle, and only after 30 minutes by default
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'], idleTimeoutMs: 60_000 },
    { env: { ...process.env, PATH: claude.path, FAKE_CLAUDE_LOG: claude.log } },
  );
  const job = await client.createJob({ type: 'start_session', session_name: 'left-child', prompt: 'LEAVE_CHILD BAD_OPTION' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  assert.equal(done.error_code, null);
  assert.equal(done.error, "claude exited with code 1 without a result; stderr:\nerror: unknown option '--bogus' (exit code 1)");
  const [call] = claude.calls();
  await gone(call!.left_child_pid!, 'the process claude left behind');
});

test('claude-code executor: "No conversation found" on resume fails with session_not_on_host', async (t) => {
  const { client, px } = await setup(t);
  const first = await client.createJob({ type: 'start_session', session_name: 'elsewhere', prompt: 'hello' });
  assert.equal((await settled(client, first.job_id)).status, 'completed');
  const resume = await client.createJob({ type: 'resume_session', session_name: 'elsewhere', prompt: 'NO_CONVERSATION' });
  const done = await settled(client, resume.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /has no session .* on this host \("No conversation found"\)/);
  const [failed] = px.bodies(`/launcher/jobs/${resume.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.error_code, 'session_not_on_host');
});

test('claude-code executor: a resume claude 2.x answers "No conversation found" in its result keeps the session id it had', async (t) => {
  const { client, px } = await setup(t);
  const first = await client.createJob({ type: 'start_session', session_name: 'cleaned-up', prompt: 'hello' });
  const started = await settled(client, first.job_id);
  assert.equal(started.status, 'completed');
  const sessionId = started.executor_session_id;
  assert.ok(sessionId);
  // claude 2.x answers a --resume of a session it does not have with an error result carrying the
  // id of a fresh session that was never saved: that id is no session to resume later
  const resume = await client.createJob({ type: 'resume_session', session_name: 'cleaned-up', prompt: 'NO_CONVERSATION_RESULT' });
  const done = await settled(client, resume.job_id);
  assert.equal(done.status, 'failed');
  assert.match(done.error ?? '', /has no session .* on this host \("No conversation found"\)/);
  const [failed] = px.bodies(`/launcher/jobs/${resume.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.error_code, 'session_not_on_host');
  assert.equal(failed!.executor_session_id, sessionId, 'the report names the session that was asked for');
  assert.equal((await client.getSession('cleaned-up')).executor_session_id, sessionId, 'the session keeps its id');
});

test("claude-code executor: a resumed session keeps its id when claude's lines name an id of the moment and no result follows", async (t) => {
  const { client, px } = await setup(t);
  const started = await settled(client, (await client.createJob({ type: 'start_session', session_name: 'tagged', prompt: 'hello' })).job_id);
  const sessionId = started.executor_session_id;
  assert.ok(sessionId);
  // claude 2.1.x on --resume: the init line (and hook lines) may carry an id whose transcript is
  // never written; the result names the session. A turn that ends before its result must not
  // leave that id as the session's: every later resume would find no conversation
  const crashed = await client.createJob({ type: 'resume_session', session_name: 'tagged', prompt: 'INIT_TAG CRASH' });
  const done = await settled(client, crashed.job_id);
  assert.equal(done.status, 'failed');
  const [failed] = px.bodies(`/launcher/jobs/${crashed.job_id}/failed`) as FailedReport[];
  assert.equal(failed!.executor_session_id, sessionId);
  assert.equal((await client.getSession('tagged')).executor_session_id, sessionId, 'the session keeps its id');
  // with a result, the result's id is the session's
  const answered = await settled(client, (await client.createJob({ type: 'resume_session', session_name: 'tagged', prompt: 'INIT_TAG again' })).job_id);
  assert.equal(answered.status, 'completed', answered.error ?? '');
  assert.equal(answered.executor_session_id, sessionId);
});

test('claude-code executor: a resumed turn whose answer quotes "No conversation found" (a child\'s error, told to its parent) completes', async (t) => {
  const { client } = await setup(t);
  assert.equal((await settled(client, (await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan' })).job_id)).status, 'completed');
  const child = await client.createJob({ type: 'start_session', session_name: 'worker', prompt: 'hello', parent_session_name: 'lead' });
  assert.equal((await settled(client, child.job_id)).status, 'completed');
  const first = (await client.getSession('lead')).callback_job_id;
  assert.ok(first);
  assert.equal((await settled(client, first)).status, 'completed');

  // the child's resume finds no conversation: its error reaches the parent in its callback prompt
  const lost = await client.createJob({ type: 'resume_session', session_name: 'worker', prompt: 'NO_CONVERSATION' });
  assert.equal((await settled(client, lost.job_id)).error_code, 'session_not_on_host');
  const callback = (await client.getSession('lead')).callback_job_id;
  assert.ok(callback);
  assert.match((await client.getJob(callback)).prompt, /No conversation found/);
  // the fake answers with its prompt: the parent's answer quotes the words, and is an answer
  const done = await settled(client, callback);
  assert.equal(done.status, 'completed', `${done.error_code}: ${done.error}`);
  assert.match(done.result ?? '', /No conversation found/);
});

test('claude-code executor: a claude that never exits after its result is killed after the exit grace; the job completes', async (t) => {
  const { client, claude } = await setup(t, {}, {}, 300);
  const job = await client.createJob({ type: 'start_session', session_name: 'hangs', prompt: 'HANG_AFTER_RESULT' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'Answer to: HANG_AFTER_RESULT');
  const [call] = claude.calls();
  await gone(call!.pid, 'the hung claude');
});

test("claude-code executor: a claude that never exits after its result gets SIGTERM, so that it ends the Bash commands it runs outside its process group", async (t) => {
  const { client, claude } = await setup(t, {}, {}, 300);
  const job = await client.createJob({ type: 'start_session', session_name: 'hangs-running-a-command', prompt: 'BASH_TOOL HANG_AFTER_RESULT' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'Answer to: BASH_TOOL HANG_AFTER_RESULT');
  const [call] = claude.calls();
  await gone(call!.pid, 'the hung claude');
  // killed with SIGKILL at once, claude could not end it: it ran on, out of reach of the launcher
  await gone(call!.tool_pid!, 'the command claude was running');
});

// The exit grace ran out: the executor was told to go (SIGTERM) and waits for claude to end its
// commands. A stop of the job meanwhile (the launcher has not reported it: it is running) sent the
// group SIGTERM again, which the executor, its handler spent, died of at once: the job ended, and
// the session's next turn could start, while claude was still ending the turn.
test('claude-code executor: a stop after the exit grace ran out does not end the turn before claude has exited', async (t) => {
  const { c, client } = await coordinator(t);
  const claude = fakeClaude(t);
  const { log, waitFor } = captureLog();
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'], exitGraceMs: 300, killGraceMs: 30_000 },
    { env: { ...process.env, PATH: claude.path, FAKE_CLAUDE_LOG: claude.log }, log },
  );
  const job = await client.createJob({ type: 'start_session', session_name: 'told-twice', prompt: 'HANG_AFTER_RESULT TERM_SLOWLY' });
  await waitFor((l) => l['job_id'] === job.job_id && /did not exit; stopping its process group/.test(String(l['msg'])));
  await client.stopJob(job.job_id);
  await waitFor((l) => l['job_id'] === job.job_id && l['msg'] === 'stopping job');
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed', done.error ?? '');
  assert.equal(done.result, 'Answer to: HANG_AFTER_RESULT TERM_SLOWLY');
  const [call] = claude.calls();
  assert.equal(alive(call!.pid), false, 'claude has exited');
});

test('claude-code executor: a claude that never exits after an error result is killed after the exit grace; the job fails', async (t) => {
  const { client, claude } = await setup(t, {}, {}, 300);
  for (const [name, prompt, error] of [
    ['hangs-failing', 'FAIL HANG_AFTER_RESULT', 'claude reported error_during_execution: the fake model refused'],
    ['hangs-out-of-turns', 'MAX_TURNS HANG_AFTER_RESULT', 'claude reported error_max_turns: reached the maximum number of turns (2)'],
  ] as const) {
    const job = await client.createJob({ type: 'start_session', session_name: name, prompt });
    const done = await settled(client, job.job_id);
    assert.equal(done.status, 'failed', `${prompt}: ${done.result}`);
    assert.match(done.error ?? '', new RegExp(`^${error.replace(/[()]/g, '\\$&')}`));
    assert.equal(done.cost_usd, 0.0123, 'its cost counts all the same');
  }
  for (const call of claude.calls()) await gone(call.pid, 'the hung claude');
});

test('claude-code executor: a claude that answers without an init line and hangs leaves no MCP config behind once killed', async (t) => {
  const { client, claude } = await setup(t, {}, {}, 300);
  // claude 2.x answers a resume it cannot do with a result and no init line; the exit grace then
  // ends the turn with SIGKILL, which gives the executor no chance to clean up at exit
  const job = await client.createJob({ type: 'start_session', session_name: 'no-init', prompt: 'NO_CONVERSATION_RESULT HANG_AFTER_RESULT' });
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'failed');
  const [call] = claude.calls();
  await gone(call!.pid, 'the hung claude');
  const mcpArg = call!.args.find((a) => a.startsWith('--mcp-config='))!;
  assert.equal(existsSync(mcpArg.slice('--mcp-config='.length)), false, 'the config file (it may hold the job token) was removed');
});

test('claude-code executor: the per-job agent token hook reaches the MCP server as AGENTQ_TOKEN', async (t) => {
  const { client, claude } = await setup(t, {}, { agentToken: (job) => `token-for-${job.job_id}` });
  const job = await client.createJob({ type: 'start_session', session_name: 'scoped', prompt: 'hi' });
  assert.equal((await settled(client, job.job_id)).status, 'completed');
  const [call] = claude.calls();
  assert.equal(call!.mcpConfig!.mcpServers['agentq']!.env['AGENTQ_TOKEN'], `token-for-${job.job_id}`);
});

test("claude-code executor: the job's max_cost_usd becomes --max-budget-usd; AGENTQ_CLAUDE_MCP_COMMAND names the server", async (t) => {
  // run the executor program on its own, as the launcher does: invocation on stdin, events on stdout
  const claude = fakeClaude(t);
  const invocation: ExecutorInvocation = {
    schema_version: 1,
    mode: 'start',
    job_id: 'job_000000000001',
    session_name: 'budgeted',
    prompt: 'hi',
    agent_name: null,
    project_dir: tempDir(t),
    parent_session_name: null,
    executor_session_id: null,
    max_cost_usd: 2.5,
  };
  const child = spawn(process.execPath, [CLAUDE_EXECUTOR], {
    env: {
      PATH: claude.path,
      FAKE_CLAUDE_LOG: claude.log,
      AGENTQ_COORDINATOR_URL: 'http://127.0.0.1:1',
      AGENTQ_CLAUDE_MCP_COMMAND: `agentq mcp --log-level 'debug'`,
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  child.stdin.end(JSON.stringify(invocation));
  let stdout = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  assert.equal(code, 0, stdout);
  const events = stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string });
  assert.deepEqual(events.at(-1), { type: 'result', text: 'Answer to: hi', usage: FAKE_USAGE, cost_usd: 0.0123, num_turns: 2, duration_api_ms: 4 });
  const [call] = claude.calls();
  assert.deepEqual(call!.args.slice(-2), ['--max-budget-usd', '2.5']);
  const server = call!.mcpConfig!.mcpServers['agentq']!;
  assert.equal(server.command, 'agentq');
  assert.deepEqual(server.args, ['mcp', '--log-level', 'debug']);
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

test("an agent name is one argument of claude's, never an option of its own, whatever it starts with", () => {
  const inv: ExecutorInvocation = {
    schema_version: 1,
    mode: 'start',
    job_id: 'job_0123456789ab',
    session_name: 's',
    prompt: 'p',
    agent_name: '--dangerously-skip-permissions',
    project_dir: null,
    parent_session_name: null,
    executor_session_id: null,
  };
  const args = claudeArgs(inv, { extraArgs: '' });
  assert.deepEqual(args, [...BASE_ARGS, '--agent=--dangerously-skip-permissions']);
});

test('a permission denial without a tool name (or with an odd one) is said as "a tool", not "undefined"', () => {
  assert.deepEqual(
    deniedText({ permission_denials: [{ tool_input: { path: '/etc/x' } }, { tool_name: 7 }, { tool_name: 'Write', tool_input: {} }] }),
    ['[permission denied: a tool] {"path":"/etc/x"}\n', '[permission denied: a tool] {}\n', '[permission denied: Write] {}\n'],
  );
});
