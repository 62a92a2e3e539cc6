import { readFile } from 'node:fs/promises';
import type { CliIo } from './context.js';
import { UsageError } from './errors.js';

/** Read all of stdin as UTF-8 (`-p -`); empty when the CLI was given no stdin. */
export async function readStdin(io: CliIo): Promise<string> {
  if (!io.stdin) return '';
  const decoder = new TextDecoder();
  let text = '';
  for await (const chunk of io.stdin)
    text += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
  return text + decoder.decode();
}

/**
 * The prompt of `start` / `resume`: `-p <text>`, `-p -` (stdin), or `--prompt-file <path>`
 * (`-` is stdin too). Exactly one of them; an empty prompt is a usage error.
 */
export async function readPrompt(
  io: CliIo,
  command: string,
  options: { prompt?: string | undefined; promptFile?: string | undefined },
): Promise<string> {
  const { prompt, promptFile } = options;
  if (prompt !== undefined && promptFile !== undefined) {
    throw new UsageError('give the prompt once: -p <prompt> or --prompt-file <path>', command);
  }
  let text: string;
  let from: string;
  if (prompt === '-' || promptFile === '-') {
    text = await readStdin(io);
    from = 'stdin';
  } else if (promptFile !== undefined) {
    try {
      text = await readFile(promptFile, 'utf8');
    } catch (err) {
      throw new UsageError(
        `--prompt-file: cannot read ${promptFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
        command,
        {
          cause: err,
        },
      );
    }
    from = promptFile;
  } else if (prompt !== undefined) {
    text = prompt;
    from = '-p';
  } else {
    throw new UsageError('missing -p <prompt> (or -p - to read it from stdin, or --prompt-file <path>)', command);
  }
  if (text.trim() === '') throw new UsageError(`the prompt from ${from} is empty`, command);
  // a file or a pipe (`echo ... |`) ends with a newline that is not part of the prompt
  return from === '-p' ? text : text.replace(/\r?\n$/, '');
}
