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
