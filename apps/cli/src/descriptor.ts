import { exitCodeForStatus, type Job, type JobDescriptor } from '@agentq/protocol';
import type { CommandContext } from './context.js';

/**
 * Suggested interval between two `agentq status` calls. A job is an agent turn (seconds to
 * hours); `agentq wait` is the better tool and needs no interval at all.
 */
export const POLL_INTERVAL_MS = 5_000;

/** The async-job descriptor: the job plus the commands that follow it up. */
export function describeJob(job: Job, ctx: Pick<CommandContext, 'json' | 'url' | 'urlFromFlag'>): JobDescriptor {
  const follow = (verb: string) => ['agentq', verb, job.job_id, ...followUpFlags(ctx)].join(' ');
  return {
    ...job,
    status_command: follow('status'),
    wait_command: follow('wait'),
    cancel_command: follow('cancel'),
    output_command: follow('output'),
    poll_interval_ms: POLL_INTERVAL_MS,
    exit_code: exitCodeForStatus(job.status),
  };
}

/**
 * Flags a follow-up command must repeat to reach the same coordinator and answer the same way:
 * `--url` when it was given as a flag (AGENTQ_URL carries over by itself), `--json` when used.
 */
function followUpFlags(ctx: Pick<CommandContext, 'json' | 'url' | 'urlFromFlag'>): string[] {
  const flags: string[] = [];
  if (ctx.urlFromFlag) flags.push('--url', shellQuote(ctx.url));
  if (ctx.json) flags.push('--json');
  return flags;
}

/** Quote for a POSIX shell when needed. */
export function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
