import type { Command } from 'commander';
import { nameArg } from '../args.js';
import { notFoundOn, UsageError } from '../errors.js';
import { commandHelpAfter } from '../help.js';
import type { Act } from '../program.js';
import { readStdin } from '../prompt.js';
import { printableLine as line } from '../table.js';

/**
 * `agentq send <session> <text>`: a message for the session's next turn. The coordinator queues
 * it (`queued`), starting a resume job at once when the session is idle; an unknown session is
 * exit 5, a session that can take no more input (`session_closed`) exit 2.
 */
export function registerSend(program: Command, act: Act): void {
  program
    .command('send')
    .summary('send a message to a session: delivered with its next turn (now, if it is idle)')
    .argument('<session>', 'the session', nameArg('a session name'))
    .argument('<text>', 'the message; - reads it from stdin')
    .addHelpText(
      'after',
      commandHelpAfter(
        'Exits 0 when the message is queued, 5 when the session does not exist,\n2 when it takes no more input (session_closed).',
      ),
    )
    .action(
      act(async (ctx, cmd) => {
        const [session, arg] = cmd.processedArgs as [string, string];
        const text = arg === '-' ? (await readStdin(ctx.io)).replace(/\r?\n$/, '') : arg;
        if (text.trim() === '') throw new UsageError('the message is empty');
        const data = await notFoundOn(
          'session_not_found',
          ctx.client.sendMessage(session, { text }, { signal: ctx.signal }),
        );
        const render = () =>
          data.job_id
            ? `queued ${line(data.message_id)} for ${line(data.session_name)}: delivered now by job ${line(data.job_id)}`
            : `queued ${line(data.message_id)} for ${line(data.session_name)}: delivered with its next turn`;
        return { data, exitCode: 0, text: render };
      }),
    );
}
