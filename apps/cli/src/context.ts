import type { AgentqClient } from '@agentq/client';

/** A place to write text: process.stdout / process.stderr, or a buffer in tests. */
export interface Sink {
  write(chunk: string): unknown;
}

/** Everything the CLI touches outside itself; `main.ts` passes the process's, tests their own. */
export interface CliIo {
  env: Readonly<Record<string, string | undefined>>;
  stdout: Sink;
  stderr: Sink;
  /** stderr is a terminal: `--wait` and `wait` draw progress there */
  isTTY?: boolean;
  /** aborting stops a wait (the job keeps running); main.ts wires it to SIGINT */
  signal?: AbortSignal;
  /** milliseconds clock for elapsed times (default Date.now) */
  now?: () => number;
}

/** What every command gets: the client, where to write, and how it was invoked. */
export interface CommandContext {
  client: AgentqClient;
  io: CliIo;
  json: boolean;
  url: string;
  /** the URL came from `--url`, so follow-up commands must repeat it */
  urlFromFlag: boolean;
  signal: AbortSignal | undefined;
  now: () => number;
}

/**
 * A command's answer. `data` becomes the `--json` envelope's data; `text` renders it for people
 * (commands that stream, like `output --follow`, write as they go and return empty text).
 */
export interface CommandResult {
  data: unknown;
  exitCode: number;
  text: () => string;
}
