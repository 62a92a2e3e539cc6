import { exitCodeForStatus, type Job, type JobDescriptor } from '@agentq/protocol';
import type { CommandContext } from './context.js';

/**
 * Suggested interval between two `agentq status` calls. A job is an agent turn (seconds to
 * hours); `agentq wait` is the better tool and needs no interval at all.
 */
export const POLL_INTERVAL_MS = 5_000;

/** The async-job descriptor: the job plus the commands that follow it up. */
export function describeJob(job: Job, ctx: Pick<CommandContext, 'json' | 'url' | 'urlFromFlag' | 'caFileFromFlag'>): JobDescriptor {
  const follow = (verb: string) => ['agentq', verb, job.job_id, ...followUpFlags(ctx)].join(' ');
  return {
    ...job,
    status_command: follow('status'),
    wait_command: follow('wait'),
    cancel_command: follow('cancel'),
    output_command: follow('output'),
    poll_interval_ms: POLL_INTERVAL_MS,
    exit_code: exitCodeForStatus(job.status, job.terminal),
  };
}

/**
 * Flags a follow-up command must repeat to reach the same coordinator and answer the same way:
 * `--url` and `--ca-file` when they were given as flags (AGENTQ_URL and AGENTQ_CA_FILE carry
 * over by themselves), `--json` when used. Never `--token`: the descriptor is printed, and a
 * secret does not belong in it.
 */
function followUpFlags(ctx: Pick<CommandContext, 'json' | 'url' | 'urlFromFlag' | 'caFileFromFlag'>): string[] {
  const flags: string[] = [];
  if (ctx.urlFromFlag) flags.push('--url', shellQuote(ctx.url));
  if (ctx.caFileFromFlag !== undefined) flags.push('--ca-file', shellQuote(ctx.caFileFromFlag));
  if (ctx.json) flags.push('--json');
  return flags;
}

/** Quote for a POSIX shell when needed. */
export function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}
