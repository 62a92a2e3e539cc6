import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { coordinator } from './helpers.js';
import { callTool, mcpClient } from './mcp-helpers.js';

/* The MCP tools' arguments: the API's names, limits and nulls. */

describe('agentq mcp: arguments', () => {
  it('start_session and resume_session take null where the API does: timeout_ms null is no timeout, despite a default', async (t) => {
    const c = await coordinator(t, { defaultJobTimeoutMs: 3_600_000 });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const nulls = { agent_name: null, project_dir: null, timeout_ms: null, requires: null, max_cost_usd: null };

    const started = await callTool(mcp, 'start_session', { session_name: 'n', prompt: 'p', budget_usd: null, ...nulls });
    assert.equal(started.isError, false, started.text);
    const job = await c.client.getJob(started.data.job.job_id);
    assert.deepEqual([job.timeout_ms, job.requires, job.max_cost_usd, job.agent_name], [null, null, null, null]);

    const resumed = await callTool(mcp, 'resume_session', { session_name: 'n', prompt: 'again', ...nulls });
    assert.equal(resumed.isError, false, resumed.text);
    assert.equal((await c.client.getJob(resumed.data.job.job_id)).timeout_ms, null);

    // left out, the coordinator's default applies
    const plain = await callTool(mcp, 'start_session', { session_name: 'd', prompt: 'p' });
    assert.equal((await c.client.getJob(plain.data.job.job_id)).timeout_ms, 3_600_000);
  });
});

describe('agentq mcp: a call refused as given says so as every error does: outcome refused, the failing field', () => {
  it('arguments that fail the schema, on every tool: validation_failed with the field, outcome refused, and nothing done', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    // one call per tool, each with one argument the tool's schema refuses
    const bad: Record<string, { args: Record<string, unknown>; field: string }> = {
      start_session: { args: { session_name: 'b' }, field: 'prompt' },
      resume_session: { args: { session_name: 'a', prompt: 'again', timeout_ms: 0 }, field: 'timeout_ms' },
      send_message: { args: { session_name: 'a', text: '' }, field: 'text' },
      get_status: { args: { job_id: job.job_id, result_offset: -1 }, field: 'result_offset' },
      wait_for_jobs: { args: { job_ids: [] }, field: 'job_ids' },
      list_children: { args: { session_name: 'a', limit: 0 }, field: 'limit' },
      get_output: { args: { job_id: job.job_id, limit_bytes: 0 }, field: 'limit_bytes' },
      stop: { args: { job_id: job.job_id, tree: 'yes' }, field: 'tree' },
    };
    const { tools } = await mcp.listTools();
    assert.deepEqual(Object.keys(bad).sort(), tools.map((tool) => tool.name).sort(), 'a call for every tool');
    for (const [name, { args, field }] of Object.entries(bad)) {
      const r = await callTool(mcp, name, args);
      assert.equal(r.isError, true, `${name}: ${r.text}`);
      assert.equal(r.data.outcome, 'refused', `${name}: ${r.text}`);
      assert.equal(r.data.error.code, 'validation_failed', name);
      assert.equal(r.data.error.details.field, field, name);
      assert.match(r.data.error.message, new RegExp(`^${field}: `), name);
      assert.match(r.text, /Outcome refused/, name);
      assert.equal(r.data.message, r.text, `${name}: the structured message is the text`);
    }
    // a field nested in an array is named the way the coordinator names it
    const nested = await callTool(mcp, 'wait_for_jobs', { job_ids: [job.job_id, ''] });
    assert.equal(nested.data.error.details.field, 'job_ids[1]', nested.text);
    // nothing was done: no session b, no second job of a, no message, the job not stopped
    await assert.rejects(c.client.getSession('b'), { code: 'session_not_found' });
    const a = await c.client.getSession('a');
    assert.deepEqual([a.job_ids, a.pending_messages.length], [[job.job_id], 0]);
    assert.equal((await c.client.getJob(job.job_id)).status, 'pending');
    // the schema still reaches the client: it is what a model builds its calls from
    const wait = tools.find((tool) => tool.name === 'wait_for_jobs')!;
    assert.deepEqual((wait.inputSchema.properties as Record<string, { minItems?: number }>)['job_ids']!.minItems, 1);
  });

  it('an argument the tool does not take (a misspelt name) is refused naming it, not dropped: nothing is done', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'parent', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    // `parent` for parent_session_name: dropped, the call would start a root session that
    // reports to no one; `timeout` for timeout_ms: a job without the timeout asked for
    const r = await callTool(mcp, 'start_session', { session_name: 'child', prompt: 'p', parent: 'parent', timeout: 5000 });
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.outcome, r.data.error.code, r.data.error.details.field], ['refused', 'validation_failed', 'parent']);
    assert.match(r.data.error.message, /^parent: is not a known argument \(known: .*parent_session_name.*\); timeout: is not a known argument/);
    await assert.rejects(c.client.getSession('child'), { code: 'session_not_found' });
    // and the tools say so in the schema a model builds its calls from
    const { tools } = await mcp.listTools();
    for (const tool of tools) assert.equal(tool.inputSchema['additionalProperties'], false, tool.name);
  });

  it('so does a call the tool itself refuses (get_status with both job_id and session_name), and a tool that does not exist', async (t) => {
    const c = await coordinator(t);
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const both = await callTool(mcp, 'get_status', { job_id: 'job_0123456789ab', session_name: 'a' });
    assert.equal(both.isError, true, both.text);
    assert.deepEqual([both.data.outcome, both.data.error.code], ['refused', 'validation_failed']);
    const none = await callTool(mcp, 'start_sessions', { prompt: 'x' });
    assert.equal(none.isError, true, none.text);
    assert.deepEqual([none.data.outcome, none.data.error.code], ['refused', 'tool_not_found']);
    assert.match(none.text, /the tools are .*start_session/);
  });
});
