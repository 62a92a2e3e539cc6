import type { Health } from '@agentq/protocol';
import type { Command } from 'commander';
import { formatDuration } from '../duration.js';
import type { Act } from '../program.js';

/** `agentq health`: is the coordinator up, and what is it doing. */
export function registerHealth(program: Command, act: Act): void {
  program
    .command('health')
    .summary('is the coordinator up: uptime, queue depth, active jobs, launchers')
    .addHelpText('after', '\nExits 0 when the coordinator answers, 1 when it cannot be reached.')
    .action(
      act(async (ctx) => {
        const data = await ctx.client.health({ signal: ctx.signal });
        return { data, exitCode: 0, text: () => renderHealth(data, ctx.url) };
      }),
    );
}

export function renderHealth(h: Health, url: string): string {
  const l = h.launchers;
  if (h.store === 'unavailable') {
    return [
      `${url}  ${h.status}, up ${formatDuration(h.uptime_seconds * 1000)}, but its store (the database) cannot be read`,
      `  launchers   ${l.parked_polls} waiting for work here`,
    ].join('\n');
  }
  return [
    `${url}  ${h.status}, up ${formatDuration(h.uptime_seconds * 1000)}`,
    `  queue       ${h.queue_depth} pending`,
    `  active      ${h.jobs_active} job(s) claimed, running or stopping`,
    `  launchers   ${l.online} online, ${l.stale} stale, ${l.parked_polls} waiting for work`,
  ].join('\n');
}
