import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecutorInvocation } from '@agentq/protocol';
import { shellWords } from './shell-words.js';

/**
 * The agentq MCP server wired into every Claude Code turn (issue 12): claude gets
 * `--mcp-config FILE` naming `agentq mcp` with the job's variables, so the agent can start, wait
 * for and message other sessions as itself. Off with AGENTQ_CLAUDE_MCP=false.
 *
 * How `agentq` is found: AGENTQ_CLAUDE_MCP_COMMAND (shell words, e.g. `agentq mcp`) if set; else
 * the CLI of the same agentq installation (this node + the absolute path of apps/cli/bin/agentq.js),
 * which needs nothing on PATH; else `agentq mcp` from PATH.
 */

/** The MCP server's name in claude: its tools are `mcp__agentq__<tool>`. */
export const MCP_SERVER_NAME = 'agentq';

export function mcpEnabled(env: Record<string, string | undefined>): boolean {
  const v = (env['AGENTQ_CLAUDE_MCP'] ?? '').trim().toLowerCase();
  return !['0', 'false', 'no', 'off'].includes(v);
}

export function agentqMcpCommand(env: Record<string, string | undefined>): { command: string; args: string[] } {
  const override = env['AGENTQ_CLAUDE_MCP_COMMAND']?.trim();
  if (override) {
    const [command, ...args] = shellWords(override, 'AGENTQ_CLAUDE_MCP_COMMAND');
    if (command) return { command, args };
  }
  // dist/src/executors/ -> apps/launcher/ -> apps/cli/bin/agentq.js
  const bundled = fileURLToPath(new URL('../../../../cli/bin/agentq.js', import.meta.url));
  if (existsSync(bundled)) return { command: process.execPath, args: [bundled, 'mcp'] };
  return { command: 'agentq', args: ['mcp'] };
}

/** The `--mcp-config` document: one stdio server, `agentq mcp`, with the job's variables. */
export function mcpConfig(inv: ExecutorInvocation, env: Record<string, string | undefined>): object {
  const url = env['AGENTQ_COORDINATOR_URL'];
  const serverEnv: Record<string, string> = {
    AGENTQ_SESSION_NAME: inv.session_name,
    AGENTQ_JOB_ID: inv.job_id,
  };
  if (url) {
    serverEnv['AGENTQ_COORDINATOR_URL'] = url;
    // the CLI's own name for the coordinator URL, so that `agentq` needs no --url
    serverEnv['AGENTQ_URL'] = url;
  }
  // the per-job agent token, when the launcher has one (never the launcher's own credential)
  if (env['AGENTQ_TOKEN']) serverEnv['AGENTQ_TOKEN'] = env['AGENTQ_TOKEN'];
  // the CA of an https:// coordinator with a self-signed certificate
  if (env['AGENTQ_CA_FILE']) serverEnv['AGENTQ_CA_FILE'] = env['AGENTQ_CA_FILE'];
  const { command, args } = agentqMcpCommand(env);
  return { mcpServers: { [MCP_SERVER_NAME]: { type: 'stdio', command, args, env: serverEnv } } };
}

/**
 * Write the config to a file only this user can read (it may hold the job's token, which must
 * not show in `ps` as an inline argument would). `remove()` deletes it: the executor calls it as
 * soon as claude has started (it reads its MCP config at start) and again at exit.
 */
export function writeMcpConfig(config: object): { path: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-mcp-'));
  const path = join(dir, 'mcp-config.json');
  writeFileSync(path, JSON.stringify(config), { mode: 0o600 });
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
