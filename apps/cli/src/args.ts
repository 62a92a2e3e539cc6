import { InvalidArgumentError } from 'commander';
import { parseDuration } from './duration.js';

/*
 * Value parsers for commander options (`.argParser(...)`). A bad value throws commander's
 * InvalidArgumentError, which the CLI reports as a usage error naming the option, e.g.
 * "option '--timeout <duration>' argument '5x' is invalid. '5x' is not a duration (...)".
 */

const DURATION_HINT = 'use e.g. 500ms, 30s, 5m, 1h, 1h30m or milliseconds';

/** A duration (`--wait-timeout 5m`) in milliseconds, at least `min`. */
export function durationArg(min = 0): (text: string) => number {
  return (text) => {
    const ms = parseDuration(text);
    if (ms === null) throw new InvalidArgumentError(`'${text}' is not a duration (${DURATION_HINT}, or none).`);
    if (ms < min) throw new InvalidArgumentError(`it must be at least ${min}ms.`);
    return ms;
  };
}

/** What `none` parses to (commander turns a parsed null into '', so not null itself). */
export const NONE = 'none';
export type Timeout = number | typeof NONE;

/** A duration or `none` (no limit / no timeout). */
export function timeoutArg(min = 0): (text: string) => Timeout {
  const duration = durationArg(min);
  return (text) => (text.trim().toLowerCase() === NONE ? NONE : duration(text));
}

/** A Timeout option as milliseconds, null for `none`, undefined when not given. */
export function timeoutMs(value: Timeout | undefined): number | null | undefined {
  return value === NONE ? null : value;
}

/** An integer from `min` to `max` (`--limit 50`). */
export function intArg(min: number, max: number): (text: string) => number {
  return (text) => {
    const n = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`it must be an integer from ${min} to ${max}.`);
    }
    return n;
  };
}

/** An amount of US dollars, over 0 and at most `max` (`--budget 2.50`). */
export function usdArg(max: number): (text: string) => number {
  return (text) => {
    const n = /^\d+(\.\d+)?$/.test(text.trim()) ? Number(text.trim()) : NaN;
    if (!(n > 0 && n <= max)) throw new InvalidArgumentError(`it must be a number of US dollars over 0 and at most ${max}.`);
    return n;
  };
}

/** A repeatable `key=value` option (`--require gpu=a100 --require zone=eu`), gathered in a record. */
export function keyValueArg(text: string, previous: Record<string, string> | undefined): Record<string, string> {
  const eq = text.indexOf('=');
  const key = eq < 0 ? '' : text.slice(0, eq).trim();
  const value = eq < 0 ? '' : text.slice(eq + 1).trim();
  if (key === '' || value === '') throw new InvalidArgumentError(`'${text}' is not key=value.`);
  const all = { ...previous };
  if (key in all && all[key] !== value) {
    throw new InvalidArgumentError(`${key} is already required as ${key}=${all[key]}.`);
  }
  all[key] = value;
  return all;
}

/** A comma-separated list (`--type job.completed,launcher`), empty items dropped. */
export function listArg(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/**
 * A job id, session name or launcher id, as an argument or an option value (`status <job_id>`,
 * `--session <name>`). An empty one (`agentq wait "$id"` with `id` unset) is a usage error: sent
 * on, it would come back as the coordinator's `validation_failed` on a field the user never
 * typed (`job_ids[0]`), and an empty filter (`list --session ""`) would select everything.
 */
export function nameArg(what: string): (text: string) => string {
  return (text) => {
    if (text.trim() === '') throw new InvalidArgumentError(`it is empty: give ${what}.`);
    return text;
  };
}

/** `nameArg` for a variadic argument (`wait <job_id...>`): commander folds the values one by one. */
export function namesArg(what: string): (text: string, previous: string[] | undefined) => string[] {
  const one = nameArg(what);
  return (text, previous) => [...(previous ?? []), one(text)];
}

/**
 * `--token`: an empty one is a usage error, as an empty `--url` or `--ca-file` is. Taken as
 * "no token" it would hide AGENTQ_TOKEN (the flag wins) and end in a 401 that says to give a
 * token; `--token "$TOKEN"` with the variable unset is the usual way to get there.
 * (An empty AGENTQ_TOKEN counts as unset, as every empty AGENTQ_* variable does.)
 */
export function tokenArg(text: string): string {
  if (text.trim() === '') {
    throw new InvalidArgumentError('it is empty: give the token, or leave --token out to use AGENTQ_TOKEN (or no token).');
  }
  return text;
}
