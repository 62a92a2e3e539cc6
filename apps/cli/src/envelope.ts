import type { CliEnvelope } from '@agentq/protocol';
import type { CliIo } from './context.js';

/** One `--json` envelope, on one line of stdout. */
export function writeJson(io: CliIo, envelope: CliEnvelope<unknown>): void {
  io.stdout.write(`${JSON.stringify(envelope)}\n`);
}
