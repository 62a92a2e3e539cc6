import { CliExitCodes, exitCodeForStatus, type CliOutput } from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { intArg, nameArg } from '../args.js';
import { followOutput } from '../follow.js';
import type { Act } from '../program.js';

interface OutputOptions {
  follow?: boolean;
  tail?: number;
}

/**
 * `agentq output <job> [--tail <bytes>] [--follow]`: a bounded preview of the job's output (the
 * coordinator's default is the last 16 KiB), exit 0. With `--follow`, print the preview and then
 * every new byte as it arrives until the job is terminal, and exit with its outcome, like `wait`.
 */
export function registerOutput(program: Command, act: Act): void {
  program
    .command('output')
    .summary("a bounded preview of a job's output (--follow: stream until terminal)")
    .argument('<job_id>', 'the job', nameArg('a job id (job_…)'))
    .addOption(
      new Option('--tail <bytes>', 'how many of the last bytes to show (default 16 KiB)').argParser(
        intArg(0, 16 * 1024 * 1024),
      ),
    )
    .option('-f, --follow', 'keep printing new output until the job is terminal, then exit with its outcome like wait')
    .action(
      act(async (ctx, cmd) => {
        const [jobId] = cmd.processedArgs as [string];
        const o = cmd.opts<OutputOptions>();
        const first = await ctx.client.getOutput(jobId, o.tail === undefined ? {} : { tail_bytes: o.tail }, {
          signal: ctx.signal,
        });

        if (!o.follow) {
          const text = () => {
            if (first.offset > 0) {
              ctx.io.stderr.write(
                `(last ${first.next_offset - first.offset} of ${first.total_bytes} bytes; --tail <bytes> for more)\n`,
              );
            }
            return first.output;
          };
          return { data: first, exitCode: CliExitCodes.ok, text, raw: true };
        }

        // Following: in text mode the bytes go to stdout as they come; with --json they are
        // gathered into one JobOutput covering [first.offset, last.next_offset), less the
        // `dropped_bytes` the coordinator dropped before they were read (its notes are text only).
        const { last, text, output, dropped } = await followOutput(ctx.client, jobId, first, {
          onText: (t) => {
            if (!ctx.json) ctx.io.stdout.write(t);
          },
          signal: ctx.signal,
          now: ctx.now,
        });
        const data: CliOutput = { ...last, offset: first.offset, output, ...(dropped > 0 ? { dropped_bytes: dropped } : {}) };
        const exitCode = last.terminal ? exitCodeForStatus(last.status, last.terminal) : CliExitCodes.running;
        // the text was already streamed; only end it on a new line
        return { data, exitCode, text: () => (text === '' || text.endsWith('\n') ? '' : '\n') };
      }),
    );
}
