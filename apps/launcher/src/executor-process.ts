import { spawn } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import type { TObject } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { ExecutorEvent, MAX_EVENT_LINE_BYTES, type ExecutorInvocation } from '@agentq/protocol';
import { toError } from '@agentq/client';
import type { ExecutorSpec } from './executors/index.js';
import { isSameGroup, killGroupTree, killGroupTreeSync, startTimeOf } from './lifeline/proc.js';
import { outputKept } from './output-kept.js';

/** How an executor process ended. */
export interface ExecutorExit {
  /** exit code, or null when a signal ended it or it never started */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** the last lines of its stderr (at most STDERR_TAIL_BYTES) */
  stderrTail: string;
  /** set when the program could not be started at all (missing command, bad cwd, ...) */
  spawnError: Error | null;
  /**
   * true when something outside the executor's process group (a daemon it started, `setsid ...
   * &`) still held its stdout/stderr after the executor exited: we stopped reading them
   */
  pipesAbandoned: boolean;
}

export interface ExecutorProcessOptions {
  cwd: string;
  env: Record<string, string>;
  /** between SIGTERM and SIGKILL when the process group is killed */
  killGraceMs: number;
  /**
   * After the executor exits, how long its stdout/stderr may stay open before they are closed
   * on our side (default PIPE_DRAIN_MS). Only a process outside its group can hold them that long.
   */
  pipeDrainMs?: number;
  onEvent: (event: ExecutorEvent) => void;
  onStderrLine?: (line: string) => void;
  /** an event was read without optional fields that were not valid (see parseEventLine) */
  onFieldsDropped?: (type: string, fields: string[]) => void;
  /** called for every chunk the executor writes to stdout or stderr (the watchdog's sign of life) */
  onActivity?: () => void;
  /**
   * The most of a job's output the coordinator keeps, as it last said it (`max_output_bytes`;
   * undefined when it did not), for the error of an event line too long to read
   */
  outputKeptBytes?: () => number | undefined;
}

const STDERR_TAIL_BYTES = 4096;
/** Default of ExecutorProcessOptions.pipeDrainMs. */
export const PIPE_DRAIN_MS = 2_000;
/** A stdout line longer than this is passed on as output in pieces instead of buffered whole. */
const MAX_LINE_BYTES = 1024 * 1024;
/**
 * An event line (one whose first non-blank character is `{`) may be this long (the protocol's
 * constant): a `result` carries the agent's whole answer. A longer one is not read: the job fails
 * with `executor_event_too_large` (docs/executors.md).
 */
export { MAX_EVENT_LINE_BYTES };
const KNOWN_EVENT_TYPES = new Set(['output', 'session', 'result', 'error']);

/**
 * One executor run (the original launcher's JobExecutor, process side): the program is spawned in its own
 * process group (`detached`), gets the invocation as one JSON line on stdin, and its stdout is
 * read as JSON lines of ExecutorEvent. Killing always targets the whole group, so tools the agent
 * started die with it.
 */
export class ExecutorProcess {
  readonly pid: number | undefined;
  /**
   * The leader's start time, taken at spawn: the group id is the leader's pid, which can be given
   * to another process (and group) once the group is gone; a signal goes only to the group while
   * it is still this one (isSameGroup). Null where it could not be read: then signals go unchecked.
   */
  readonly #startTime: string | null;
  /** resolves once the process has exited and its output has been read */
  readonly exited: Promise<ExecutorExit>;
  /**
   * Resolves once nothing of the process group can be left running: it is gone, or it was sent
   * SIGKILL. Until then the lifeline keeps watching it.
   */
  readonly released: Promise<void>;
  #release: () => void = () => {};
  readonly #killGraceMs: number;
  #ended = false;
  #leaderExited = false;
  #killTimer: NodeJS.Timeout | undefined;
  /** SIGTERM has been sent (terminate) */
  #terminating = false;
  /** kills of the group on a worker thread under way (#signalGroup 'off-loop') */
  #killingTree = 0;

  constructor(spec: ExecutorSpec, invocation: ExecutorInvocation, options: ExecutorProcessOptions) {
    this.#killGraceMs = options.killGraceMs;
    this.released = new Promise<void>((resolve) => (this.#release = resolve));
    const child = spawn(spec.command, spec.args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.pid = child.pid;
    // not reaped before this turn of the event loop ends: the pid is still this child's
    this.#startTime = this.pid === undefined ? null : startTimeOf(this.pid);

    let stderrTail = '';
    // a character split between two reads must not become two U+FFFD in the job's error
    const stderrDecoder = new StringDecoder('utf8');
    const stdoutLines = new LineSplitter(
      (line) => {
        const event = parseEventLine(line, options.onFieldsDropped);
        if (event) options.onEvent(event);
      },
      () =>
        options.onEvent({
          type: 'error',
          message: tooLargeMessage(invocation.job_id, options.outputKeptBytes?.()),
          code: 'executor_event_too_large',
        }),
      // a text line too long to hold whole is output as it comes, never read as an event
      (text) => options.onEvent({ type: 'output', text }),
    );
    const stderrLines = new LineSplitter((line) => options.onStderrLine?.(line));
    // Out of file descriptors (EMFILE, ENFILE), node returns the child without its pipes and emits
    // 'error' on the next tick: nothing here may assume them, or the constructor throws and that
    // 'error', with no listener yet, takes the whole launcher down. The 'error' below ends the run.
    child.stdout?.on('data', (chunk: Buffer) => {
      options.onActivity?.();
      stdoutLines.push(chunk);
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      options.onActivity?.();
      stderrLines.push(chunk);
      stderrTail = keepTail(stderrTail + stderrDecoder.write(chunk));
    });
    // an executor that exits without reading stdin makes our write fail with EPIPE: not an error
    child.stdin?.on('error', () => {});
    child.stdin?.end(`${JSON.stringify(invocation)}\n`);

    this.exited = new Promise<ExecutorExit>((resolve) => {
      let spawnError: Error | null = null;
      let pipesAbandoned = false;
      let drainTimer: NodeJS.Timeout | undefined;
      child.once('error', (err) => {
        spawnError = toError(err);
        // 'close' does not follow when the spawn itself failed
        if (child.pid === undefined) finish(null, null);
      });
      child.once('exit', (code, signal) => {
        this.#leaderExited = true;
        // the group leader is gone; anything it left behind in its group is part of this job and
        // must not outlive it (nor keep our stdout pipe open)
        void this.#signalGroup('SIGTERM');
        this.#armKill();
        // 'close' waits for every holder of the pipes, and one outside the group (a daemon, `setsid
        // cmd &`) is not killed with it: without a bound the job would never end. What is already
        // in the pipes is read within the bound; then the pipes are closed on our side (after one
        // more I/O phase, so that data that was waiting when the timer fired is not lost).
        drainTimer = setTimeout(
          () =>
            setImmediate(() => {
              if (this.#ended) return;
              pipesAbandoned = true;
              child.stdout!.destroy();
              child.stderr!.destroy();
              finish(code, signal);
            }),
          options.pipeDrainMs ?? PIPE_DRAIN_MS,
        );
        drainTimer.unref();
      });
      child.once('close', (code, signal) => finish(code, signal));
      const finish = (code: number | null, signal: NodeJS.Signals | null) => {
        if (this.#ended) return;
        this.#ended = true;
        clearTimeout(drainTimer);
        // members of the group that ignore SIGTERM still get the SIGKILL; if none is left, the
        // timer goes (the group id may be reused once the group is gone)
        if (!this.#leaderExited || !this.#groupExists()) {
          clearTimeout(this.#killTimer);
          this.#killTimer = undefined;
          this.#release();
        }
        stdoutLines.end();
        stderrLines.end();
        stderrTail = keepTail(stderrTail + stderrDecoder.end());
        resolve({ code, signal, stderrTail: tailLines(stderrTail), spawnError, pipesAbandoned });
      };
    });
  }

  /**
   * SIGTERM the process group, SIGKILL it after the grace period, and resolve with how the
   * executor ended once it has. Once: asked again (a stop after the exit grace ran out, say), it
   * waits on the first. A second SIGTERM cuts short the shutdown the first began (the claude-code
   * executor waits for claude on the first and dies of the second, so the job was reported while
   * claude still ended its turn); the SIGKILL after the grace bounds the wait all the same.
   */
  async terminate(): Promise<ExecutorExit> {
    if (!this.#ended && !this.#terminating) {
      this.#terminating = true;
      void this.#signalGroup('SIGTERM');
      this.#armKill();
    }
    return this.exited;
  }

  /** SIGKILL the group now, synchronously (forced exit of the launcher, or a hung executor). */
  killNow(): void {
    // after the end, a pending kill timer means members of the group were still alive; a kill
    // under way on a worker thread ('off-loop') would be cut short by the exit, the group stopped
    if (!this.#ended || this.#killTimer || this.#killingTree > 0) void this.#signalGroup('SIGKILL', 'now');
    if (this.#ended) {
      clearTimeout(this.#killTimer);
      this.#killTimer = undefined;
      this.#release();
    }
  }

  #armKill(): void {
    if (this.#killTimer || this.#ended) return;
    this.#killTimer = setTimeout(() => {
      this.#killTimer = undefined;
      void this.#signalGroup('SIGKILL', 'off-loop').then(() => {
        if (this.#ended) this.#release();
      });
    }, this.#killGraceMs);
    this.#killTimer.unref();
  }

  #groupExists(): boolean {
    if (this.pid === undefined || !this.#isOurGroup()) return false;
    try {
      process.kill(-this.pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Whether the group `pid` is still the one this executor started. A SIGKILL kept for members that
   * outlived the leader comes after --kill-grace: if they died meanwhile, the id may by then be an
   * unrelated group's (another executor's, a shell job's), which must not be stopped and killed.
   */
  #isOurGroup(): boolean {
    return this.pid !== undefined && (this.#startTime === null || isSameGroup(this.pid, this.#startTime));
  }

  /**
   * Signals the group if it is still ours. SIGKILL goes to what the group's members started
   * outside it too (see killGroupTreeSync), `when` says how: 'now' on this thread, before this
   * returns (the launcher is about to exit); 'off-loop' on a worker thread, the returned promise
   * resolving once it is done. SIGTERM does not, as the member that started them (claude) ends
   * them on its SIGTERM.
   */
  #signalGroup(signal: NodeJS.Signals, when: 'now' | 'off-loop' = 'now'): Promise<void> {
    if (this.pid === undefined || !this.#isOurGroup()) return Promise.resolve();
    if (signal === 'SIGKILL' && when === 'now') {
      killGroupTreeSync(this.pid);
      return Promise.resolve();
    }
    if (signal === 'SIGKILL') {
      this.#killingTree++;
      // checked again on the worker, which starts later: the group may be gone, its id another's
      const group = this.#startTime === null ? this.pid : { pgid: this.pid, start_time: this.#startTime };
      return killGroupTree(group).finally(() => this.#killingTree--);
    }
    try {
      process.kill(-this.pid, signal);
    } catch {
      // ESRCH: the group is already gone
    }
    return Promise.resolve();
  }
}

/**
 * The error of a job whose executor printed an event line past MAX_EVENT_LINE_BYTES: the limit,
 * what was lost, and where what the executor printed as output can be read (and how much of it
 * the coordinator keeps: `keptBytes`, the figure it gave, or the setting and its default).
 */
function tooLargeMessage(jobId: string, keptBytes: number | undefined): string {
  return (
    `the executor printed an event line over the ${MAX_EVENT_LINE_BYTES / (1024 * 1024)} MiB an executor event may carry ` +
    `(${MAX_EVENT_LINE_BYTES} bytes, the launcher's limit): it was not read, so the job has no result (an answer that long cannot be reported). ` +
    `What the executor printed as output is in the job's output: GET /jobs/${jobId}/output, \`agentq output ${jobId}\` ` +
    `(${outputKept(keptBytes)})`
  );
}

/**
 * Decode one stdout line: a valid event, `output` for anything else, null for unknown event types.
 * An event whose own fields are valid but whose optional ones are not (`"cost_usd": null`, a
 * `usage` without its four counts, an error `code` off the pattern) is still that event, without
 * them: the answer of a turn must not be printed as output and lost for a cost it could not
 * give. The fields left out go to `onDropped`.
 */
export function parseEventLine(line: string, onDropped?: (type: string, fields: string[]) => void): ExecutorEvent | null {
  const trimmed = line.trimStart();
  if (trimmed.startsWith('{')) {
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch {
      return { type: 'output', text: `${line}\n` };
    }
    if (Value.Check(ExecutorEvent, value)) return value;
    const type = (value as { type?: unknown }).type;
    // a newer executor may emit event types this launcher does not know: skip them, don't print them
    if (typeof type === 'string' && !KNOWN_EVENT_TYPES.has(type)) return null;
    const salvaged = typeof type === 'string' ? withoutInvalidOptionals(type, value as Record<string, unknown>) : undefined;
    if (salvaged) {
      onDropped?.(type as string, salvaged.dropped);
      return salvaged.event;
    }
  }
  return { type: 'output', text: `${line}\n` };
}

/** The event without its invalid optional fields, if its required ones are valid. */
function withoutInvalidOptionals(type: string, value: Record<string, unknown>): { event: ExecutorEvent; dropped: string[] } | undefined {
  const member = (ExecutorEvent.anyOf as TObject[]).find((m) => (m.properties['type'] as { const?: unknown }).const === type);
  if (!member) return undefined;
  const required = new Set(member.required ?? []);
  const event: Record<string, unknown> = {};
  const dropped: string[] = [];
  for (const [field, schema] of Object.entries(member.properties)) {
    if (!(field in value)) continue;
    if (Value.Check(schema, value[field])) event[field] = value[field];
    else if (required.has(field)) return undefined;
    else dropped.push(field);
  }
  return Value.Check(ExecutorEvent, event) ? { event, dropped } : undefined;
}

/**
 * Split a byte stream into UTF-8 lines (without the newline), emitting each as it completes. A
 * line past MAX_LINE_BYTES is emitted in pieces, unless it is an event (it starts with `{`), which
 * may grow to MAX_EVENT_LINE_BYTES: past that, `onOversized` is called and the rest of the line
 * is skipped (a piece of JSON is neither an event nor output anyone wants). The pieces go to
 * `onPiece` when given, as text exactly as it came (a CR included; the last one ends with the
 * line's newline, none of the others has one); without it, to `onLine` as lines of their own.
 */
export class LineSplitter {
  readonly #decoder = new StringDecoder('utf8');
  /** the current line's text not yet passed on, in pieces (each chunk is scanned once) */
  #parts: string[] = [];
  /** its bytes (since the last piece passed on, for a text line) */
  #bytes = 0;
  /** what the current line is, once its first non-blank character has come */
  #kind: 'blank' | 'event' | 'text' | 'skip' = 'blank';
  /** pieces of the current line have been passed on already */
  #continued = false;
  constructor(
    readonly onLine: (line: string) => void,
    readonly onOversized: () => void = () => {},
    readonly onPiece?: (text: string) => void,
  ) {}

  push(chunk: Buffer): void {
    const text = this.#decoder.write(chunk);
    for (let start = 0; ; ) {
      const nl = text.indexOf('\n', start);
      this.#add(text.slice(start, nl < 0 ? text.length : nl));
      if (nl < 0) return;
      this.#endLine();
      start = nl + 1;
    }
  }

  end(): void {
    this.#add(this.#decoder.end());
    if (this.#kind !== 'skip' && this.#parts.length > 0) {
      if (this.#continued && this.onPiece) this.onPiece(this.#take());
      else this.onLine(this.#take());
    }
    this.#reset();
  }

  #add(piece: string): void {
    if (piece === '' || this.#kind === 'skip') return;
    if (this.#kind === 'blank') {
      const first = piece.search(/\S/);
      if (first >= 0) this.#kind = piece[first] === '{' ? 'event' : 'text';
    }
    this.#parts.push(piece);
    this.#bytes += Buffer.byteLength(piece);
    if (this.#kind === 'event') {
      if (this.#bytes <= MAX_EVENT_LINE_BYTES) return;
      this.#reset();
      this.#kind = 'skip';
      this.onOversized();
    } else if (this.#bytes > MAX_LINE_BYTES) {
      // a long text line goes on in pieces; what follows is still text, whatever it starts with
      const piece = this.#take();
      if (this.onPiece) this.onPiece(piece);
      else this.onLine(piece);
      this.#kind = 'text';
      this.#continued = true;
    }
  }

  #endLine(): void {
    if (this.#kind === 'skip') {
      // nothing of the line is passed on
    } else if (this.#continued && this.onPiece) {
      this.onPiece(`${this.#take()}\n`);
    } else {
      this.onLine(this.#take().replace(/\r$/, ''));
    }
    this.#reset();
  }

  #take(): string {
    const line = this.#parts.join('');
    this.#parts = [];
    this.#bytes = 0;
    return line;
  }

  #reset(): void {
    this.#parts = [];
    this.#bytes = 0;
    this.#kind = 'blank';
    this.#continued = false;
  }
}

/** The last STDERR_TAIL_BYTES characters, not starting with the second half of a surrogate pair. */
function keepTail(text: string): string {
  if (text.length <= STDERR_TAIL_BYTES) return text;
  const tail = text.slice(-STDERR_TAIL_BYTES);
  const first = tail.charCodeAt(0);
  return first >= 0xdc00 && first <= 0xdfff ? tail.slice(1) : tail;
}

function tailLines(text: string, maxLines = 20): string {
  const lines = text.replace(/\s+$/, '').split('\n');
  // the first line of a cut tail (keepTail) is usually a fragment
  if (text.length >= STDERR_TAIL_BYTES - 1 && lines.length > 1) lines.shift();
  return lines.slice(-maxLines).join('\n');
}
