import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callTool, coordinatorAndLauncher, ended, mcpClient } from './mcp-helpers.js';

/*
 * `agentq mcp` driven by the MCP SDK's own client over stdio, against a real coordinator and a
 * real launcher process (running the stand-in agent of fixtures/agent-executor.ts).
 */

const TOOLS = ['get_output', 'get_status', 'list_children', 'resume_session', 'send_message', 'start_session', 'stop', 'wait_for_jobs'];

/** A root session `boss` whose first turn has run: the MCP server then acts as that session. */
async function boss(t: import('node:test').TestContext, config: NonNullable<Parameters<typeof coordinatorAndLauncher>[1]>['config'] = {}) {
  const { url, client } = await coordinatorAndLauncher(t, { config });
  const first = await client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'plan the work' });
  assert.equal((await ended(client, first.job_id)).status, 'completed');
  const mcp = await mcpClient(t, { AGENTQ_URL: url, AGENTQ_SESSION_NAME: 'boss', AGENTQ_JOB_ID: first.job_id });
  return { url, client, mcp, first };
}

test('agentq mcp: the eight tools, named exactly, telling the model it is resumed with results and need not poll', async (t) => {
  const { mcp } = await boss(t);
  const { tools } = await mcp.listTools();
  assert.deepEqual(tools.map((x) => x.name).sort(), TOOLS);
  const start = tools.find((x) => x.name === 'start_session')!;
  assert.match(start.description!, /you are resumed with its result/);
  assert.match(start.description!, /do not need to poll/);
  assert.match(start.description!, /child of your session \("boss"\)/);
  // stop says what it may answer, the cut copy of a job deleted since included
  const stop = tools.find((x) => x.name === 'stop')!;
  for (const field of ['outcome', '"already_completed"', 'stopped_count', 'resent: true', 'job_truncated: true', '"unknown"']) {
    assert.ok(stop.description!.includes(field), `stop's description names ${field}`);
  }
  // arguments use the API's field names
  assert.deepEqual(Object.keys(start.inputSchema.properties!).sort(), [
    'agent_name',
    'budget_usd',
    'max_cost_usd',
    'parent_session_name',
    'project_dir',
    'prompt',
    'requires',
    'session_name',
    'timeout_ms',
  ]);
  assert.deepEqual(start.inputSchema.required, ['prompt']);
  const wait = tools.find((x) => x.name === 'wait_for_jobs')!;
  assert.deepEqual(Object.keys(wait.inputSchema.properties!).sort(), ['include_terminal', 'job_ids', 'mode', 'timeout_ms']);
  assert.match(mcp.getInstructions() ?? '', /You are session "boss"/);
});

test('agentq mcp: a child started through start_session inherits the calling session, and its result resumes it', async (t) => {
  const { client, mcp } = await boss(t);
  const started = await callTool(mcp, 'start_session', { session_name: 'worker', prompt: 'count the files' });
  assert.equal(started.isError, false, started.text);
  const child = started.data.job;
  assert.equal(child.parent_session_name, 'boss', 'the parent defaults to the calling session');
  assert.equal(child.session_name, 'worker');
  assert.match(started.text, /^Started session "worker" as your child: job job_[0-9a-f]{12}/);
  assert.match(started.text, /you will be resumed with its result .* you need not poll/);
  assert.equal(started.data.message, started.text, 'the structured content carries the same message');

  // the child runs on the launcher; its outcome comes back to boss as one delivery resume
  const done = await ended(client, child.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'done: count the files');
  const bossSession = await client.getSession('boss');
  const delivery = await ended(client, bossSession.job_ids.at(-1)!);
  assert.deepEqual(delivery.callback_of, [child.job_id]);
  assert.equal(delivery.type, 'resume_session');
  assert.match(delivery.prompt, /<background-task-completed>\n<session>worker<\/session>/);
  assert.match(delivery.prompt, /<result>done: count the files<\/result>/);
  assert.equal(delivery.status, 'completed');

  // a name is made up when none is given, still under the caller
  const unnamed = await callTool(mcp, 'start_session', { prompt: 'another' });
  assert.match(unnamed.data.job.session_name, /^boss-[0-9a-f]{6}$/);
  assert.equal(unnamed.data.job.parent_session_name, 'boss');
  await ended(client, unnamed.data.job.job_id);

  // list_children and get_status show them, with results
  const children = await callTool(mcp, 'list_children');
  assert.equal(children.isError, false, children.text);
  assert.deepEqual(children.data.sessions.map((s: { session_name: string }) => s.session_name).sort(), [unnamed.data.job.session_name, 'worker'].sort());
  assert.match(children.text, /- "worker": idle, last job completed: done: count the files/);
  const status = await callTool(mcp, 'get_status', { session_name: 'boss' });
  assert.deepEqual(status.data.session.children.sort(), [unnamed.data.job.session_name, 'worker'].sort());
  assert.match(status.text, /^Session "boss", a root session: /);

  // resume_session continues the child; boss is told again when it ends
  const resumed = await callTool(mcp, 'resume_session', { session_name: 'worker', prompt: 'now the folders' });
  assert.equal(resumed.data.job.type, 'resume_session');
  assert.match(resumed.text, /you will be resumed with its result/);
  assert.equal((await ended(client, resumed.data.job.job_id)).result, 'done: now the folders');
});

test('agentq mcp: get_status, wait_for_jobs, get_output, send_message and stop answer as documented', async (t) => {
  const { client, mcp, first } = await boss(t);
  const slow = (await callTool(mcp, 'start_session', { session_name: 'slow', prompt: 'UNTIL_STOPPED' })).data.job;

  // output: waits (bounded) for what the agent prints
  const out = await callTool(mcp, 'get_output', { job_id: slow.job_id, offset: 0, wait_ms: 30_000 });
  assert.equal(out.isError, false, out.text);
  assert.equal(out.data.output, 'working on slow\n');
  assert.equal(out.data.next_offset, 16);
  assert.equal(out.data.message, `Output of job ${slow.job_id} (running): bytes 0-16 of 16. Read on with offset 16.`);
  assert.equal(out.text, `${out.data.message}\n\nworking on slow\n`, 'the text is the message, then the output');
  // wait_ms without offset would answer at once: refused, naming it, rather than the agent believing it waited
  const noOffset = await callTool(mcp, 'get_output', { job_id: slow.job_id, wait_ms: 30_000 });
  assert.equal(noOffset.isError, true, noOffset.text);
  assert.match(noOffset.text, /wait_ms: needs offset/);

  // a wait that times out is an answer, not an error: done false, the job is not terminal
  const waited = await callTool(mcp, 'wait_for_jobs', { job_ids: [slow.job_id], timeout_ms: 0 });
  assert.equal(waited.isError, false, waited.text);
  assert.equal(waited.data.done, false);
  assert.deepEqual(waited.data.not_terminal, [slow.job_id]);
  assert.deepEqual(waited.data.terminal, []);
  assert.match(waited.text, /^Not done after 0 s: 1 of 1 job\(s\) still active/);
  assert.match(waited.text, /Call wait_for_jobs again to keep waiting, or end your turn/);

  const status = await callTool(mcp, 'get_status', { job_id: slow.job_id });
  assert.equal(status.data.message, status.text.split('\n')[0]);
  assert.equal(status.data.job.status, 'running');
  assert.match(status.text, /^Job job_\w+ \(start of session "slow"\): running\./);

  // messages: queued for a busy session's next turn; not_found; terminal
  const queued = await callTool(mcp, 'send_message', { session_name: 'slow', text: 'hurry up' });
  assert.equal(queued.isError, false, queued.text);
  assert.equal(queued.data.outcome, 'queued');
  assert.equal(queued.data.job_id, null);
  assert.match(queued.text, /delivered with its next turn \(the session is busy\)/);
  const unknown = await callTool(mcp, 'send_message', { session_name: 'nobody', text: 'hello?' });
  assert.equal(unknown.isError, true);
  assert.equal(unknown.data.outcome, 'not_found');
  assert.equal(unknown.data.error.code, 'session_not_found');
  // a session whose start never ran (stopped while pending) takes no more input
  const never = await client.createJob({ type: 'start_session', session_name: 'never', prompt: 'x', requires: { pool: 'none' } });
  await client.stopJob(never.job_id);
  const closed = await callTool(mcp, 'send_message', { session_name: 'never', text: 'hello?' });
  assert.equal(closed.isError, true);
  assert.equal(closed.data.outcome, 'terminal');
  assert.equal(closed.data.error.code, 'session_closed');
  assert.match(closed.text, /\(session_closed\)\nOutcome terminal: the message was not queued/);
  // an idle session is messaged at once: a delivery resume starts now
  const idle = await callTool(mcp, 'send_message', { session_name: 'boss', text: 'status?' });
  assert.match(idle.data.job_id, /^job_/);
  assert.match(idle.text, /delivered now by job job_\w+ \(the session was idle\)/);

  // stop: not its own turn; a child session; a job that is over
  const self = await callTool(mcp, 'stop', { session_name: 'boss' });
  assert.equal(self.isError, true);
  assert.match(self.text, /that is your own turn/);
  const neither = await callTool(mcp, 'stop', {});
  assert.equal(neither.data.error.code, 'validation_failed');
  const stopping = await callTool(mcp, 'stop', { session_name: 'slow' });
  assert.equal(stopping.isError, false, stopping.text);
  assert.deepEqual(stopping.data.stopped, [{ job_id: slow.job_id, outcome: 'stopping', status: 'stopping', session_name: 'slow' }]);
  const all = await callTool(mcp, 'wait_for_jobs', { job_ids: [slow.job_id, 'job_000000000000'], mode: 'all', timeout_ms: 50_000 });
  assert.equal(all.data.done, true);
  assert.deepEqual(all.data.terminal, [slow.job_id]);
  assert.deepEqual(all.data.not_found, ['job_000000000000']);
  assert.equal(all.data.jobs[0].status, 'stopped');
  assert.match(all.text, /^All 1 job\(s\) have ended\./);
  const over = await callTool(mcp, 'stop', { job_id: slow.job_id });
  assert.equal(over.data.outcome, 'already_completed');
  assert.match(over.text, /already over \(stopped\)/);
  // its own job (AGENTQ_JOB_ID) is its own turn too
  assert.match((await callTool(mcp, 'stop', { job_id: first.job_id })).text, /that is your own turn/);

  // arguments are checked: the SDK refuses what the schema does not allow, as a tool error
  const bad = await callTool(mcp, 'wait_for_jobs', { job_ids: [], timeout_ms: 60_000 });
  assert.equal(bad.isError, true);
  assert.match(bad.text, /job_ids|timeout_ms/);
  const both = await callTool(mcp, 'get_status', { job_id: first.job_id, session_name: 'boss' });
  assert.match(both.text, /give exactly one of job_id and session_name/);
});

test('agentq mcp outside a job: new sessions are roots, and the answer says nobody is resumed', async (t) => {
  const { url, client } = await coordinatorAndLauncher(t);
  const mcp = await mcpClient(t, { AGENTQ_COORDINATOR_URL: url });
  const { tools } = await mcp.listTools();
  assert.match(tools.find((x) => x.name === 'start_session')!.description!, /Outside an agentq job/);
  const started = await callTool(mcp, 'start_session', { session_name: 'solo', prompt: 'alone' });
  assert.equal(started.data.job.parent_session_name, null);
  assert.match(started.text, /as a root session.*It has no parent, so no session is resumed with its result/);
  assert.equal((await ended(client, started.data.job.job_id)).status, 'completed');
  const list = await callTool(mcp, 'list_children');
  assert.equal(list.isError, true);
  assert.match(list.text, /session_name is required outside an agentq job/);
});

test('agentq mcp: wait_for_jobs reads the snapshots that did not fit in the coordinator\'s answer (MAX_ANSWER_BYTES)', async (t) => {
  const { mcp } = await boss(t, { maxAnswerBytes: 1024 });
  const ids: string[] = [];
  for (const n of ['a', 'b', 'c']) {
    const started = await callTool(mcp, 'start_session', { session_name: n, prompt: `UNTIL_STOPPED ${n.repeat(2000)}` });
    assert.equal(started.isError, false, started.text);
    ids.push(started.data.job.job_id);
  }
  const waited = await callTool(mcp, 'wait_for_jobs', { job_ids: ids, mode: 'all', timeout_ms: 0 });
  assert.equal(waited.isError, false, waited.text);
  assert.deepEqual(waited.data.jobs.map((j: { job_id: string }) => j.job_id), ids);
  assert.deepEqual([...waited.data.terminal, ...waited.data.not_terminal].sort(), [...ids].sort());
  assert.match(waited.text, /of 3 job\(s\) still active/);
});
