import { readFileSync } from 'node:fs';
import { AgentqClient } from '@agentq/client';
import { CliExitCodes, type CliEnvelope } from '@agentq/protocol';
import { parseCommandArgs, splitCommand, stringOpt } from './args.js';
import { COMMANDS } from './commands/index.js';
import type { CliIo, CommandContext, CommandResult } from './context.js';
import { toCliFailure, UsageError } from './errors.js';
import { commandHelp, DEFAULT_URL, mainHelp } from './help.js';

/**
 * The whole CLI as a function: parse `argv` (without `node agentq`), run the command, print the
 * result (text, or one `--json` envelope on stdout) and resolve with the exit code. Never
 * throws and never exits the process: `main.ts` does that.
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  const json = argv.includes('--json');
  try {
    const result = await dispatch(argv, io, json);
    print(io, json, result);
    return result.exitCode;
  } catch (err) {
    const { error, exitCode } = toCliFailure(err);
    if (json) {
      writeJson(io, { ok: false, error });
    } else {
      io.stderr.write(`agentq: ${error.message}${error.code === 'usage_error' ? '' : ` (${error.code})`}\n`);
      if (err instanceof UsageError) {
        io.stderr.write(`Run 'agentq ${err.command ? `${err.command} ` : ''}--help' for usage.\n`);
      }
    }
    return exitCode;
  }
}

async function dispatch(argv: readonly string[], io: CliIo, json: boolean): Promise<CommandResult> {
  const { command, rest } = splitCommand(argv);
  if (command === undefined) {
    if (rest.includes('--version')) return helpResult(version());
    if (rest.includes('--help') || rest.includes('-h')) return helpResult(mainHelp());
    throw new UsageError(rest.length === 0 ? 'missing command' : `missing command before '${rest[0]}'`);
  }
  if (command === 'help') {
    const topic = rest.find((a) => !a.startsWith('-'));
    if (topic !== undefined && !COMMANDS[topic]) throw new UsageError(`no help for unknown command '${topic}'`);
    return helpResult(topic === undefined ? mainHelp() : commandHelp(topic));
  }
  const spec = COMMANDS[command];
  if (!spec) throw new UsageError(`unknown command '${command}'`);
  const args = parseCommandArgs(command, spec.options, rest);
  if (args.values.help === true) return helpResult(commandHelp(command));

  const flagUrl = stringOpt(args, 'url');
  // an empty AGENTQ_URL counts as unset
  const url = checkUrl(flagUrl ?? (io.env.AGENTQ_URL || DEFAULT_URL), command);
  // few connections: a CLI run makes one request at a time, plus the progress event stream
  const client = new AgentqClient({ url, connections: 8 });
  const ctx: CommandContext = {
    client,
    io,
    json,
    url,
    urlFromFlag: flagUrl !== undefined,
    signal: io.signal,
    now: io.now ?? Date.now,
  };
  try {
    return await spec.run(ctx, args);
  } finally {
    // after Ctrl-C a long-poll may still be open: don't wait for the coordinator to answer it
    await (io.signal?.aborted ? client.destroy() : client.close());
  }
}

function helpResult(text: string): CommandResult {
  return { data: { help: text }, exitCode: CliExitCodes.ok, text: () => text };
}

function print(io: CliIo, json: boolean, result: CommandResult): void {
  if (json) return writeJson(io, { ok: true, data: result.data });
  const text = result.text();
  if (text !== '') io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}

function writeJson(io: CliIo, envelope: CliEnvelope<unknown>): void {
  io.stdout.write(`${JSON.stringify(envelope)}\n`);
}

function checkUrl(url: string, command: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`coordinator URL '${url}' is not a URL`, command);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new UsageError(`coordinator URL '${url}' must be http:// or https://`, command);
  }
  return url;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return `agentq ${pkg.version}`;
}
