import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

/** Shared helpers of the benchmarks. */

export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export const ms = (x: number): string => `${x.toFixed(3)} ms`;

export interface CoordinatorProcess {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/**
 * A coordinator in its own process (as it runs in production), on a free port, with silent
 * logs. `extra` is merged into the startCoordinator options.
 */
export async function startCoordinatorProcess(databaseUrl: string, extra: Record<string, unknown> = {}): Promise<CoordinatorProcess> {
  const options = { pollTimeoutSeconds: 60, logLevel: 'silent', eventReplaySize: 1000, databaseUrl, ...extra };
  const code = `
    const { startCoordinator } = await import('@agentq/coordinator');
    const c = await startCoordinator(${JSON.stringify(options)});
    console.log(c.url);
    process.on('SIGTERM', () => c.close().then(() => process.exit(0)));
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout! });
  const [url] = (await once(lines, 'line')) as [string];
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}

/** Resident set size of a process, from /proc (Linux), in MiB. */
export async function rssMiB(pid: number): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}
