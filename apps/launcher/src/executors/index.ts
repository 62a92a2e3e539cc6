import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** How to start an executor program: the command and the arguments before anything else. */
export interface ExecutorSpec {
  /** what the launcher registers as `executor_type`: the built-in name or the resolved path */
  name: string;
  command: string;
  args: string[];
  /**
   * Whether a session this executor ran can be resumed on another host (sent at registration as
   * `portable_sessions`; when false, the coordinator keeps a session's jobs on its host).
   * A built-in knows; a program is assumed not portable unless --portable-sessions says so.
   */
  portableSessions: boolean;
}

/** Built-in executors ship with the launcher as node programs beside this file. */
export const BUILTIN_EXECUTORS = {
  'claude-code': 'claude-code.js',
  demo: 'demo.js',
} as const;

/**
 * Claude Code keeps a session's transcript on the machine that ran it (under the directory it ran
 * in), so its sessions stay on their host; the demo executor keeps nothing.
 */
const PORTABLE: Record<BuiltinExecutor, boolean> = { 'claude-code': false, demo: true };
export type BuiltinExecutor = keyof typeof BUILTIN_EXECUTORS;

const isBuiltin = (name: string): name is BuiltinExecutor => Object.hasOwn(BUILTIN_EXECUTORS, name);

/**
 * Turn `--executor` into a command. A built-in name runs its script with this node; a path to a
 * `.js`/`.mjs`/`.cjs` file runs with this node too (no execute bit needed); any other path must be
 * an executable file. Throws an Error saying what is wrong.
 */
export function resolveExecutor(nameOrPath: string, cwd: string): ExecutorSpec {
  if (isBuiltin(nameOrPath)) {
    const script = fileURLToPath(new URL(BUILTIN_EXECUTORS[nameOrPath], import.meta.url));
    return { name: nameOrPath, command: process.execPath, args: [script], portableSessions: PORTABLE[nameOrPath] };
  }
  const looksLikePath = nameOrPath.includes('/') || nameOrPath.startsWith('.');
  const path = isAbsolute(nameOrPath) ? nameOrPath : resolve(cwd, nameOrPath);
  let isFile = false;
  try {
    isFile = statSync(path).isFile();
  } catch {
    // reported below
  }
  if (!isFile) {
    throw new Error(
      looksLikePath
        ? `executor ${path} does not exist or is not a file`
        : `unknown executor ${JSON.stringify(nameOrPath)} (built-ins: ${Object.keys(BUILTIN_EXECUTORS).join(', ')}; or give a path)`,
    );
  }
  if (/\.(c|m)?js$/.test(path)) return { name: path, command: process.execPath, args: [path], portableSessions: false };
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(`executor ${path} is not executable (chmod +x it, or name a .js file)`);
  }
  return { name: path, command: path, args: [], portableSessions: false };
}
