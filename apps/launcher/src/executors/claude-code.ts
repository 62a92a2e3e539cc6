#!/usr/bin/env node
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { ExecutorInvocation } from '@agentq/protocol';
import { emit, readInvocation, runExecutor } from './contract.js';

/**
 * The Claude Code executor: runs one non-interactive turn of the `claude` CLI and maps its
 * stream to executor events.
 *
 *   claude -p --output-format stream-json --verbose [--resume <id>] [--agent <name>] [extra args]
 *
 * The prompt goes to claude's stdin (no argv length limit). Its stream is one JSON object per
 * line: `system`/`init` carries `session_id` (-> `session` event), `assistant` messages carry
 * content blocks (text -> `output`, tool_use -> a one-line `output`), and the last line is a
 * `result` object with `result`, `is_error` and `session_id` (-> `result`, or `error`).
 *
 * Settings (environment): AGENTQ_CLAUDE_BIN (default `claude` on PATH), AGENTQ_CLAUDE_ARGS
 * (extra arguments, split on spaces, e.g. `--permission-mode acceptEdits --model sonnet`).
 */
runExecutor(async () => {
  const inv = await readInvocation();
  const bin = process.env['AGENTQ_CLAUDE_BIN'] || 'claude';
  const args = claudeArgs(inv, process.env['AGENTQ_CLAUDE_ARGS'] ?? '');

  const child = spawn(bin, args, { cwd: inv.project_dir ?? process.cwd(), stdio: ['pipe', 'pipe', 'inherit'] });
  child.stdin.on('error', () => {});
  child.stdin.end(inv.prompt);

  let result: { text: string; isError: boolean } | undefined;
  let lastSession: string | undefined;
  const session = (id: unknown) => {
    if (typeof id === 'string' && id !== '' && id !== lastSession) {
      lastSession = id;
      emit({ type: 'session', session_id: id });
    }
  };
  const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
  lines.on('line', (line) => {
    const msg = parseJson(line);
    if (!msg) {
      if (line.trim() !== '') emit({ type: 'output', text: `${line}\n` });
      return;
    }
    switch (msg['type']) {
      case 'system':
        if (msg['subtype'] === 'init') session(msg['session_id']);
        break;
      case 'assistant':
        session(msg['session_id']);
        for (const text of assistantText(msg)) emit({ type: 'output', text });
        break;
      case 'result': {
        session(msg['session_id']);
        const text = typeof msg['result'] === 'string' ? msg['result'] : '';
        const isError = msg['is_error'] === true || (typeof msg['subtype'] === 'string' && msg['subtype'] !== 'success');
        result = { text: text || String(msg['subtype'] ?? ''), isError };
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
  });

  if (result && !result.isError && code === 0) {
    emit({ type: 'result', text: result.text });
    return;
  }
  if (result?.isError) throw new Error(`claude reported an error: ${result.text}`);
  throw new Error(signal ? `claude was killed by ${signal}` : `claude exited with code ${code} without a result`);
});

function claudeArgs(inv: ExecutorInvocation, extra: string): string[] {
  const args = ['-p', '--output-format', 'stream-json', '--verbose'];
  if (inv.mode === 'resume') {
    if (!inv.executor_session_id) {
      throw new Error(`cannot resume session "${inv.session_name}": no Claude Code session id is known for it`);
    }
    args.push('--resume', inv.executor_session_id);
  }
  if (inv.agent_name) args.push('--agent', inv.agent_name);
  args.push(...extra.split(/\s+/).filter(Boolean));
  return args;
}

function parseJson(line: string): Record<string, unknown> | undefined {
  if (!line.trimStart().startsWith('{')) return undefined;
  try {
    const v: unknown = JSON.parse(line);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The showable parts of an assistant message: text blocks, and one line per tool call. */
function assistantText(msg: Record<string, unknown>): string[] {
  const content = (msg['message'] as { content?: unknown } | undefined)?.content;
  if (!Array.isArray(content)) return [];
  const out: string[] = [];
  for (const block of content as Array<Record<string, unknown>>) {
    if (block['type'] === 'text' && typeof block['text'] === 'string') out.push(`${block['text']}\n`);
    else if (block['type'] === 'tool_use') {
      const input = JSON.stringify(block['input'] ?? {});
      out.push(`[tool ${String(block['name'])}] ${input.length > 200 ? `${input.slice(0, 200)}…` : input}\n`);
    }
  }
  return out;
}
