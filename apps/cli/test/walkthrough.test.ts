/**
 * The README's "Agents that start agents" walk-through, as a reader runs it: a coordinator, a
 * launcher running examples/agents/delegate.mjs in this repository, and the CLI. The lead session
 * delegates to two helpers through `agentq mcp`; their results resume it until it has both.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { CliCommandData, CliEnvelope, type JobDescriptor } from '@agentq/protocol';
import { cli, envelope } from './helpers.js';
import { coordinatorAndLauncher, quiet, REPO_ROOT } from './mcp-helpers.js';

/** Split a README command line into words: "double quotes" group, a # starts a comment. */
const words = (line: string): string[] =>
  [...line.replace(/\s+#.*$/, '').matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? (m[2] as string));

const count = (file: string) => {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8');
  return `${file}: ${text.split('\n').length - 1} lines, ${text.split(/\s+/).filter(Boolean).length} words`;
};

test('README walk-through: a lead session delegates to two helpers and is resumed until it has both results', async (t) => {
  const { url, client } = await coordinatorAndLauncher(t, {
    executor: join(REPO_ROOT, 'examples/agents/delegate.mjs'),
    projectDir: REPO_ROOT,
  });
  // the README's command, word for word
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const line = /^npx agentq start lead .*$/m.exec(readme)?.[0];
  assert.ok(line, 'the README walks through `npx agentq start lead ...`');
  assert.match(readme, /^AGENTQ_EXECUTOR=examples\/agents\/delegate\.mjs npm start/m);
  const [npx, bin, ...args] = words(line);
  assert.deepEqual([npx, bin, ...args], ['npx', 'agentq', 'start', 'lead', '-p', 'delegate README.md docs/sessions.md', '--wait']);
  const started = await cli(url, [...args, '--json']);
  assert.equal(started.code, 0, started.stdout + started.stderr);
  const first = envelope<{ ok: true; data: JobDescriptor }>(started, CliEnvelope(CliCommandData.start)).data;
  assert.match(first.result ?? '', /^Started 2 helpers \(lead-[0-9a-f]{6}, lead-[0-9a-f]{6}\)\. Each one's result will resume me\.$/);

  // the helpers are children of the lead; each one's result comes back as a resume of the lead
  const { children } = await client.getSession('lead');
  assert.equal(children.length, 2);
  const helpers = await Promise.all(children.map((name) => quiet(client, name)));
  assert.deepEqual(helpers.map((jobs) => jobs[0]!.result).sort(), [count('README.md'), count('docs/sessions.md')].sort());
  const jobs = await quiet(client, 'lead');
  const deliveries = jobs.filter((j) => j.callback_of !== null);
  assert.deepEqual(deliveries.flatMap((j) => j.callback_of!).sort(), helpers.map((h) => h[0]!.job_id).sort());
  const last = deliveries.at(-1)!;
  assert.equal(last.status, 'completed', last.error ?? '');
  assert.match(last.result!, /^All 2 helpers are done:\n- lead-\w+: .+\n- lead-\w+: .+$/);
  for (const file of ['README.md', 'docs/sessions.md']) assert.ok(last.result!.includes(count(file)), file);

  // what the README shows next: the tree
  const tree = await cli(url, ['sessions', 'lead']);
  assert.equal(tree.code, 0, tree.stderr);
  for (const name of children) assert.ok(tree.stdout.includes(name), tree.stdout);
});
