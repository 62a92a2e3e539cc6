import { resolve } from 'node:path';
import { AgentqClient, coordinatorUrlProblem, splitUrls, toError, withoutCredentials, type ClientOptions } from '@agentq/client';
import { printable } from './table.js';
import { UsageError } from './errors.js';

/** A place to write text: process.stdout / process.stderr, or a buffer in tests. */
export interface Sink {
  write(chunk: string): unknown;
}

/** Everything the CLI touches outside itself; `main.ts` passes the process's, tests their own. */
export interface CliIo {
  env: Readonly<Record<string, string | undefined>>;
  stdout: Sink;
  stderr: Sink;
  /** read by `-p -`, `--prompt-file -` and `send <session> -` (default: nothing to read) */
  stdin?: AsyncIterable<Buffer | string>;
  /** stderr is a terminal: `--wait` and `wait` draw progress there */
  isTTY?: boolean;
  /** aborting stops a wait (the job keeps running); main.ts wires it to SIGINT */
  signal?: AbortSignal;
  /** milliseconds clock for elapsed times (default Date.now) */
  now?: () => number;
}

/** The options every command accepts (before or after its name). */
export interface GlobalOptions {
  url?: string;
  json?: boolean;
  token?: string;
  caFile?: string;
}

export const DEFAULT_URL = 'http://127.0.0.1:8765';

/** What every command gets: the client, where to write, and how it was invoked. */
export interface CommandContext {
  /** created on first use, so commands that need no coordinator (token, completion) need no URL */
  readonly client: AgentqClient;
  io: CliIo;
  json: boolean;
  url: string;
  /** the URL came from `--url`, so follow-up commands must repeat it */
  urlFromFlag: boolean;
  /** the CA file given by `--ca-file` (absolute), which follow-up commands must repeat too */
  caFileFromFlag: string | undefined;
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
  /**
   * `text` is the job's own bytes (`agentq output`), printed as they are, like `cat`. Any other
   * text has its control characters shown as `\xNN` (printable): it carries the coordinator's data.
   */
  raw?: boolean;
}

/** The context of one run; `close()` releases the client if one was made. */
export class RunContext implements CommandContext {
  readonly io: CliIo;
  readonly json: boolean;
  readonly url: string;
  readonly urlFromFlag: boolean;
  readonly caFileFromFlag: string | undefined;
  readonly signal: AbortSignal | undefined;
  readonly now: () => number;
  readonly #token: string | undefined;
  readonly #caFile: string | undefined;
  #client: AgentqClient | undefined;

  constructor(io: CliIo, options: GlobalOptions) {
    this.io = io;
    this.json = options.json === true;
    // an empty variable counts as unset
    this.url = options.url ?? (io.env.AGENTQ_URL || DEFAULT_URL);
    this.urlFromFlag = options.url !== undefined;
    this.#token = options.token ?? (io.env.AGENTQ_TOKEN || undefined);
    this.#caFile = options.caFile ?? (io.env.AGENTQ_CA_FILE || undefined);
    // absolute, so that a follow-up command run from another directory finds it
    this.caFileFromFlag = options.caFile === undefined ? undefined : resolve(options.caFile);
    this.signal = io.signal;
    this.now = io.now ?? Date.now;
  }

  get client(): AgentqClient {
    // no limit: a run has few requests in flight (mostly one, and the progress event stream), but
    // a wait on more than 1000 jobs parks one long-poll per 1000 at once, and none may queue
    // behind another (waiting.ts)
    this.#client ??= coordinatorClient({
      url: this.url,
      token: this.#token,
      caFile: this.#caFile,
      connections: null,
      // a rate limit may ask for a minute, twice: say why nothing happens meanwhile
      onRetryWait: ({ ms, error }) => {
        if (ms >= 1000) this.io.stderr.write(`agentq: ${printable(error.code)}: trying again in ${Math.ceil(ms / 1000)} s, as the coordinator asks\n`);
      },
    });
    return this.#client;
  }

  async close(): Promise<void> {
    const client = this.#client;
    if (!client) return;
    // after Ctrl-C a long-poll may still be open: don't wait for the coordinator to answer it
    await (this.signal?.aborted ? client.destroy() : client.close());
  }
}

/** Where and how a command (or `agentq mcp`) reaches the coordinator. */
export interface ClientSettings {
  /** one URL, or a comma list of coordinators of one database */
  url: string;
  token: string | undefined;
  caFile: string | undefined;
  /** null: no limit (see ClientOptions) */
  connections: number | null;
  onRetryWait?: ClientOptions['onRetryWait'];
  /** how many times a call the coordinator refuses for now (429/503 with Retry-After) is sent again after that wait; default the client's */
  overloadRetries?: number;
}

/**
 * The client of a run, the same for every command and for `agentq mcp`: the URL (or each URL of
 * a comma list, which the client fails over between) is checked first, a bad one is a usage error.
 */
export function coordinatorClient(s: ClientSettings): AgentqClient {
  checkUrl(s.url);
  try {
    return new AgentqClient({
      url: s.url,
      connections: s.connections,
      ...(s.onRetryWait === undefined ? {} : { onRetryWait: s.onRetryWait }),
      ...(s.overloadRetries === undefined ? {} : { overloadRetries: s.overloadRetries }),
      ...(s.token === undefined ? {} : { token: s.token }),
      ...(s.caFile === undefined ? {} : { caFile: s.caFile }),
    });
  } catch (err) {
    // with the URL checked, what the client refuses is its CA file (missing, unreadable): a bad flag
    throw new UsageError(`${toError(err).message} (--ca-file or AGENTQ_CA_FILE)`, undefined, { cause: err });
  }
}

/** One URL, or several coordinators of one database as a comma list (the client tries them in turn). */
function checkUrl(value: string): void {
  const urls = splitUrls(value);
  if (urls.length === 0) throw new UsageError(`coordinator URL '${value}' is not a URL`);
  for (const url of urls) checkOneUrl(url);
}

function checkOneUrl(url: string): void {
  switch (coordinatorUrlProblem(url)) {
    case 'not_a_url':
      throw new UsageError(`coordinator URL '${url}' is not a URL`);
    case 'not_http':
      throw new UsageError(`coordinator URL '${url}' must be http:// or https://`);
    case 'credentials':
      throw new UsageError(
        `coordinator URL '${withoutCredentials(url)}' carries a user name or password, which agentq does not send: give the token with --token or AGENTQ_TOKEN`,
      );
    case 'path':
      throw new UsageError(`coordinator URL '${url}' must have no path or query (e.g. http://host:8765)`);
  }
}
