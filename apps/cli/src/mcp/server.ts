import type { Readable, Writable } from 'node:stream';
import { isCoordinatorAnswer, type AgentqClient } from '@agentq/client';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, type CallToolResult, type ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { argumentsRefused, failure, refusalNote, success, ToolError, type Answer, type ErrorNote } from './answers.js';
import { AnsweringTransport } from './answering-transport.js';
import { ANSWER_GRACE_MS, OutageRecord, throughOutage, type Attempt, type Resend } from './outage.js';
import { registerJobTools } from './tools-jobs.js';
import { registerSessionTools } from './tools-sessions.js';

/**
 * `agentq mcp`: the agentq tools for agents, as a stdio MCP server (the official SDK). Claude
 * Code gets it on every turn a launcher runs (apps/launcher/src/executors/claude-mcp.ts); any
 * MCP client can start it. See docs/mcp.md.
 */

/** Who is calling, when the server runs inside an agentq job (the launcher's variables). */
export interface Caller {
  /** AGENTQ_SESSION_NAME: the calling session; new sessions are its children by default */
  sessionName?: string;
  /** AGENTQ_JOB_ID: the calling turn */
  jobId?: string;
}

export interface ToolContext {
  client: AgentqClient;
  caller: Caller;
  /** a line for the server's operator (stderr: not the protocol's stream) */
  log?: (line: string) => void;
}

/** What the tools get: the context, and what the server has learnt of its coordinator. */
export interface ToolEnv extends ToolContext {
  /**
   * Whether the coordinator is known to be there: it has answered a call of this server, or the
   * server serves an agentq job (whose launcher took the job from it). A wait that then cannot
   * reach it waits out the outage (a restart) instead of reporting it at once as a wrong URL.
   */
  coordinatorReached: () => boolean;
  /**
   * One call to the coordinator, sent again while it is away (a restart) when `resend` allows,
   * for a bounded time (outage.ts). Every tool's calls go through it.
   */
  send: <T>(attempt: (a: Attempt) => Promise<T>, o: { resend: Resend; call: ToolCall; waitMs?: number }) => Promise<T>;
}

/** One call of a tool: its signal, and the coordinator's outages it met (said in its answer). */
export interface ToolCall {
  signal: AbortSignal;
  outage: OutageRecord;
}

type Shape = Record<string, z.ZodType>;

export type { ErrorNote } from './answers.js';

/** Adds one tool: its arguments are checked against `inputSchema`, its answer and errors shaped by answers.ts. */
export type AddTool = <S extends Shape>(
  name: string,
  config: { title: string; description: string; inputSchema: S; annotations?: ToolAnnotations },
  run: (args: z.infer<z.ZodObject<S>>, call: ToolCall) => Promise<Answer>,
  /** what an error's answer adds: structured fields (send_message's and stop's `outcome`), and a line for the model */
  onError?: (err: unknown, call: ToolCall) => ErrorNote,
) => void;

/** A tool as the server calls it: its arguments' schema, its call with arguments that passed it, what it adds to its errors. */
interface ToolEntry {
  args: z.ZodObject<Shape>;
  call: (args: unknown, signal: AbortSignal) => Promise<CallToolResult>;
  onError?: ((err: unknown, call: ToolCall) => ErrorNote) | undefined;
}

export const SERVER_NAME = 'agentq';

function instructions(caller: Caller): string {
  const who = caller.sessionName
    ? `You are session "${caller.sessionName}" of agentq.`
    : 'This server talks to an agentq coordinator.';
  return [
    who,
    'Delegate work with start_session: each child session runs in the background on a launcher.',
    caller.sessionName
      ? 'When a child of yours finishes you are resumed with its result in a new turn: you need not poll or wait. Start the children you need, then end your turn.'
      : 'Follow sessions you start with wait_for_jobs or get_status.',
  ].join(' ');
}

export function createMcpServer(ctx: ToolContext, version: string): McpServer {
  const server = new McpServer({ name: SERVER_NAME, version }, { instructions: instructions(ctx.caller) });
  let reached = ctx.caller.jobId !== undefined;
  /** One tool call's answer: `work`'s, or its error's, with the outages the call met. */
  const answer = async (
    name: string,
    signal: AbortSignal,
    work: (call: ToolCall) => Promise<Answer>,
    onError?: (err: unknown, call: ToolCall) => ErrorNote,
  ): Promise<CallToolResult> => {
    const outage = new OutageRecord(name, ctx.log);
    const seen = () => {
      const v = outage.view();
      return v ? { coordinator_outage: v } : {};
    };
    const call: ToolCall = { signal, outage };
    try {
      const a = await work(call);
      reached = true;
      const line = outage.line();
      return success({ ...a, message: line ? `${a.message}\n${line}` : a.message, data: { ...a.data, ...seen() } });
    } catch (err) {
      // an outage the call met ends with it: its last attempt's time counts as what that met
      outage.ended(err);
      // (a proxy's 502/503/504 is not the coordinator's answer: it may never have been reached)
      if (isCoordinatorAnswer(err)) reached = true;
      // what the tool says of its errors (send_message's outcome) comes first; a refusal (of the
      // call as given, by the coordinator, or for now) says so on every tool
      const note = onError?.(err, call) ?? refusalNote(err, { outage });
      return failure(err, { ...note?.data, ...seen() }, note?.line);
    }
  };
  const tools = new Map<string, ToolEntry>();
  const add: AddTool = (name, config, run, onError) => {
    // strict, as the coordinator is with a body: an argument left out for a misspelt name
    // (`parent` for `parent_session_name`, `timeout` for `timeout_ms`) would otherwise be
    // dropped without a word, and the call run as if it had not been given
    const args = z.strictObject(config.inputSchema);
    const call = (valid: unknown, signal: AbortSignal) => answer(name, signal, (c) => run(valid as z.infer<typeof args>, c), onError);
    tools.set(name, { args, call, onError });
    // the SDK lists the tool (the JSON schema of the strict object: additionalProperties false,
    // so a model is told what it will be refused); its calls are taken below
    server.registerTool(name, { ...config, inputSchema: args, annotations: { openWorldHint: false, ...config.annotations } }, (async (
      valid: unknown,
      extra: { signal: AbortSignal },
    ) => call(valid, extra.signal)) as never);
  };
  const env: ToolEnv = {
    ...ctx,
    coordinatorReached: () => reached,
    send: (attempt, o) =>
      throughOutage(attempt, {
        resend: o.resend,
        signal: o.call.signal,
        ...(o.waitMs === undefined ? {} : { waitMs: o.waitMs }),
        reached,
        graceMs: ANSWER_GRACE_MS,
        onRetry: (err, ms) => o.call.outage.retried(err, ms),
        onBack: (ms) => o.call.outage.back(ms),
      }),
  };
  registerSessionTools(add, env);
  registerJobTools(add, env);
  // Tool calls are taken here, not by the SDK's McpServer: it checks the arguments itself and
  // answers a refusal as bare text ("Input validation error: ..."), without the structured
  // content (`outcome`, `error`) of every other error of these tools, so an agent could not tell
  // "called wrong, nothing was done" from a failure. The check is the same (the tool's zod
  // schema); its refusal goes through the tool's own error path (send_message's outcome too).
  server.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const name = request.params.name;
    const tool = tools.get(name);
    if (!tool) {
      const known = [...tools.keys()].join(', ');
      const err = new ToolError('tool_not_found', `there is no tool named "${name}"; the tools are ${known}`, { tool: name });
      return answer(name, extra.signal, () => Promise.reject(err));
    }
    const parsed = await tool.args.safeParseAsync(request.params.arguments ?? {});
    if (parsed.success) return tool.call(parsed.data, extra.signal);
    const refused = argumentsRefused(parsed.error, Object.keys(tool.args.shape));
    return answer(name, extra.signal, () => Promise.reject(refused), tool.onError);
  });
  return server;
}

/**
 * The longest the server waits, once stdin has ended, for the calls in flight to be answered: a
 * tool call answers within MAX_WAIT_MS + ANSWER_GRACE_MS (55 s); the SDK's client gives up
 * after 60 s, when no answer is of use any more.
 */
export const DRAIN_MS = 60_000;

/**
 * Serve on stdio until the client closes its end (stdin ends: once the calls in flight are
 * answered) or `signal` aborts (at once). Nothing else may write to `output`: it carries the protocol.
 */
export async function serveStdio(
  ctx: ToolContext,
  version: string,
  o: { input: Readable; output: Writable; errors?: Writable; signal?: AbortSignal },
): Promise<void> {
  const server = createMcpServer({ ...ctx, log: (line) => o.errors?.write(`agentq mcp: ${line}\n`) }, version);
  const transport = new AnsweringTransport(new StdioServerTransport(o.input, o.output));
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
  });
  // what the SDK does not answer (a line that is not JSON-RPC, a message over its 10 MB buffer)
  // would otherwise pass without a word: said on stderr, which is not the protocol's stream
  let lastError: Error | undefined;
  server.server.onerror = (err) => {
    lastError = err;
    o.errors?.write(`agentq mcp: ${err.message}\n`);
  };
  await server.connect(transport);
  let closing = false;
  const close = () => {
    closing = true;
    void server.close().catch(() => {});
  };
  // stdin's end: the calls in flight are answered first (stdout is still open), each within the
  // time a tool call has, then the server closes. A signal closes it at once.
  let ending: NodeJS.Timeout | undefined;
  const end = () => {
    if (closing || ending) return;
    ending = setTimeout(close, DRAIN_MS);
    void transport.answered().then(close);
  };
  o.input.once('end', end);
  o.input.once('close', end);
  o.signal?.addEventListener('abort', close, { once: true });
  if (o.signal?.aborted) close();
  await closed;
  clearTimeout(ending);
  o.input.off('end', end);
  o.input.off('close', end);
  o.signal?.removeEventListener('abort', close);
  // the transport gave up by itself (its read buffer overflowed): the client is still there, and
  // every call in flight is lost, so this is a failure, not the end of the session
  if (!closing) throw new Error(`the MCP connection failed${lastError ? `: ${lastError.message}` : ''}`);
}
