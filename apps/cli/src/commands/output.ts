import { CliExitCodes, exitCodeForStatus, type JobOutput } from '@agentq/protocol';
import { boolOpt, expectPositionals, intOpt, type OptionSpec, type ParsedArgs } from '../args.js';
import type { CommandContext, CommandResult } from '../context.js';

export const outputOptions = {
  follow: { type: 'boolean', short: 'f' },
  tail: { type: 'string' },
} as const satisfies OptionSpec;

/** How long one follow call may be held by the coordinator while no new output comes. */
export const FOLLOW_WAIT_MS = 30_000;

/**
 * `agentq output <job> [--tail <bytes>] [--follow]`: a bounded preview of the job's output (the
 * coordinator's default is the last 16 KiB), exit 0. With `--follow`, print the preview and then
 * every new byte as it arrives (long-polls on offset + wait_ms) until the job is terminal, and
 * exit with its outcome, like `wait`.
 */
export async function output(ctx: CommandContext, args: ParsedArgs): Promise<CommandResult> {
  const [jobId] = expectPositionals(args, 'output', '<job_id>', 1, 1) as [string];
  const tail = intOpt(args, 'tail', 'output', 0, 16 * 1024 * 1024);
  const first = await ctx.client.getOutput(jobId, tail === undefined ? {} : { tail_bytes: tail }, { signal: ctx.signal });

  if (!boolOpt(args, 'follow')) {
    const text = () => {
      if (first.offset > 0) {
        note(ctx, `(last ${first.next_offset - first.offset} of ${first.total_bytes} bytes; --tail <bytes> for more)`);
      }
      return first.output;
    };
    return { data: first, exitCode: CliExitCodes.ok, text };
  }

  // Following: in text mode the bytes go to stdout as they come; with --json they are gathered
  // into one JobOutput covering [first.offset, last.next_offset).
  const emit = (res: JobOutput) => {
    if (!ctx.json && res.output !== '') ctx.io.stdout.write(res.output);
  };
  emit(first);
  const chunks = [first.output];
  let last = first;
  while (!(last.terminal && last.next_offset >= last.total_bytes) && !ctx.signal?.aborted) {
    let res: JobOutput;
    try {
      res = await ctx.client.getOutput(
        jobId,
        { offset: last.next_offset, wait_ms: FOLLOW_WAIT_MS },
        { signal: ctx.signal },
      );
    } catch (err) {
      if (ctx.signal?.aborted) break;
      throw err;
    }
    if (res.offset > last.next_offset) {
      // the coordinator dropped bytes we had not read yet (per-job cap): say so, don't hide it
      const lost = `[… ${res.offset - last.next_offset} bytes dropped by the coordinator …]\n`;
      if (!ctx.json) ctx.io.stdout.write(lost);
      chunks.push(lost);
    }
    emit(res);
    chunks.push(res.output);
    last = res;
  }
  const data: JobOutput = { ...last, offset: first.offset, output: chunks.join('') };
  const exitCode = last.terminal ? exitCodeForStatus(last.status) : CliExitCodes.running;
  // the text was already streamed; only end it on a new line
  return { data, exitCode, text: () => (data.output === '' || data.output.endsWith('\n') ? '' : '\n') };
}

function note(ctx: CommandContext, message: string): void {
  ctx.io.stderr.write(`${message}\n`);
}
