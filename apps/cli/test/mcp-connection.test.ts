import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { coordinator, deadUrl, whenCalled, type TestCoordinator } from './helpers.js';
import { CLI_BIN, callTool, mcpClient, runAgentq, type ToolAnswer } from './mcp-helpers.js';

/*
 * How `agentq mcp` reaches the coordinator: the URL it is given (a comma list too, as a launcher
 * with several coordinators hands every job), its CA file, and coordinators that go away.
 */

describe('agentq mcp: the coordinator URL', () => {
  it('takes a comma list of coordinators, as every command does, and moves past one that cannot be reached', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'listed', prompt: 'p' });
    const list = `${await deadUrl()},${c.url}`;
    // AGENTQ_URL is what the launcher sets for a job; AGENTQ_COORDINATOR_URL is read when it is not set
    for (const env of [{ AGENTQ_URL: list }, { AGENTQ_COORDINATOR_URL: list }] as Record<string, string>[]) {
      const mcp = await mcpClient(t, env);
      const status = await callTool(mcp, 'get_status', { job_id: job.job_id });
      assert.equal(status.isError, false, status.text);
      assert.equal(status.data.job.job_id, job.job_id);
    }
  });

  it('refuses a URL with a path, or an item of a list that is not http(s), as a usage error (exit 2)', async () => {
    const withPath = await runAgentq(['mcp'], { AGENTQ_URL: 'http://127.0.0.1:8765/api' });
    assert.equal(withPath.code, 2, withPath.stderr);
    assert.match(withPath.stderr, /must have no path or query/);
    assert.equal(withPath.stdout, '', 'nothing on the protocol stream');
    const notHttp = await runAgentq(['mcp', '--url', 'http://127.0.0.1:8765,ftp://x'], {});
    assert.equal(notHttp.code, 2, notHttp.stderr);
    assert.match(notHttp.stderr, /must be http/);
  });

  it('refuses a CA file that cannot be read as a usage error (exit 2)', async () => {
    const r = await runAgentq(['mcp', '--ca-file', '/nonexistent/ca.pem'], { AGENTQ_URL: 'https://127.0.0.1:8765' });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^agentq: cannot read the CA file \/nonexistent\/ca\.pem/);
    assert.equal(r.stdout, '', 'nothing on the protocol stream');
  });
});

describe('agentq mcp: input the SDK does not answer', () => {
  it('says so on stderr: a line that is not JSON-RPC is skipped; a message past the 10 MB buffer ends the server with exit 1', async (t) => {
    const c = await coordinator(t);
    const child = spawn(process.execPath, [CLI_BIN, 'mcp'], { env: { PATH: process.env['PATH'] ?? '', AGENTQ_URL: c.url }, stdio: ['pipe', 'pipe', 'pipe'] });
    t.after(() => child.kill('SIGKILL'));
    let stderr = '';
    const said = (what: RegExp) =>
      new Promise<void>((resolve) => {
        const check = () => what.test(stderr) && resolve();
        child.stderr.setEncoding('utf8').on('data', (s: string) => {
          stderr += s;
          check();
        });
        check();
      });
    const exited = once(child, 'exit');
    child.stdout.resume();
    // the server stops reading once its buffer overflows: the rest of the write finds no reader
    child.stdin.on('error', () => {});
    const skipped = said(/agentq mcp: .*JSON/);
    child.stdin.write('this is not json\n');
    await skipped;
    assert.equal(child.exitCode, null, 'still serving');
    child.stdin.write(Buffer.alloc(11 * 1024 * 1024, 'x'));
    const [code] = (await exited) as [number | null];
    assert.equal(code, 1, stderr);
    assert.match(stderr, /agentq mcp: ReadBuffer exceeded maximum size/);
    assert.match(stderr, /the MCP connection failed/);
  });
});

/**
 * A job on a fresh coordinator, and an `agentq mcp` server on it (`o.onStderr`: given each line
 * the server writes on stderr).
 */
async function coordinatorWithJob(t: TestContext, o: { onStderr?: (line: string) => void } = {}) {
  const c = await coordinator(t);
  const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
  const mcp = await mcpClient(t, { AGENTQ_URL: c.url }, o);
  return { c, job, mcp };
}

/**
 * A wait_for_jobs on `jobId` through `mcp`, parked on the coordinator when the coordinator restarts
 * (the parked wait is answered early, not done, then the coordinator is away for a moment); the job
 * is stopped once it is back. Resolves with the wait's answer.
 */
async function waitThroughRestart(c: TestCoordinator, mcp: Client, jobId: string): Promise<ToolAnswer> {
  const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
  const waiting = callTool(mcp, 'wait_for_jobs', { job_ids: [jobId], timeout_ms: 50_000 });
  await parked;
  await c.restart();
  await c.client.stopJob(jobId);
  return waiting;
}

describe('agentq mcp: a coordinator restart during wait_for_jobs', () => {
  it('the wait goes on once the coordinator is back, instead of answering "not done" early', async (t) => {
    const { c, job, mcp } = await coordinatorWithJob(t);
    const r = await waitThroughRestart(c, mcp, job.job_id);
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.done, true, r.text);
    assert.deepEqual(r.data.terminal, [job.job_id]);
    assert.match(r.text, /^Done: 1 of 1 job\(s\) have ended\./);
  });

  it('says that it waited through the outage: coordinator_outage and a note in its answer, each pause and the return on stderr', async (t) => {
    const lines: string[] = [];
    let returned!: () => void;
    const sawReturn = new Promise<void>((resolve) => (returned = resolve));
    const { c, job, mcp } = await coordinatorWithJob(t, {
      onStderr: (line) => {
        lines.push(line);
        if (/^agentq mcp: wait_for_jobs: the coordinator answered again after [\d.]+ s/.test(line)) returned();
      },
    });
    // a wait that met no outage says nothing of one
    const calm = await callTool(mcp, 'wait_for_jobs', { job_ids: [job.job_id], timeout_ms: 0 });
    assert.equal(calm.isError, false, calm.text);
    assert.equal(calm.data.coordinator_outage, undefined);
    assert.doesNotMatch(calm.text, /could not be reached/);

    const r = await waitThroughRestart(c, mcp, job.job_id);
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.done, true, r.text);
    const outage = r.data.coordinator_outage;
    assert.equal(outage?.back, true, r.text);
    assert.ok(outage.retries >= 1, r.text);
    assert.equal(typeof outage.unreachable_ms, 'number');
    assert.match(outage.last_error, /unreachable/);
    assert.match(r.text, /Note: the coordinator could not be reached for [\d.]+ s(?: and refused calls for now for [\d.]+ s)? during this call \(.*tried again \d+ time\(s\)\); it was waited for/);
    await sawReturn;
    assert.ok(
      lines.some((line) => /^agentq mcp: wait_for_jobs: coordinator at .* unreachable.*; trying again in \d+ ms$/.test(line)),
      lines.join('\n'),
    );
  });

  // the coordinator is known to be there: this server has reached it (an earlier tool call), or
  // it serves an agentq job (its launcher took the job from that coordinator; each turn of an
  // agent starts a server of its own, whose first call may be a wait)
  for (const known of ['answered this server', 'gave the job this server serves'] as const) {
    it(`a wait that begins while the coordinator is away, when it ${known}, waits for it to come back`, async (t) => {
      const c = await coordinator(t);
      const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
      const lead = await c.client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'x' });
      const mcp =
        known === 'answered this server'
          ? await mcpClient(t, { AGENTQ_URL: c.url })
          : await mcpClient(t, { AGENTQ_URL: c.url, AGENTQ_SESSION_NAME: 'lead', AGENTQ_JOB_ID: lead.job_id });
      if (known === 'answered this server') {
        const status = await callTool(mcp, 'get_status', { job_id: job.job_id });
        assert.equal(status.isError, false, status.text);
      }
      let down!: () => void;
      const isDown = new Promise<void>((resolve) => (down = resolve));
      const back = c.restart({ whileDown: down });
      await isDown;
      // the wait's first call finds the coordinator away (restarting): an outage, not a wrong URL
      const waiting = callTool(mcp, 'wait_for_jobs', { job_ids: [job.job_id], timeout_ms: 50_000 });
      await back;
      await c.client.stopJob(job.job_id);
      const r = await waiting;
      assert.equal(r.isError, false, r.text);
      assert.equal(r.data.done, true, r.text);
      assert.deepEqual(r.data.terminal, [job.job_id]);
    });
  }
});

/** A "coordinator" that takes connections and requests but never answers (paused, or cut off by the network). */
async function silentCoordinator(t: TestContext): Promise<string> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.resume();
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

describe('agentq mcp: a coordinator that does not answer', () => {
  it('ends wait_for_jobs and get_output with wait_ms soon after their time, before the client gives up', async (t) => {
    const mcp = await mcpClient(t, { AGENTQ_URL: await silentCoordinator(t) });
    // the client gives up 15 s after the wait's own time (the SDK's client: 60 s, 10 s past the
    // longest wait); the client library's long-poll slack alone is 30 s past it
    const client = { timeout: 1_000 + 15_000 };
    const [wait, output] = await Promise.all([
      callTool(mcp, 'wait_for_jobs', { job_ids: ['job_0123456789ab'], timeout_ms: 1_000 }, client),
      callTool(mcp, 'get_output', { job_id: 'job_0123456789ab', offset: 0, wait_ms: 1_000 }, client),
    ]);
    for (const r of [wait, output]) {
      assert.equal(r.isError, true, r.text);
      assert.equal(r.data.error.code, 'coordinator_unreachable', r.text);
    }
  });
});

describe('agentq mcp: tool calls parked in long-polls', () => {
  it('do not hold up the other tool calls, however many there are', async (t) => {
    const { c, job, mcp } = await coordinatorWithJob(t);
    const WAITS = 12;
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0, WAITS);
    let answered = 0;
    const waits = Array.from({ length: WAITS }, () =>
      callTool(mcp, 'wait_for_jobs', { job_ids: [job.job_id], timeout_ms: 50_000 }).finally(() => answered++),
    );
    // every wait is parked on the coordinator at once: none waits for a connection
    await parked;
    const status = await callTool(mcp, 'get_status', { job_id: job.job_id });
    assert.equal(status.isError, false, status.text);
    assert.equal(answered, 0, 'get_status was answered while every wait was still parked');
    await c.client.stopJob(job.job_id);
    for (const w of await Promise.all(waits)) assert.equal(w.data.done, true, w.text);
  });
});

describe('agentq mcp: stdin ends while calls are in flight', () => {
  it('answers them first (stdout is still open), then exits 0', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'piped', prompt: 'x' });
    const child = spawn(process.execPath, [CLI_BIN, 'mcp'], { env: { PATH: process.env['PATH'] ?? '', AGENTQ_URL: c.url }, stdio: ['pipe', 'pipe', 'pipe'] });
    t.after(() => child.kill('SIGKILL'));
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    const exited = once(child, 'exit');
    const parked = whenCalled(c.core, 'waitJobs', (_ids: string[], timeoutMs: number) => timeoutMs > 0);
    const message = (m: object) => `${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`;
    // as `printf '%s\n' "$init" "$initialized" "$call" ... | agentq mcp` sends them: stdin ends at once
    child.stdin.end(
      message({ id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'pipe', version: '1' } } }) +
        message({ method: 'notifications/initialized' }) +
        message({ id: 2, method: 'tools/call', params: { name: 'get_status', arguments: { job_id: job.job_id } } }) +
        message({ id: 3, method: 'tools/call', params: { name: 'wait_for_jobs', arguments: { job_ids: [job.job_id], timeout_ms: 50_000 } } }),
    );
    // the wait is parked on the coordinator after stdin has ended: the job ends, the wait answers
    // (a server that dropped its calls at stdin's end has exited instead)
    await Promise.race([parked, exited]);
    await c.client.stopJob(job.job_id);
    const [code] = (await exited) as [number | null];
    assert.equal(code, 0, stderr);
    const answers = new Map(
      stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { id: number; result?: { isError?: boolean; structuredContent?: Record<string, unknown> } })
        .map((m) => [m.id, m.result]),
    );
    assert.deepEqual([...answers.keys()].sort(), [1, 2, 3], stdout);
    assert.equal((answers.get(2)?.structuredContent?.['job'] as { job_id?: string } | undefined)?.job_id, job.job_id, stdout);
    assert.notEqual(answers.get(3)?.isError, true, stdout);
    assert.equal(answers.get(3)?.structuredContent?.['done'], true, stdout);
  });
});
