import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '@agentq/coordinator';
import type { Job } from '@agentq/protocol';
import { jobEnd, killOnExit } from '@agentq/test-support';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

/** The `agentq` executable, the launcher program and the stand-in agent, as built. */
export const CLI_BIN = fileURLToPath(new URL('../../bin/agentq.js', import.meta.url));
const LAUNCHER_MAIN = fileURLToPath(new URL('../../../launcher/dist/src/main.js', import.meta.url));
const AGENT_EXECUTOR = fileURLToPath(new URL('./fixtures/agent-executor.js', import.meta.url));
/** The repository's root (apps/cli/dist/test/ is four levels down). */
export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

/** This process's environment without AGENTQ_* (a developer's own settings stay out of the test). */
const withoutAgentqVariables = () => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AGENTQ_')));

/**
 * A real coordinator (127.0.0.1, port 0) and a real launcher process running the stand-in agent
 * (fixtures/agent-executor.ts) or `o.executor` in `o.projectDir`, both stopped after the test;
 * `client` talks to the coordinator.
 */
export async function coordinatorAndLauncher(
  t: TestContext,
  o: { executor?: string; projectDir?: string; config?: Parameters<typeof startCoordinator>[0] } = {},
): Promise<{ url: string; client: AgentqClient }> {
  const c = await startCoordinator({ pollTimeoutSeconds: 1, logLevel: 'silent', ...o.config });
  const client = new AgentqClient({ url: c.url });
  const state = mkdtempSync(join(tmpdir(), 'agentq-mcp-test-state-'));
  const child = spawnLauncherProcess(c.url, state, o);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    rmSync(state, { recursive: true, force: true, maxRetries: 5 });
    // the server before the client: closing it answers parked waits, which the client's close
    // would otherwise wait out (a failed test's wait_for_jobs holds for minutes)
    await c.close();
    await client.close();
  });
  // ready once it logs so (it has registered and polls)
  await new Promise<void>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.includes('launcher ready')) resolve();
    });
    void exited.then(() => reject(new Error(`the launcher exited before it was ready: ${stderr}`)));
  });
  return { url: c.url, client };
}

/**
 * The launcher program on `url` running the stand-in agent (or `o.executor`) in `o.projectDir`,
 * with its state in `state`; killed if this test process ends first (a file out of time), which
 * ends its executors too (their lifeline). Logs at info on stdout (`launcher ready`).
 */
export function spawnLauncherProcess(url: string, state: string, o: { executor?: string; projectDir?: string } = {}): ChildProcess {
  const child = spawn(
    process.execPath,
    [LAUNCHER_MAIN, '--url', url, '--executor', o.executor ?? AGENT_EXECUTOR, '--max-jobs', '4', '--project-dir', o.projectDir ?? realpathSync(tmpdir())],
    { env: { ...withoutAgentqVariables(), AGENTQ_LOG_LEVEL: 'info', AGENTQ_STATE_DIR: state }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  killOnExit(child);
  return child;
}

/**
 * `agentq mcp` as a child process, driven by the MCP SDK's own client over stdio. `onStderr` is
 * given each line the server writes on stderr.
 */
export async function mcpClient(t: TestContext, env: Record<string, string>, o: { onStderr?: (line: string) => void } = {}): Promise<Client> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI_BIN, 'mcp'],
    // only what is given: nothing of the test's own environment leaks into the server
    env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? tmpdir(), ...env },
    stderr: 'pipe',
  });
  if (o.onStderr) createInterface({ input: transport.stderr as Readable }).on('line', o.onStderr);
  const client = new Client({ name: 'agentq-test', version: '1.0.0' });
  await client.connect(transport);
  t.after(() => client.close());
  return client;
}

/** `agentq <args>` as a child process with only `env` (and PATH, HOME); stdin is empty. */
export function runAgentq(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BIN, ...args], {
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? tmpdir(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The parts of a tool answer a test looks at. */
export interface ToolAnswer {
  isError: boolean;
  text: string;
  data: Record<string, any>;
}

/** `options.timeout`: how long the client waits for the answer (the SDK's default: 60 s) */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown> = {},
  options: { timeout?: number } = {},
): Promise<ToolAnswer> {
  const r = (await client.callTool({ name, arguments: args }, undefined, options)) as CallToolResult;
  const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  return { isError: r.isError === true, text, data: (r.structuredContent ?? {}) as Record<string, any> };
}

/** A job's end, waited for on the coordinator (no polling; no bound of its own: jobEnd). */
export const ended: (client: AgentqClient, jobId: string) => Promise<Job> = jobEnd;

/** Wait (on the coordinator) until the session is idle with no outcome left to deliver; its jobs, oldest first. */
export async function quiet(client: AgentqClient, name: string): Promise<Job[]> {
  for (;;) {
    const session = await client.getSession(name);
    const jobs = await Promise.all(session.job_ids.map((id) => client.getJob(id)));
    const open = jobs.find((j) => !j.terminal);
    if (!open && session.pending_callbacks.length === 0 && session.callback_job_id === null) return jobs;
    if (open) await ended(client, open.job_id);
  }
}
