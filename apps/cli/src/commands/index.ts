import type { Command } from 'commander';
import type { Act } from '../program.js';
import { registerCancel } from './cancel.js';
import { registerCompletion } from './completion.js';
import { registerHealth } from './health.js';
import { registerLaunchers } from './launchers.js';
import { registerList } from './list.js';
import { registerMcp } from './mcp.js';
import { registerOutput } from './output.js';
import { registerSend } from './send.js';
import { registerSessions } from './sessions.js';
import { registerStart } from './start.js';
import { registerStatus } from './status.js';
import { registerToken } from './token.js';
import { registerWait } from './wait.js';
import { registerWatch } from './watch.js';

/** Every command, in the groups and order `agentq --help` lists them. */
export function registerCommands(program: Command, act: Act): void {
  program.commandsGroup('Jobs:');
  registerStart(program, act);
  registerStatus(program, act);
  registerWait(program, act);
  registerCancel(program, act);
  registerList(program, act);
  registerOutput(program, act);

  program.commandsGroup('Sessions:');
  registerSessions(program, act);
  registerSend(program, act);

  program.commandsGroup('For agents:');
  registerMcp(program, act);

  program.commandsGroup('Coordinator and launchers:');
  registerLaunchers(program, act);
  registerHealth(program, act);
  registerWatch(program, act);

  program.commandsGroup('Setup:');
  registerToken(program, act);
  registerCompletion(program, act);
}
