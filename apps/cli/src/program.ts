import { statSync } from 'node:fs';
import { Command, CommanderError, Option } from 'commander';
import { tokenArg } from './args.js';
import type { CommandContext, CommandResult } from './context.js';
import { UsageError } from './errors.js';
import { MAIN_HELP_AFTER } from './help.js';

/** A command's body: it gets the run's context and its commander Command (arguments, options). */
export type Handler = (ctx: CommandContext, cmd: Command) => Promise<CommandResult>;

/** Turns a handler into a commander action; `group` makes a command that only holds others. */
export interface Act {
  (handler: Handler): (...args: unknown[]) => Promise<void>;
  /** `session`, `token`: listed in `--help` as their subcommands (`session stop <session>`) */
  group(parent: Command, name: string, summary: string): Command;
}

/** Attaches a command (and its subcommands) to its parent. */
export type Register = (parent: Command, act: Act) => void;

/** What the program writes instead of the process's streams, and how it runs a handler. */
export interface ProgramIo {
  /** help and version text (commander's "out") */
  writeOut: (text: string) => void;
  /** runs a command's handler with the context of this run */
  run: (cmd: Command, handler: Handler) => Promise<void>;
}

/**
 * Options every command takes, before or after its name. They are declared on every command,
 * not only on the program: commander hands the words after a command's first unknown option
 * to that command, so `agentq list --all --json` needs `list` itself to know `--json`.
 */
function globalOptions(): Option[] {
  return [
    new Option('--url <url>', 'coordinator URL, or a comma list of coordinators of one database (default: $AGENTQ_URL, else http://127.0.0.1:8765)'),
    new Option(
      '--json',
      'print exactly one JSON envelope on stdout: {"ok":true,"data":...} or {"ok":false,"error":{...}}',
    ),
    new Option('--token <token>', 'bearer token for a coordinator with auth on (default: $AGENTQ_TOKEN)').argParser(tokenArg),
    new Option('--ca-file <path>', 'CA certificate (PEM) of an https:// coordinator (default: $AGENTQ_CA_FILE)'),
  ].map((o) => o.helpGroup('Global options:'));
}

/** The global options whose value is a file of this host (read relative to the working directory). */
const FILE_OPTIONS: ReadonlySet<string> = new Set(['--ca-file']);

/** Whether `path` names a file there is (not a folder): what a file option's value is meant to be. */
function isFile(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false })?.isFile() ?? false;
  } catch {
    return false; // unreadable: reported as such when the command reads it
  }
}

/** `agentq session stop`, the way it is typed. */
export function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * A global option that took the next word as its value although that word is a command or an
 * option of the line (`agentq --url status job_x`, `agentq list --token --json`): commander gives
 * an option that needs a value whatever word follows it. Left alone, the error would be about
 * something else (`unknown command 'job_x'`, `missing command`, a URL `--json`) or none at all (a
 * token `--json`, and no JSON printed); this names the option that is missing its value, on `cmd`
 * or the commands above it (where the option was given decides which help to point at).
 * Not for a file option whose value is a file there is: `agentq --ca-file list status job_x` in a
 * folder with a CA file named `list` means that file (a user who forgot the value gets the error
 * commander gives for the words left, `missing command` or the like).
 */
function swallowedValue(cmd: Command): UsageError | undefined {
  const globals = new Set(globalOptions().filter((o) => o.required).map((o) => o.long));
  for (let c: Command | null = cmd; c; c = c.parent) {
    const opts = c.opts<Record<string, unknown>>();
    const flags = [...c.options.flatMap((o) => [o.long, o.short]), '-h', '--help'].filter((f) => f !== undefined);
    for (const option of c.options) {
      const value = opts[option.attributeName()];
      if (!globals.has(option.long) || typeof value !== 'string') continue;
      const what = c.commands.some((sub) => sub.name() === value)
        ? 'the command'
        : flags.some((flag) => value === flag || value.startsWith(`${flag}=`))
          ? 'the option'
          : undefined;
      // not for a file option naming a file that is there: that file is what the user meant
      if (what && !(option.long !== undefined && FILE_OPTIONS.has(option.long) && isFile(value))) {
        return new UsageError(`option '${option.flags}' argument missing: it took ${what} '${value}' as its value`, commandPath(c) || undefined);
      }
    }
  }
  return undefined;
}

/** Commander's own errors as usage errors naming the command, without its `error: ` prefix. */
function usageError(err: CommanderError, cmd: Command): UsageError {
  // `agentq --url status job_x`: not an unknown command 'job_x', a --url without its value
  const swallowed = swallowedValue(cmd);
  if (swallowed) return swallowed;
  const path = commandPath(cmd);
  if (err.code === 'commander.help') {
    // help shown because a command that needs a subcommand got none (`agentq`, `agentq session`)
    const subs = cmd.commands.map((c) => c.name()).join('|');
    const message = path === '' ? 'missing command' : `missing command: agentq ${path} <${subs}>`;
    return new UsageError(message, path || undefined, { cause: err });
  }
  return new UsageError(err.message.replace(/^error: /, ''), path || undefined, { cause: err });
}

/** Build the `agentq` command tree: commander parses, checks and documents every command. */
export function buildProgram(version: string, io: ProgramIo, register: Register): Command {
  const program = new Command('agentq')
    .description('agentq: run AI-agent sessions through the agentq coordinator.')
    .usage('<command> [options]')
    // every setting below is copied to the commands created after it
    .configureOutput({
      writeOut: io.writeOut,
      // errors are reported by run(), as text or as the --json envelope: commander stays quiet
      writeErr: () => {},
      outputError: () => {},
    })
    .showSuggestionAfterError(true)
    // the program's options (the global ones) are its own only before the command's name; after
    // it they are the command's (which declares them too): an error in one (`agentq status job_x
    // --url`, no value) is then the command's, and says to run `agentq status --help`, not
    // `agentq --help`
    .enablePositionalOptions()
    .helpOption('-h, --help', 'show help')
    .helpCommand(false)
    .addHelpText('after', MAIN_HELP_AFTER);

  const groups = new Set<Command>();
  const act: Act = Object.assign(
    (handler: Handler) =>
      async (...args: unknown[]) =>
        io.run(args[args.length - 1] as Command, handler),
    {
      group(parent: Command, name: string, summary: string): Command {
        const cmd = parent.command(name).summary(summary);
        groups.add(cmd);
        return cmd;
      },
    },
  );
  program.configureHelp({
    // the main help lists nested commands by their full name (`session stop <session>`)
    visibleCommands: (cmd) => cmd.commands.flatMap((sub) => (groups.has(sub) ? sub.commands : [sub, ...sub.commands])),
    subcommandTerm: (sub) =>
      [
        commandPath(sub),
        ...sub.registeredArguments.map((a) =>
          a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`,
        ),
      ].join(' '),
  });
  register(program, act);

  program
    .command('help')
    .helpGroup('Help:')
    .argument('[command...]', 'a command, e.g. wait or session stop')
    .summary('show help for a command')
    .action(async (names: string[]) => {
      let target = program;
      for (const name of names) {
        const next = target.commands.find((c) => c.name() === name || c.aliases().includes(name));
        if (!next) throw new UsageError(`no help for unknown command '${names.join(' ')}'`);
        target = next;
      }
      target.outputHelp();
      throw new CommanderError(0, 'commander.helpDisplayed', '(outputHelp)');
    });

  // on every command: --version, the global options, and errors that know their command
  const walk = (cmd: Command) => {
    cmd.version(`agentq ${version}`, '-V, --version', 'print the version');
    for (const o of globalOptions()) cmd.addOption(o);
    // nested commands are listed with their parent's group in the main help
    if (cmd.parent && cmd.parent !== program && !cmd.helpGroup()) cmd.helpGroup(cmd.parent.helpGroup());
    cmd.exitOverride((err) => {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') throw err;
      throw usageError(err, cmd);
    });
    for (const sub of cmd.commands) walk(sub);
  };
  walk(program);
  // `agentq list --token --json`: parsed without an error, but not as the user meant it
  program.hook('preAction', (_program, action) => {
    const swallowed = swallowedValue(action);
    if (swallowed) throw swallowed;
  });
  return program;
}
