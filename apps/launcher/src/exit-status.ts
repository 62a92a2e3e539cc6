import { constants } from 'node:os';

/**
 * How a process ended, in words a job's error can carry. "exit 143" says nothing to most readers:
 * it is what a shell (and claude, on its own SIGTERM) reports for a process ended by SIGTERM, 128
 * plus the signal's number. Used by the launcher for its executors and by the claude-code
 * executor for claude.
 */

/** What usually sends each signal, or what it says of the process. */
const WHY: Partial<Record<NodeJS.Signals, string>> = {
  SIGTERM: 'asked to stop: by a user, a service manager or a shutdown',
  SIGKILL: "which cannot be caught: the kernel's OOM killer when memory ran out, or kill -9",
  SIGINT: 'interrupted, as by Ctrl-C',
  SIGHUP: 'its terminal or session was closed',
  SIGQUIT: 'asked to quit and dump core',
  SIGABRT: 'it aborted: a failed assertion or a fatal runtime error, such as running out of heap',
  SIGSEGV: 'it crashed: an invalid memory access',
  SIGBUS: 'it crashed: a bad memory access',
  SIGILL: 'it crashed: an illegal instruction',
  SIGFPE: 'it crashed: an arithmetic error',
  SIGPIPE: 'it wrote to a pipe whose reader had gone',
  SIGXCPU: 'it used up its CPU time limit (ulimit -t)',
  SIGXFSZ: 'it went past its file size limit (ulimit -f)',
};

/** `SIGKILL (which cannot be caught: ...)`: the signal and what usually sends it. */
export function describeSignal(signal: NodeJS.Signals): string {
  const why = WHY[signal];
  return why ? `${signal} (${why})` : signal;
}

/**
 * The signal an exit code names by the shell's convention (128 + the signal's number: 137 is
 * SIGKILL, 143 SIGTERM), if it is one. A program may exit with such a code for its own reasons;
 * the words say what it usually means, not what it was.
 */
export function signalOfExitCode(code: number): NodeJS.Signals | undefined {
  if (code <= 128 || code >= 128 + 32) return undefined;
  const entry = Object.entries(constants.signals).find(([, n]) => n === code - 128);
  return entry?.[0] as NodeJS.Signals | undefined;
}

/** `143 (128 + 15: SIGTERM, asked to stop: ...)`, or the bare code when it names no signal. */
export function describeExitCode(code: number): string {
  const signal = signalOfExitCode(code);
  if (!signal) return String(code);
  const why = WHY[signal];
  return `${code} (128 + ${code - 128}: ${signal}${why ? `, ${why}` : ''})`;
}
