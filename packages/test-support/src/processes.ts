import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/**
 * True while a process (or process group, with a negative pid) exists and is not a zombie
 * (a killed process whose parent is gone stays a zombie until init reaps it; Linux /proc).
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  if (pid < 0) return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Resolve once the process (or process group, with a negative pid) is gone. For a process that is
 * not our child no event says it has died, and the signs a test can await come too early (the
 * kernel closes a dying process's sockets and pipes before it turns into a zombie), so this looks
 * every 10 ms, then every 100 ms. No bound of its own: a fixed one (it was 10 s) fails a kill that
 * a loaded machine carries out late, and a process that never goes is the test's (or its file's)
 * timeout to end. Meanwhile it says on stderr every 30 s what it is still waiting for: a file cut
 * off at its timeout tells which process stayed.
 */
export async function gone(pid: number, what = `process ${pid}`): Promise<void> {
  const since = Date.now();
  let told = since;
  for (let interval = 10; alive(pid); interval = Math.min(interval * 2, 100)) {
    if (Date.now() - told >= 30_000) {
      told = Date.now();
      process.stderr.write(`still waiting for ${what} (pid ${pid}) to be gone, ${Math.round((told - since) / 1000)} s on\n`);
    }
    await delay(interval);
  }
}
