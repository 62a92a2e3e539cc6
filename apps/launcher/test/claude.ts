import assert from 'node:assert/strict';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestContext } from 'node:test';
import { resolveExecutor, type LauncherDeps } from '../src/index.js';
import { captureLog, coordinator, fixture, launcher, settled, tempDir } from './helpers.js';
import { proxy } from './proxy.js';

/** Set-up shared by the claude-code executor's tests: the fake `claude` (fixtures/fake-claude.ts) on PATH. */

export interface ClaudeCall {
  args: string[];
  prompt: string;
  cwd: string;
  pid: number;
  left_child_pid?: number;
  tool_pid?: number;
  /** the session id claude started with (or resumed) */
  session_id: string;
  mcpConfig: { mcpServers: Record<string, { type: string; command: string; args: string[]; env: Record<string, string> }> } | null;
}

export const CLAUDE_EXECUTOR = fileURLToPath(new URL('../src/executors/claude-code.js', import.meta.url));
export const BASE_ARGS = ['-p', '--output-format', 'stream-json', '--verbose'];

/** A `claude` on PATH that runs the compiled fake, and the log of its calls. */
export function fakeClaude(t: TestContext): { path: string; calls: () => ClaudeCall[]; log: string } {
  const bin = tempDir(t);
  const log = join(bin, 'calls.jsonl');
  writeFileSync(join(bin, 'claude'), `#!/bin/sh\nexec "${process.execPath}" "${fixture('fake-claude.js')}" "$@"\n`);
  chmodSync(join(bin, 'claude'), 0o755);
  return {
    path: `${bin}:${process.env['PATH']}`,
    log,
    calls: () =>
      existsSync(log)
        ? readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as ClaudeCall)
        : [],
  };
}

/**
 * A coordinator (behind a recording proxy) and a claude-code launcher using the fake claude.
 * `around`: the coordinator's options, and how the proxy rewrites its answers (proxy's `answer`).
 */
export async function setup(
  t: TestContext,
  env: Record<string, string> = {},
  deps: Partial<LauncherDeps> = {},
  exitGraceMs = 10_000,
  around: { coordinator?: Parameters<typeof coordinator>[1]; answer?: Parameters<typeof proxy>[3] } = {},
) {
  const { c, client } = await coordinator(t, around.coordinator);
  const px = await proxy(t, c.url, undefined, around.answer);
  const claude = fakeClaude(t);
  await launcher(
    t,
    px.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'], exitGraceMs },
    { env: { ...process.env, PATH: claude.path, FAKE_CLAUDE_LOG: claude.log, ...env }, ...deps },
  );
  return { c, client, px, claude };
}

export const FAKE_USAGE = { input_tokens: 100, output_tokens: 20, cache_read_input_tokens: 3, cache_creation_input_tokens: 4 };

/**
 * A turn of `prompt` stopped once claude has printed something, with a kill grace long enough for
 * claude to end on the SIGTERM (by default); the job is `stopped`.
 */
export async function stoppedTurn(t: TestContext, sessionName: string, prompt: string, killGraceMs = 30_000) {
  const { c, client } = await coordinator(t);
  const claude = fakeClaude(t);
  const { log, waitFor } = captureLog();
  await launcher(
    t,
    c.url,
    { executor: resolveExecutor('claude-code', process.cwd()), passEnv: ['FAKE_CLAUDE_LOG'], killGraceMs },
    { env: { ...process.env, PATH: claude.path, FAKE_CLAUDE_LOG: claude.log }, log },
  );
  const job = await client.createJob({ type: 'start_session', session_name: sessionName, prompt });
  await waitFor((l) => l['msg'] === 'executor output' && l['job_id'] === job.job_id);
  await client.stopJob(job.job_id);
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'stopped');
  return { client, claude, job };
}
