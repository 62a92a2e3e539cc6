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

/** Write one event as a JSON line. */
export function emit(event: ExecutorEvent): void {
  process.stdout.write(`${JSON.stringify(event)}\n`);
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
