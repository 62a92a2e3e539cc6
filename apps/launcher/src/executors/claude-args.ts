import type { ExecutorInvocation } from '@agentq/protocol';
import { MCP_SERVER_NAME } from './claude-mcp.js';
import { shellWords } from './shell-words.js';

/**
 * The claude command line for one turn:
 *
 *   claude -p --output-format stream-json --verbose [--mcp-config=FILE --allowedTools=mcp__agentq]
 *          [--resume ID] [--agent=NAME] [--max-budget-usd N] [AGENTQ_CLAUDE_ARGS...]
 *
 * `--mcp-config` and `--allowedTools` take several values in claude: written with `=`, each takes
 * exactly one, and what follows is never read as a second one. The agent's name (a client's
 * choice) is written with `=` too: one starting with `-` is still the name, never an option. The agentq tools are allowed by
 * default: they are the point of wiring the server in, and act only on the coordinator.
 */
export function claudeArgs(inv: ExecutorInvocation, o: { extraArgs: string; mcpConfigPath?: string }): string[] {
  const args = ['-p', '--output-format', 'stream-json', '--verbose'];
  if (o.mcpConfigPath) args.push(`--mcp-config=${o.mcpConfigPath}`, `--allowedTools=mcp__${MCP_SERVER_NAME}`);
  if (inv.mode === 'resume') {
    if (!inv.executor_session_id) {
      throw new Error(`cannot resume session "${inv.session_name}": no Claude Code session id is known for it`);
    }
    args.push('--resume', inv.executor_session_id);
  }
  if (inv.agent_name) args.push(`--agent=${inv.agent_name}`);
  if (inv.max_cost_usd != null) args.push('--max-budget-usd', String(inv.max_cost_usd));
  args.push(...shellWords(o.extraArgs, 'AGENTQ_CLAUDE_ARGS'));
  return args;
}
