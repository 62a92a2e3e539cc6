import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseDuration } from './duration.js';
import { UsageError } from './errors.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>;

/** Accepted by every command, before or after the command name. */
export const GLOBAL_OPTIONS = {
  url: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies OptionSpec;

export interface ParsedArgs {
  values: Readonly<Record<string, string | boolean | undefined>>;
  positionals: string[];
}

/**
 * Find the command name: the first token that is neither an option nor the value of `--url`.
 * Returns the rest of argv without it.
 */
export function splitCommand(argv: readonly string[]): { command: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i] as string;
    if (token === '--') break;
    if (token === '--url') {
      i++;
      continue;
    }
    if (token.startsWith('-')) continue;
    return { command: token, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
  }
  return { command: undefined, rest: [...argv] };
}

/** Parse one command's arguments strictly; any mistake is a UsageError naming the command. */
export function parseCommandArgs(command: string, options: OptionSpec, args: readonly string[]): ParsedArgs {
  try {
    const { values, positionals } = parseArgs({
      args: [...args],
      options: { ...GLOBAL_OPTIONS, ...options },
      allowPositionals: true,
      strict: true,
    });
    return { values: values as ParsedArgs['values'], positionals };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // parseArgs appends advice about '--' that does not help here
    throw new UsageError(message.split('. To specify')[0] ?? message, command, { cause: err });
  }
}

export function stringOpt(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function boolOpt(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}

/** A duration option (`--timeout 5m`), or undefined when absent. */
export function durationOpt(args: ParsedArgs, name: string, command: string, min = 0): number | undefined {
  const text = stringOpt(args, name);
  if (text === undefined) return undefined;
  const ms = parseDuration(text);
  if (ms === null) {
    throw new UsageError(`--${name}: '${text}' is not a duration (use e.g. 500ms, 30s, 5m, 1h or milliseconds)`, command);
  }
  if (ms < min) throw new UsageError(`--${name} must be at least ${min}ms`, command);
  return ms;
}

/** A non-negative integer option (`--limit 50`), or undefined when absent. */
export function intOpt(args: ParsedArgs, name: string, command: string, min: number, max: number): number | undefined {
  const text = stringOpt(args, name);
  if (text === undefined) return undefined;
  const n = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}, not '${text}'`, command);
  }
  return n;
}

/** Require between min and max positionals, named `what` in the message. */
export function expectPositionals(args: ParsedArgs, command: string, what: string, min: number, max: number): string[] {
  const p = args.positionals;
  if (p.length < min) throw new UsageError(`missing ${what}`, command);
  if (p.length > max) throw new UsageError(`unexpected argument '${p[max]}'`, command);
  return p;
}
