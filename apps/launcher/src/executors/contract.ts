import { Value } from '@sinclair/typebox/value';
import { ExecutorInvocation, type ExecutorEvent } from '@agentq/protocol';

/**
 * Helpers for executor programs written in TypeScript (the built-ins): read the invocation from
 * stdin, write events to stdout. An executor in another language only needs the same JSON.
 */
export async function readInvocation(): Promise<ExecutorInvocation> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`stdin is not an executor invocation (JSON expected): ${text.slice(0, 200)}`);
  }
  if (!Value.Check(ExecutorInvocation, value)) {
    const first = Value.Errors(ExecutorInvocation, value).First();
    throw new Error(`invalid executor invocation: ${first ? `${first.path} ${first.message}` : 'unknown error'}`);
  }
  return value;
}

/**
 * Write one event as a JSON line; a long `output` as several. The launcher reads an event line of
 * at most 16 MiB and fails the job past that (executor_event_too_large): a text that long (a line
 * claude printed that is not JSON, say) is its output all the same, so it goes in pieces, which
 * the launcher joins as they came.
 */
export function emit(event: ExecutorEvent): void {
  if (event.type === 'output' && event.text.length > OUTPUT_PIECE_CHARS) {
    for (const text of pieces(event.text, OUTPUT_PIECE_CHARS)) process.stdout.write(`${JSON.stringify({ type: 'output', text })}\n`);
    return;
  }
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

/**
 * The most characters of one `output` event: at most 6 bytes each once in JSON (`\u0001`), so an
 * event line stays well under the launcher's 16 MiB.
 */
export const OUTPUT_PIECE_CHARS = 1024 * 1024;

/** The text in pieces of at most `max` UTF-16 units, never splitting a surrogate pair. */
function* pieces(text: string, max: number): Generator<string> {
  for (let start = 0; start < text.length; ) {
    let end = Math.min(start + max, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    yield text.slice(start, end);
    start = end;
  }
}

/** An error with the machine-readable code the job fails with (the `error` event's `code`). */
export class ExecutorError extends Error {
  override readonly name = 'ExecutorError';
  constructor(
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** Run an executor's main: any error becomes an `error` event (with its code) and exit code 1. */
export function runExecutor(main: () => Promise<void>): void {
  main().then(
    () => {
      process.exitCode = 0;
    },
    (err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      const code = err instanceof ExecutorError ? err.code : undefined;
      emit({ type: 'error', message, ...(code ? { code } : {}) });
      process.exitCode = 1;
    },
  );
}
