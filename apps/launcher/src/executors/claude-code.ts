#!/usr/bin/env node
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { claudeArgs } from './claude-args.js';
import { mcpConfig, mcpEnabled, writeMcpConfig } from './claude-mcp.js';
import { assistantText, deniedText, NO_CONVERSATION, parseClaudeLine, readResult, type ClaudeResult } from './claude-stream.js';
import { MAX_EVENT_LINE_BYTES } from '@agentq/protocol';
import { emit, ExecutorError, readInvocation, runExecutor } from './contract.js';
import { describeExitCode, describeSignal } from '../exit-status.js';
import { outputKept, outputKeptFromEnv } from '../output-kept.js';

/**
 * The Claude Code executor: runs one non-interactive turn of the `claude` CLI and maps its
 * stream to executor events (see claude-args.ts for the command line, claude-stream.ts for the
 * stream, claude-mcp.ts for the agentq MCP server it is given).
 *
 * The prompt goes to claude's stdin (no argv length limit). Outcomes:
 * - a `success` result: a `result` event (text, usage, cost, turns) as soon as it arrives, so the
 *   launcher's exit grace covers a claude that never exits after it; the job completes;
 * - an `error_*` result or `is_error: true`, whatever the exit code: a `result` event (for its
 *   usage and cost), then the job fails with the subtype in the error;
 * - `--resume` of a session this host does not have ("No conversation found"): fails with code
 *   `session_not_on_host`;
 * - no result at all: fails with how claude ended.
 *
 * Settings (environment): AGENTQ_CLAUDE_BIN (default `claude` on PATH), AGENTQ_CLAUDE_ARGS (extra
 * arguments, split like a shell would, e.g. `--permission-mode acceptEdits --allowedTools "Read Grep"`),
 * AGENTQ_CLAUDE_MCP (false: no agentq MCP server), AGENTQ_CLAUDE_MCP_COMMAND (how to start it).
 */
runExecutor(async () => {
  const inv = await readInvocation();
  const env = process.env;
  const bin = env['AGENTQ_CLAUDE_BIN'] || 'claude';
  const mcp = mcpEnabled(env) ? writeMcpConfig(mcpConfig(inv, env)) : undefined;
  let claude: ChildProcess | undefined;
  let stopped = false;
  const die = () => process.kill(process.pid, 'SIGTERM');
  // A stop is SIGTERM to the whole group, claude included. It must not leave the config behind.
  // And the turn is over once claude has exited, not before: it ends its Bash commands and writes
  // its transcript first. Until then this process stays, so the launcher reports the job (and
  // may run the session's next turn) only after; then it dies by the signal, as a stopped
  // executor does. The launcher's SIGKILL after --kill-grace bounds the wait. (The signal is not
  // passed on to claude: it has it already, and a second one may cut its shutdown short.)
  // Not at claude's 'exit' but once runClaude is done: node emits 'exit' before claude's stdout is
  // read to its end, and what claude printed last would go unread.
  const onTerm = () => {
    mcp?.remove();
    if (claude?.pid !== undefined) stopped = true;
    else die();
  };
  process.once('SIGTERM', onTerm);
  try {
    const args = claudeArgs(inv, { extraArgs: env['AGENTQ_CLAUDE_ARGS'] ?? '', mcpConfigPath: mcp?.path });
    return await runClaude(bin, args, inv.project_dir ?? process.cwd(), inv.prompt, {
      resuming: inv.mode === 'resume' ? (inv.executor_session_id ?? '') : undefined,
      jobId: inv.job_id,
      // claude reads its MCP config when it starts: once it says it is up, the file can go
      onStarted: () => mcp?.remove(),
      onSpawn: (child) => (claude = child),
    });
  } finally {
    process.removeListener('SIGTERM', onTerm);
    mcp?.remove();
    if (stopped) die();
  }
});

async function runClaude(
  bin: string,
  args: string[],
  cwd: string,
  prompt: string,
  o: { resuming: string | undefined; jobId: string; onStarted: () => void; onSpawn: (child: ChildProcess) => void },
): Promise<void> {
  const child = spawn(bin, args, { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  o.onSpawn(child);
  child.stdin.on('error', () => {});
  child.stdin.end(prompt);

  let result: ClaudeResult | undefined;
  /** the result's answer is too long for an event line */
  let tooLarge: ExecutorError | undefined;
  let lastSession: string | undefined;
  let noConversation = false;
  /** claude's last stderr lines: why it ended, when it ends without a result */
  const stderrTail: string[] = [];
  // A started session's id is passed on from the init line, so that a turn stopped before its
  // result can still be resumed. A resumed one keeps its id unless the result names another:
  // claude 2.1.x may put an id of the moment on the lines before the result (the init line, hook
  // lines) whose transcript it never writes, and a later resume of that id finds nothing
  const session = (id: unknown, fromResult = false) => {
    if (o.resuming !== undefined && !fromResult) return;
    // after the result the turn is over (see the second result below): an id on a later line is
    // not the session's
    if (result !== undefined && !fromResult) return;
    if (typeof id === 'string' && id !== '' && id !== lastSession) {
      lastSession = id;
      emit({ type: 'session', session_id: id });
    }
  };
  // claude's stderr is passed on (the launcher logs it and keeps its tail) and watched for the
  // one failure that needs a code: a resumed session this host does not have
  createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line) => {
    if (o.resuming !== undefined && NO_CONVERSATION.test(line)) noConversation = true;
    if (line.trim() !== '') {
      stderrTail.push(line.length > STDERR_LINE_CHARS ? `${line.slice(0, STDERR_LINE_CHARS)}…` : line);
      if (stderrTail.length > STDERR_TAIL_LINES) stderrTail.shift();
    }
    process.stderr.write(`${line}\n`);
  });
  createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
    const msg = parseClaudeLine(line);
    if (!msg) {
      if (line.trim() !== '') emit({ type: 'output', text: `${line}\n` });
      return;
    }
    switch (msg['type']) {
      case 'system':
        if (msg['subtype'] === 'init') {
          session(msg['session_id']);
          o.onStarted();
        }
        break;
      case 'assistant':
        session(msg['session_id']);
        for (const text of assistantText(msg)) emit({ type: 'output', text });
        break;
      case 'result': {
        // The first result is the turn's, and the only one passed on. claude -p prints one, as its
        // last line; a second would make the job's answer, its cost and its session depend on
        // whether it came before the launcher's exit grace (which starts at the first) ran out.
        // Nothing of it counts (its error would fail a turn that succeeded); stderr says it came.
        if (result !== undefined) {
          const subtype = typeof msg['subtype'] === 'string' ? msg['subtype'] : 'unknown';
          process.stderr.write(`claude printed a second result (${subtype}) after the turn's; it is ignored\n`);
          break;
        }
        // a claude that answers has read its config, init line or not (claude 2.x answers a resume
        // it cannot do with a result alone); remove it now, before the events that start the
        // launcher's exit grace, whose end (SIGKILL, if SIGTERM is not enough) may leave no
        // chance to clean up at exit
        o.onStarted();
        result = readResult(msg);
        for (const text of deniedText(msg)) emit({ type: 'output', text });
        // only an error result can say the session is missing: a successful answer may quote the
        // words (a callback resume carries a child's session_not_on_host error, and the model
        // talks about it), and is an answer all the same
        if (o.resuming !== undefined && result.isError && NO_CONVERSATION.test(`${result.text} ${result.errors}`)) noConversation = true;
        // claude 2.x answers a resume of a session it does not have with a result carrying the id of
        // a fresh session it never saved: passed on, it would replace the session's real id
        if (!noConversation) session(msg['session_id'], true);
        // at once, not at exit: the launcher's exit grace starts from here; and so does an error
        // result's error, which a claude that hangs after it (killed at the end of the grace)
        // would otherwise never send, leaving the result to stand as a success
        // An answer longer than an event line may be: the launcher would not read the event, and
        // the turn's accounting would be lost with it. The event goes without its text, and the
        // error says the limit and where the answer can be read
        const eventBytes = Buffer.byteLength(JSON.stringify(result.event));
        if (eventBytes > MAX_EVENT_LINE_BYTES) {
          tooLarge = tooLargeError(result, eventBytes, o.jobId, lastSession);
          emit({ ...result.event, text: '' });
        } else {
          emit(result.event);
        }
        {
          const failure = tooLarge ?? failureOf(result, noConversation ? o.resuming : undefined);
          if (failure) emit({ type: 'error', message: failure.message, ...(failure.code ? { code: failure.code } : {}) });
        }
        break;
      }
      default:
        // user (tool results), stream_event, ...: not shown
        break;
    }
  });

  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'ENOENT'
          ? new Error(`the claude CLI (${bin}) was not found; install it or set AGENTQ_CLAUDE_BIN`)
          : err,
      ),
    );
    child.once('close', (c, s) => resolve([c, s]));
    // 'close' waits for every holder of claude's stdout and stderr, and a process claude left
    // running (a tool, an MCP server) may hold them for ever: the turn would end only at the
    // launcher's idle timeout. What is in the pipes is read within the bound, then they are closed.
    child.once('exit', (c, s) => {
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        resolve([c, s]);
      }, PIPE_DRAIN_MS).unref();
    });
  });

  const failure = tooLarge ?? failureOf(result, noConversation ? o.resuming : undefined);
  if (failure) throw failure;
  if (result) {
    if (code !== 0) process.stderr.write(`claude exited with ${signal ?? `code ${code}`} after a successful result\n`);
    return;
  }
  // the error event is the job's error, so the launcher adds no stderr of its own: claude's last
  // lines (a refused option, a missing login...) say why it ended
  // with what ended it in words: "code 143" alone tells most readers nothing
  const how = signal
    ? `claude was killed by ${describeSignal(signal)} before its result`
    : `claude exited with code ${code === null ? 'unknown' : describeExitCode(code)} without a result`;
  throw new Error(stderrTail.length > 0 ? `${how}; stderr:\n${stderrTail.join('\n')}` : how);
}

/** After claude exits, how long its stdout and stderr may stay open (as the launcher's PIPE_DRAIN_MS). */
const PIPE_DRAIN_MS = 2_000;

/** How much of claude's stderr the error of a turn without a result quotes. */
const STDERR_TAIL_LINES = 20;
const STDERR_LINE_CHARS = 1000;

/**
 * The error of a turn whose answer does not fit in an event line: how long it is, the limit, and
 * where it can be read. Its text was output as claude streamed it (the assistant's text blocks),
 * of which the coordinator keeps the newest JOB_OUTPUT_MAX_BYTES (the figure the launcher gives in
 * AGENTQ_JOB_OUTPUT_MAX_BYTES when the coordinator said it); claude's transcript has all of it.
 */
function tooLargeError(result: ClaudeResult, eventBytes: number, jobId: string, session: string | undefined): ExecutorError {
  const what = result.isError ? `${result.subtype} result` : 'answer';
  return new ExecutorError(
    `claude's ${what} makes a result event of ${(eventBytes / (1024 * 1024)).toFixed(1)} MiB (${eventBytes} bytes), over the ${MAX_EVENT_LINE_BYTES / (1024 * 1024)} MiB an executor event may carry ` +
      `(the launcher's limit), so it cannot be the job's result. Its text is in the job's output as claude wrote it: ` +
      `GET /jobs/${jobId}/output, \`agentq output ${jobId}\` (${outputKept(outputKeptFromEnv(process.env))}); ` +
      `all of it is in claude's transcript${session ? ` of session ${session}` : ''} on the launcher's host, under ~/.claude/projects/`,
    'executor_event_too_large',
  );
}

/** What went wrong, if anything: the session a resume found missing (`resuming`), or an error result. */
function failureOf(result: ClaudeResult | undefined, resuming: string | undefined): ExecutorError | undefined {
  // a successful result stands, whatever was printed on stderr: the session was there
  if (resuming !== undefined && !(result && !result.isError)) {
    return new ExecutorError(
      `Claude Code has no session ${resuming} on this host ("No conversation found"): a session can only be resumed on the host, and in the directory, where it ran`,
      'session_not_on_host',
    );
  }
  if (!result?.isError) return undefined;
  const detail = result.text || result.errors;
  const what = result.subtype === 'success' ? 'an error (is_error: true)' : result.subtype;
  return new ExecutorError(`claude reported ${what}${detail ? `: ${detail}` : ''}`);
}
