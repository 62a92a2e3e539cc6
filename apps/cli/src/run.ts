import { readFileSync } from 'node:fs';
import { CliExitCodes, type JobDescriptor } from '@agentq/protocol';
import { CommanderError } from 'commander';
import { registerCommands } from './commands/index.js';
import { RunContext, type CliIo, type CommandResult, type GlobalOptions } from './context.js';
import { writeJson } from './envelope.js';
import { nextStep, toCliFailure, UsageError } from './errors.js';
import { buildProgram, commandPath } from './program.js';
import { printable, printableLine } from './table.js';

/** The version of the `agentq` package (apps/cli/package.json). */
export function cliVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/**
 * The whole CLI as a function: parse `argv` (without `node agentq`), run the command, print the
 * result (text, or one `--json` envelope on stdout) and resolve with the exit code. Never
 * throws and never exits the process: `main.ts` does that.
 */
export async function run(argv: readonly string[], io: CliIo): Promise<number> {
  /** `--json` as commander parsed it, once it has (an operand `--json`, after `--`, is not it) */
  let parsedJson: boolean | undefined;
  // before that, scanned, so that even a command line commander rejects gets its envelope
  const json = () => parsedJson ?? jsonBeforeParsing(argv);
  let helpText = '';
  let result: CommandResult | undefined;
  const version = cliVersion();
  try {
    const program = buildProgram(
      version,
      {
        writeOut: (text) => (helpText += text),
        run: async (cmd, handler) => {
          const ctx = new RunContext(io, cmd.optsWithGlobals<GlobalOptions>());
          parsedJson = ctx.json;
          try {
            result = await handler(ctx, cmd);
          } catch (err) {
            if (err instanceof UsageError && err.command === undefined) err.command = commandPath(cmd);
            throw err;
          } finally {
            await ctx.close();
          }
        },
      },
      registerCommands,
    );
    await program.parseAsync([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError && err.code === 'commander.version') {
      result = { data: { version }, exitCode: CliExitCodes.ok, text: () => helpText };
    } else if (err instanceof CommanderError && err.code === 'commander.helpDisplayed') {
      result = { data: { help: helpText }, exitCode: CliExitCodes.ok, text: () => helpText };
    } else {
      return fail(io, json(), err);
    }
  }
  if (!result) return fail(io, json(), new Error('the command gave no result'));
  print(io, json(), result);
  return result.exitCode;
}

/**
 * Whether `--json` is among the options, for what commander answers before it has parsed the
 * whole line (help, version, an unknown flag, a missing argument): the words before `--` only.
 */
function jsonBeforeParsing(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--json');
}

function fail(io: CliIo, json: boolean, err: unknown): number {
  const { error, exitCode } = toCliFailure(err);
  if (json) {
    writeJson(io, { ok: false, error });
  } else {
    // the coordinator's message may quote what it was sent (a session name) or a job's error
    const code = error.code === 'usage_error' ? '' : ` (${printableLine(error.code)})`;
    io.stderr.write(`agentq: ${printableLine(error.message)}${code}\n`);
    if (err instanceof UsageError) {
      io.stderr.write(`Run 'agentq ${err.command ? `${err.command} ` : ''}--help' for usage.\n`);
    }
    const hint = nextStep(error.code, error.details);
    if (hint) io.stderr.write(`${hint}\n`);
    if (error.job) io.stderr.write(`${printableLine(jobCreatedNote(error.job))}\n`);
  }
  return exitCode;
}

/** What people need of a job that was created before its wait failed: which one, and how to follow it. */
function jobCreatedNote(job: JobDescriptor): string {
  return (
    `the job was created all the same: ${job.job_id} (session ${job.session_name}), last seen ${job.status}; ` +
    `follow it with: ${job.wait_command}, not by running the command again`
  );
}

function print(io: CliIo, json: boolean, result: CommandResult): void {
  if (json) {
    // a streaming command (watch) has printed its own envelopes, one per line
    if (result.data !== undefined) writeJson(io, { ok: true, data: result.data });
    return;
  }
  const text = result.raw ? result.text() : printable(result.text());
  if (text !== '') io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
}
