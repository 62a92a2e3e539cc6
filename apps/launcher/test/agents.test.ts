import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '@agentq/coordinator';
import type { Job, Session, Usage } from '@agentq/protocol';
import { resolveExecutor } from '../src/index.js';
import { captureLog, closeAfter, COORDINATOR_OPTIONS, fixture, launcher, settled, tempDir } from './helpers.js';
import { recordingLogger, writeTokens } from './security-helpers.js';

/*
 * Agents that start agents, end to end (issue 12): a coordinator with tokens, a claude-code
 * launcher whose `claude` is the fake (fixtures/fake-claude.ts). The fake starts the MCP server
 * its --mcp-config names (`agentq mcp` with the job's variables and agent token) and calls its
 * tools with the SDK's client, as claude would; the children it starts resume it with their results.
 */

/** What the fake reports for every turn (its `result` event, as claude's). */
const FAKE_USAGE: Usage = { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 3, cache_creation_input_tokens: 4 };
const FAKE_COST = 0.0123;
const times = (u: Usage, n: number): Usage => ({
  input_tokens: u.input_tokens * n,
  output_tokens: u.output_tokens * n,
  cache_read_input_tokens: u.cache_read_input_tokens * n,
  cache_creation_input_tokens: u.cache_creation_input_tokens * n,
});
const near = (a: number, b: number, what: string) => assert.ok(Math.abs(a - b) < 1e-9, `${what}: ${a} != ${b}`);

interface Call {
  prompt: string;
  mcpConfig: { mcpServers: Record<string, { env: Record<string, string> }> } | null;
}

/** A `claude` on PATH that runs the compiled fake, and the log of its calls. */
function fakeClaude(t: TestContext): { path: string; log: string; calls: () => Call[] } {
  const bin = tempDir(t);
  const log = join(bin, 'calls.jsonl');
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${process.execPath}" "${fixture('fake-claude.js')}" "$@"\n`);
  chmodSync(join(bin, 'claude'), 0o755);
  const calls = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Call) : []);
  return { path: `${bin}:${process.env['PATH']}`, log, calls };
}

/** Wait (on the coordinator) until the session is idle with no outcome left to deliver; its jobs. */
async function quiet(client: AgentqClient, name: string): Promise<{ session: Session; jobs: Job[] }> {
  for (;;) {
    const session = await client.getSession(name);
    const jobs = await Promise.all(session.job_ids.map((id) => client.getJob(id)));
    const open = jobs.find((j) => !j.terminal);
    if (!open && session.pending_callbacks.length === 0 && session.callback_job_id === null) {
      // read again: the session read before its jobs may predate their ends (and their usage)
      const after = await client.getSession(name);
      const same = after.job_ids.join() === session.job_ids.join();
      if (same && after.pending_callbacks.length === 0 && after.callback_job_id === null) return { session: after, jobs };
      continue;
    }
    if (open) await settled(client, open.job_id);
  }
}

test('a claude-code agent starts two children through agentq mcp with its scoped token; both results resume it; usage and cost add up', async (t) => {
  const dir = tempDir(t);
  const tokens = writeTokens(dir, ['client', 'launcher']);
  const coordinatorLogs = recordingLogger();
  const c = closeAfter(
    t,
    await startCoordinator(
      { ...COORDINATOR_OPTIONS, logLevel: 'trace', authTokensFile: tokens.file },
      { logger: coordinatorLogs.log },
    ),
  );
  const client = new AgentqClient({ url: c.url, token: tokens.secrets['client']! });
  t.after(() => client.close());
  const claude = fakeClaude(t);
  const launcherLogs = captureLog();
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'], token: tokens.secrets['launcher']! },
    { log: launcherLogs.log, env: { ...process.env, PATH: claude.path, FAKE_CLAUDE_LOG: claude.log } },
  );
  // a session that is not the agent's: out of its reach
  await client.createJob({ type: 'start_session', session_name: 'bystander', prompt: 'unrelated', requires: { pool: 'elsewhere' } });

  const calls = [
    { name: 'start_session', arguments: { session_name: 'scout-left', prompt: 'look left' } },
    { name: 'start_session', arguments: { session_name: 'scout-right', prompt: 'look right' } },
    // out of scope: a root session, a session of someone else
    { name: 'start_session', arguments: { session_name: 'escapee', parent_session_name: null, prompt: 'run away' } },
    { name: 'get_status', arguments: { session_name: 'bystander' } },
  ];
  const lead = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: `Delegate. MCP_CALLS ${JSON.stringify(calls)}` });
  const leadDone = await settled(client, lead.job_id);
  assert.equal(leadDone.status, 'completed', leadDone.error ?? '');
  const answers = JSON.parse(leadDone.result!.slice('MCP answers: '.length)) as Array<{
    name: string;
    isError: boolean;
    structured: { message: string; job?: Job; error?: { code: string } };
  }>;
  // the children: started as children of the calling session, by its agent
  for (const [i, name] of [[0, 'scout-left'], [1, 'scout-right']] as const) {
    assert.equal(answers[i]!.isError, false, answers[i]!.structured.message);
    assert.equal(answers[i]!.structured.job!.session_name, name);
    assert.equal(answers[i]!.structured.job!.parent_session_name, 'lead');
    assert.match(answers[i]!.structured.message, /you need not poll/);
  }
  // the agent token's scope: no root sessions, nothing of others
  assert.equal(answers[2]!.isError, true);
  assert.equal(answers[2]!.structured.error!.code, 'forbidden');
  assert.equal(answers[3]!.isError, true);
  assert.equal(answers[3]!.structured.error!.code, 'forbidden');
  await assert.rejects(client.getSession('escapee'), /session escapee not found/);
  const left = await client.getJob(answers[0]!.structured.job!.job_id);
  assert.equal(left.created_by, `agent:${lead.job_id}`);

  // the MCP server got the job's own token (not the launcher's), which died with the job
  const leadCall = claude.calls().find((x) => x.prompt.startsWith('Delegate.'))!;
  const agentToken = leadCall.mcpConfig!.mcpServers['agentq']!.env['AGENTQ_TOKEN']!;
  assert.match(agentToken, new RegExp(`^agt_${lead.job_id}\\.`));
  const asAgent = new AgentqClient({ url: c.url, token: agentToken });
  t.after(() => asAgent.close());
  await assert.rejects(asAgent.getSession('lead'), (e: Error & { status?: number }) => e.status === 401);

  // both children ran, and their outcomes came back to the lead as delivery resumes
  // (children first: a child's outcome is queued on its parent in the same commit as its end)
  const scouts = await Promise.all(['scout-left', 'scout-right'].map((n) => quiet(client, n)));
  const { session, jobs } = await quiet(client, 'lead');
  for (const s of scouts) assert.equal(s.jobs[0]!.result, `Answer to: look ${s.session.session_name.slice('scout-'.length)}`);
  const deliveries = jobs.filter((j) => j.callback_of !== null);
  assert.ok(deliveries.length >= 1 && deliveries.length <= 2, `one or two delivery resumes: ${deliveries.length}`);
  assert.deepEqual(deliveries.flatMap((j) => j.callback_of!).sort(), scouts.map((s) => s.jobs[0]!.job_id).sort());
  for (const d of deliveries) {
    assert.equal(d.status, 'completed', d.error ?? '');
    assert.match(d.prompt, /<background-task-completed>/);
  }
  const delivered = deliveries.map((d) => d.prompt).join('\n');
  assert.match(delivered, /<result>Answer to: look left<\/result>/);
  assert.match(delivered, /<result>Answer to: look right<\/result>/);

  // usage and cost: each job as the fake reported it, summed per session and per tree
  for (const j of [...jobs, ...scouts.flatMap((s) => s.jobs)]) {
    assert.deepEqual(j.usage, FAKE_USAGE, j.job_id);
    near(j.cost_usd!, FAKE_COST, `${j.job_id} cost`);
  }
  assert.deepEqual(session.usage, times(FAKE_USAGE, jobs.length));
  near(session.cost_usd, FAKE_COST * jobs.length, 'lead cost');
  for (const s of scouts) {
    assert.deepEqual(s.session.usage, FAKE_USAGE);
    assert.deepEqual(s.session.tree_usage, FAKE_USAGE);
  }
  assert.deepEqual(session.tree_usage, times(FAKE_USAGE, jobs.length + 2), 'the tree: the lead and its two children');
  near(session.tree_cost_usd, FAKE_COST * (jobs.length + 2), 'tree cost');

  // no agent token in any log line, the launcher's or the coordinator's
  const secrets = claude.calls().flatMap((x) => {
    const token = x.mcpConfig?.mcpServers['agentq']?.env['AGENTQ_TOKEN'];
    return token ? [token.split('.')[1]!] : [];
  });
  assert.equal(secrets.length, claude.calls().length, 'every turn had its token');
  assert.ok(launcherLogs.raw.length > 0 && coordinatorLogs.lines.length > 0);
  for (const line of [...launcherLogs.raw, ...coordinatorLogs.lines]) {
    for (const secret of secrets) assert.ok(!line.includes(secret), `an agent token in a log line: ${line.slice(0, 200)}`);
  }
});
