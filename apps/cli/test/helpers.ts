import type { TestContext } from 'node:test';
import { createServer as createHttpServer, request, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:net';
import { Readable } from 'node:stream';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '@agentq/coordinator';
import { registerFormats, type Job } from '@agentq/protocol';
import { listenForTest, onPortAgain } from '@agentq/test-support';
import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { run, type CliIo } from '../src/index.js';

// TypeBox checks `format` only for registered formats, as a user validating the envelopes does
registerFormats();

export interface TestCoordinator {
  url: string;
  /** the coordinator's core, for tests that must act between two requests of the CLI */
  core: Awaited<ReturnType<typeof startCoordinator>>['core'];
  /** a client for the test itself (create jobs directly, read state) */
  client: AgentqClient;
  /** a launcher played by the test */
  launcher: FakeLauncher;
  /**
   * Stop the coordinator the way a restart does (parked waits answered with their snapshot, the
   * server closed), keep its port down until a client has tried it and been cut off, then start
   * it again on the same port with the same state (`forget`: with none, as a coordinator with a
   * memory store comes back). `whileDown` is called once the port is held down, before any
   * client has tried it. `refuseUntil`: instead, nothing listens on the port (connections are
   * refused: the client knows its call was never sent) until that promise resolves.
   */
  restart(o?: { forget?: boolean; whileDown?: () => void; refuseUntil?: Promise<void> }): Promise<void>;
  /** stop it for good (it is also stopped when the test ends) */
  stop(): Promise<void>;
}

/** A real coordinator on 127.0.0.1:0 for one test, closed (with its clients) when the test ends. */
export async function coordinator(
  t: TestContext,
  overrides: Parameters<typeof startCoordinator>[0] = {},
  /** e.g. a ManualClock, to drive history retention */
  deps: Parameters<typeof startCoordinator>[1] = {},
): Promise<TestCoordinator> {
  // a quick sweeper so that jobs with a short timeout_ms turn timed_out promptly
  const config = { pollTimeoutSeconds: 1, logLevel: 'silent', sweepIntervalMs: 20, ...overrides } as const;
  let c = await startCoordinator(config, deps);
  const client = new AgentqClient({ url: c.url });
  t.after(async () => {
    // the server first: closing it answers parked waits, so a request a failed test left
    // waiting cannot hold the client's close (and the test file) until its hold runs out
    await c.close();
    await client.close();
  });
  return {
    url: c.url,
    core: c.core,
    client,
    launcher: new FakeLauncher(client),
    restart: async (o = {}) => {
      await c.close();
      if (o.refuseUntil) {
        o.whileDown?.();
        await o.refuseUntil;
      } else {
        await downUntilTried(c.port, o.whileDown);
      }
      const { port, core } = c;
      c = await onPortAgain(port, () => startCoordinator({ ...config, port }, o.forget ? deps : { ...deps, core }));
    },
    stop: () => c.close(),
  };
}

/**
 * A port on which a coordinator is down: every connection is accepted and cut at once, until the
 * first one came (a client has seen the outage); then the port is free again.
 */
async function downUntilTried(port: number, whileDown?: () => void): Promise<void> {
  const server = createServer();
  const tried = new Promise<void>((resolve) =>
    server.on('connection', (socket) => {
      socket.destroy();
      resolve();
    }),
  );
  await onPortAgain(port, () => listen(server, port));
  whileDown?.();
  await tried;
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** `server.listen(port)` on 127.0.0.1, rejecting with its error (EADDRINUSE) instead of emitting it. */
function listen(server: Server, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** The launcher side of the protocol, played by the test with the real client. */
export class FakeLauncher {
  #id: string | undefined;
  constructor(readonly client: AgentqClient) {}

  async id(): Promise<string> {
    this.#id ??= (await this.client.register({ hostname: 'test-host', executor_type: 'fake', max_jobs: 4 })).launcher_id;
    return this.#id;
  }

  /** Long-poll until the coordinator hands out a job (the oldest pending one). */
  async claim(): Promise<Job> {
    const id = await this.id();
    for (;;) {
      const res = await this.client.poll(id, { holdSeconds: 1 });
      if (res?.job) return res.job;
    }
  }

  /** claim + started: the job is `running`. */
  async claimAndStart(): Promise<Job> {
    const job = await this.claim();
    await this.client.reportStarted(job.job_id, { launcher_id: await this.id() });
    return job;
  }

  async complete(jobId: string, result = 'done'): Promise<void> {
    await this.client.reportCompleted(jobId, { launcher_id: await this.id(), result });
  }

  async fail(jobId: string, error = 'boom'): Promise<void> {
    await this.client.reportFailed(jobId, { launcher_id: await this.id(), error });
  }

  async stopped(jobId: string): Promise<void> {
    await this.client.reportStopped(jobId, { launcher_id: await this.id(), signal: 'SIGTERM' });
  }

  async output(jobId: string, offset: number, data: string): Promise<void> {
    await this.client.reportOutput(jobId, { launcher_id: await this.id(), offset, data });
  }
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  isTTY?: boolean;
  signal?: AbortSignal;
  /** called with every chunk written to stderr */
  onStderr?: (chunk: string) => void;
  /** called with all of stdout so far after every write */
  onStdout?: (all: string) => void;
  /** what the CLI reads on stdin (`-p -`) */
  stdin?: string;
}

/** Run the CLI in-process against `url` (via AGENTQ_URL) and capture what it prints. */
export async function cli(url: string | undefined, argv: string[], o: CliOptions = {}): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    env: { ...(url === undefined ? {} : { AGENTQ_URL: url }), ...o.env },
    stdout: {
      write: (s: string) => {
        stdout += s;
        o.onStdout?.(stdout);
      },
    },
    stderr: {
      write: (s: string) => {
        stderr += s;
        o.onStderr?.(s);
      },
    },
    isTTY: o.isTTY ?? false,
    ...(o.signal ? { signal: o.signal } : {}),
    ...(o.stdin === undefined ? {} : { stdin: Readable.from([o.stdin]) }),
  };
  const code = await run(argv, io);
  return { code, stdout, stderr };
}

/**
 * Parse the one `--json` envelope on stdout and check it against `schema`; returns it typed.
 * Fails with the schema errors, so a wrong shape says which field.
 */
export function envelope<T>(r: CliRun, schema: TSchema): T {
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  if (lines.length !== 1) throw new Error(`expected exactly one line on stdout, got ${lines.length}: ${r.stdout}`);
  const value: unknown = JSON.parse(lines[0] as string);
  if (!Value.Check(schema, value)) {
    const errors = [...Value.Errors(schema, value)].slice(0, 5).map((e) => `${e.path}: ${e.message}`);
    throw new Error(`envelope does not match the schema:\n${errors.join('\n')}\n${lines[0]}`);
  }
  return value as T;
}

/**
 * A URL on which nothing listens: every connection to it is refused. Binding port 0, noting the
 * port and closing it left the port to whatever listened next (a test file running beside this
 * one, on port 0), and the "dead" URL then answered. So the port stays held, by a server of this
 * process on 127.0.0.1 for as long as the process runs (no other server can bind it there, on
 * 0.0.0.0 or on ::), and the URL names 127.0.0.2, another loopback address (Linux routes all of
 * 127/8 to the loopback interface), where nothing listens on it.
 */
export async function deadUrl(): Promise<string> {
  const server = createServer();
  await listen(server, 0);
  server.unref();
  return `http://127.0.0.2:${(server.address() as { port: number }).port}`;
}

/**
 * Run `hook(n)` (n = 1, 2, ...) before each call of `obj[method]` goes through, so a test acts at
 * an exact point between two requests of the CLI without sleeping. Returns what each call
 * resolved with, in call order.
 */
export function beforeEachCall<T extends object>(
  obj: T,
  method: keyof T & string,
  hook: (n: number) => Promise<void>,
): unknown[] {
  const original = obj[method] as unknown as (...args: unknown[]) => Promise<unknown>;
  const results: unknown[] = [];
  const spy = async function (...args: unknown[]) {
    const n = results.push(undefined);
    await hook(n);
    const out = await original.apply(obj, args);
    results[n - 1] = out;
    return out;
  };
  Object.defineProperty(obj, method, { value: spy, configurable: true, writable: true });
  return results;
}

/**
 * Resolves once `times` calls of `obj[method]` whose arguments satisfy `match` have begun (e.g.
 * the coordinator's core has parked a long-poll), letting every call through unchanged.
 */
export function whenCalled<T extends object>(
  obj: T,
  method: keyof T & string,
  match: (...args: never[]) => boolean,
  times = 1,
): Promise<void> {
  const original = obj[method] as unknown as (...args: unknown[]) => unknown;
  let seen = 0;
  return new Promise((resolve) => {
    const spy = function (...args: unknown[]) {
      const out = original.apply(obj, args);
      if (match(...(args as never[])) && ++seen === times) resolve();
      return out;
    };
    Object.defineProperty(obj, method, { value: spy, configurable: true, writable: true });
  });
}

/**
 * Record the first argument of every call of `obj[method]` (e.g. the request body the
 * coordinator's core receives), letting the call through unchanged.
 */
export function recordCalls<T extends object>(obj: T, method: keyof T & string): unknown[] {
  const original = obj[method] as unknown as (...args: unknown[]) => unknown;
  const calls: unknown[] = [];
  const spy = function (...args: unknown[]) {
    calls.push(args[0]);
    return original.apply(obj, args);
  };
  Object.defineProperty(obj, method, { value: spy, configurable: true, writable: true });
  return calls;
}

/**
 * A proxy in front of the coordinator that forwards everything, but closes the connection of the
 * first `method path` request (path with its query) after the coordinator has answered it: the
 * coordinator did it (made the job, the stop), the CLI never hears. `keys`: the Idempotency-Key of
 * every `method path` request, in order.
 */
export async function dropFirstAnswer(t: TestContext, target: string, method: string, path: string) {
  const upstream = new URL(target);
  const keys: string[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const matched = req.method === method && req.url === path;
      if (matched) keys.push(String(req.headers['idempotency-key']));
      const drop = matched && keys.length === 1;
      const out = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (up) => {
        if (drop) {
          up.resume();
          up.on('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      res.on('close', () => out.destroy());
      out.end(Buffer.concat(chunks));
    });
  });
  return { url: await listenForTest(t, server), keys };
}

/**
 * An HTTP gateway in front of the coordinator at `target` (as nginx or a load balancer would be),
 * listening until the test ends: its URL. `handle` answers a request itself, or passes it on with
 * `forward`; the coordinator's answer goes back as it is unless `onAnswer` takes it (returns true).
 */
export async function testGatewayServer(
  t: TestContext,
  target: string,
  handle: (req: IncomingMessage, res: ServerResponse, forward: (onAnswer?: (answer: IncomingMessage) => boolean) => void) => void,
): Promise<{ url: string; server: HttpServer }> {
  const upstream = new URL(target);
  const server = createHttpServer((req, res) =>
    handle(req, res, (onAnswer) => {
      const forward = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        if (onAnswer?.(answer) === true) return;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', () => req.socket.destroy());
      req.pipe(forward);
    }),
  );
  return { url: await listenForTest(t, server), server };
}

/** testGateway's URL alone (most tests never close the gateway before the test ends). */
export async function testGateway(...args: Parameters<typeof testGatewayServer>): Promise<string> {
  return (await testGatewayServer(...args)).url;
}
