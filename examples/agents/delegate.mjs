#!/usr/bin/env node
// An example executor for "Agents that start agents" (README): a scripted stand-in for a model
// that delegates through the agentq MCP server, as a Claude Code agent would. It follows the
// executor contract (docs/executors.md): the invocation as JSON on stdin, events as JSON lines on
// stdout. Run it with `AGENTQ_EXECUTOR=examples/agents/delegate.mjs npm start`.
//
// Its prompts:
//   delegate FILE...        start one helper session per file (start_session: each a child of
//                           this session), then end the turn: each helper's result resumes it
//   count words in FILE     a helper's work: count the file's lines and words
//   (a resume carrying <background-task-completed> results)
//                           read the results, look at all helpers (list_children), and say
//                           which are done, or that all are, with their answers
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const AGENTQ = fileURLToPath(new URL('../../apps/cli/bin/agentq.js', import.meta.url));
const emit = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
const say = (text) => emit({ type: 'output', text: `${text}\n` });

let input = '';
for await (const chunk of process.stdin) input += chunk;
const inv = JSON.parse(input);
emit({ type: 'session', session_id: inv.executor_session_id ?? `delegate-${inv.job_id}` });

/** The agentq MCP server, started as Claude Code starts it: `agentq mcp` with this job's variables. */
async function agentqTools() {
  const client = new Client({ name: 'delegate-example', version: '1.0.0' });
  // the launcher gave this process AGENTQ_SESSION_NAME, AGENTQ_JOB_ID, AGENTQ_COORDINATOR_URL
  // and, with tokens on, the job's own AGENTQ_TOKEN: the server acts as this session with them
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [AGENTQ, 'mcp'], env: process.env }));
  return {
    async call(name, args) {
      const r = await client.callTool({ name, arguments: args });
      if (r.isError) throw new Error(`${name}: ${r.content[0]?.text}`);
      return r.structuredContent;
    },
    close: () => client.close(),
  };
}

const prompt = inv.prompt.trim();
let result;
if (prompt.startsWith('delegate ')) {
  const files = prompt.slice('delegate '.length).split(/\s+/).filter(Boolean);
  const tools = await agentqTools();
  const started = [];
  for (const file of files) {
    const { job } = await tools.call('start_session', { prompt: `count words in ${file}` });
    say(`started ${job.session_name} (job ${job.job_id}) for ${file}`);
    started.push(job.session_name);
  }
  await tools.close();
  result = `Started ${started.length} helpers (${started.join(', ')}). Each one's result will resume me.`;
} else if (prompt.startsWith('count words in ')) {
  const file = prompt.slice('count words in '.length);
  const text = readFileSync(file, 'utf8');
  result = `${file}: ${text.split('\n').length - 1} lines, ${text.split(/\s+/).filter(Boolean).length} words`;
} else if (prompt.includes('<background-task-completed>')) {
  for (const m of prompt.matchAll(/<session>(.*?)<\/session>[\s\S]*?<status>(.*?)<\/status>/g)) say(`result from ${m[1]}: ${m[2]}`);
  const tools = await agentqTools();
  const { sessions } = await tools.call('list_children', {});
  await tools.close();
  const done = sessions.filter((s) => s.status === 'idle' && s.last_job_status !== null);
  const answers = done.map((s) => `- ${s.session_name}: ${s.last_result ?? s.last_error}`).join('\n');
  result =
    done.length === sessions.length
      ? `All ${sessions.length} helpers are done:\n${answers}`
      : `${done.length} of ${sessions.length} helpers are done so far:\n${answers}`;
} else {
  result = 'Give me "delegate FILE..." or "count words in FILE".';
}
emit({ type: 'result', text: result });
