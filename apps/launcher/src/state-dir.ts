import { randomBytes } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * The launcher's state directory: `$XDG_STATE_HOME/agentq`, else `~/.local/state/agentq`
 * (overridable with --state-dir / AGENTQ_STATE_DIR). It holds what must survive a restart:
 *   host-id          this host's stable identity, created once, shared by every launcher using
 *                    the directory (sessions that cannot move follow it across restarts)
 *   processes/       one record per running launcher of the executor process groups it started
 *                    (see lifeline/record.ts), so that a restarted launcher can end leftovers
 */
export function defaultStateDir(env: Record<string, string | undefined>): string {
  const xdg = env['XDG_STATE_HOME'];
  // the XDG spec says a relative value is invalid and must be ignored
  if (xdg && xdg.startsWith('/')) return join(xdg, 'agentq');
  return join(env['HOME'] || homedir(), '.local', 'state', 'agentq');
}

const HOST_ID_FILE = 'host-id';
const HOST_ID = /^[A-Za-z0-9_-]{8,128}$/;

/**
 * This host's identity: read from the state directory, or created there once. Creation is
 * atomic (written aside, then hard-linked into place, which fails if the name exists), so two
 * launchers starting together end up with the same identity.
 */
export function loadHostId(stateDir: string): string {
  const dir = resolve(stateDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = join(dir, HOST_ID_FILE);
  const existing = readHostId(path);
  if (existing !== undefined) return existing;

  const id = `h_${randomBytes(18).toString('base64url')}`;
  const aside = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(aside, `${id}\n`, { mode: 0o600 });
  try {
    linkSync(aside, path);
    return id;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // another launcher created it first: use theirs
    const theirs = readHostId(path);
    if (theirs === undefined) throw new Error(`${path} exists but is not readable`);
    return theirs;
  } finally {
    rmSync(aside, { force: true });
  }
}

function readHostId(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const id = text.trim();
  if (!HOST_ID.test(id)) {
    throw new Error(`${path} does not hold a host identity (8 to 128 of A-Z a-z 0-9 _ -); fix or delete it`);
  }
  return id;
}
