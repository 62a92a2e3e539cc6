import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Job } from '@agentq/protocol';
import stringWidth from 'string-width';
import { describeJob, printable, printableLine, renderDescriptor, table, truncate } from '../src/index.js';
import { cli, coordinator } from './helpers.js';

/** The display column at which `needle` starts on `line`. */
const columnOf = (line: string, needle: string) => stringWidth(line.slice(0, line.indexOf(needle)));

describe('tables measure display width', () => {
  it('line up columns after CJK and emoji cells', () => {
    const text = table(
      ['SESSION', 'STATUS'],
      [
        ['plain', 'busy'],
        ['日本語のセッション', 'idle'],
        ['🚀 launch 👩‍💻', 'busy'],
        ['café', 'idle'],
      ],
    );
    const lines = text.split('\n');
    const at = columnOf(lines[0] as string, 'STATUS');
    for (const line of lines.slice(1)) {
      const status = line.includes('busy') ? 'busy' : 'idle';
      assert.equal(columnOf(line, status), at, `${JSON.stringify(line)} keeps STATUS at column ${at}`);
    }
    assert.equal(at, stringWidth('日本語のセッション') + 2);
  });

  it('cut long cells to a display width, on whole characters', () => {
    const cut = truncate('日本語日本語日本語', 7);
    assert.equal(cut, '日本語…');
    assert.ok(stringWidth(cut) <= 7);
    // never half an emoji sequence: the family stays whole or goes
    assert.equal(truncate('ab👨‍👩‍👧cd', 4), 'ab…');
    assert.equal(truncate('short', 10), 'short');
  });

  it('agentq list aligns a CJK session name and marks callback resumes as callback', async (t) => {
    const c = await coordinator(t);
    const boss = await c.client.createJob({ type: 'start_session', session_name: '親セッション', prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(boss.job_id);
    const kid = await c.client.createJob({
      type: 'start_session',
      session_name: 'kid',
      prompt: 'x',
      parent_session_name: '親セッション',
    });
    await c.launcher.claimAndStart();
    await c.launcher.complete(kid.job_id);
    const r = await cli(c.url, ['list']);
    assert.equal(r.code, 0);
    const [header, ...rows] = r.stdout.trimEnd().split('\n');
    assert.equal(rows.length, 1, 'only the pending callback is active');
    const row = rows[0] as string;
    assert.match(row, /^job_[0-9a-f]{12} {2}pending +callback +親セッション/);
    const created = /\d+(ms|s) ago/.exec(row)?.[0] as string;
    const cells = { STATUS: 'pending', TYPE: 'callback', SESSION: '親セッション', AGENT: ' - ', CREATED: created };
    for (const [col, value] of Object.entries(cells)) {
      const start = columnOf(row, value) + (value === ' - ' ? 1 : 0);
      assert.equal(start, columnOf(header as string, col), `${col} column`);
    }
  });
});

describe('agentq status text', () => {
  const job = {
    job_id: 'job_0123456789ab',
    type: 'start_session',
    session_name: 'alpha',
    agent_name: null,
    prompt: 'x',
    project_dir: null,
    parent_session_name: null,
    status: 'pending',
    launcher_id: null,
    error: null,
    created_at: new Date().toISOString(),
    claimed_at: null,
    started_at: null,
    completed_at: null,
    terminal: false,
    result: null,
    updated_at: new Date().toISOString(),
    timeout_ms: null,
    stop_requested_at: null,
    stop_reason: null,
    executor_session_id: null,
    callback_of: null,
    attempts: 0,
    lost_claims: 0,
    output_bytes: 0,
    requires: { gpu: 'a100' },
    pending_reason: 'no online launcher has gpu=a100',
    error_code: null,
    created_by: null,
    stopped_by: null,
    message_ids: null,
    usage: null,
    cost_usd: null,
    num_turns: null,
    duration_api_ms: null,
    max_cost_usd: null,
  } satisfies Job;
  const ctx = { json: false, url: 'http://127.0.0.1:8765', urlFromFlag: false, caFileFromFlag: undefined };

  it('says why a pending job waits, and what it requires', () => {
    const text = renderDescriptor(describeJob(job, ctx), Date.now());
    assert.match(text, /^ {2}requires {3}gpu=a100$/m);
    assert.match(text, /^ {2}waiting {4}no online launcher has gpu=a100$/m);
  });

  it('shows usage and cost once the job has them', () => {
    assert.doesNotMatch(renderDescriptor(describeJob(job, ctx), Date.now()), /usage/);
    const done = {
      ...job,
      status: 'completed',
      terminal: true,
      pending_reason: null,
      usage: { input_tokens: 12000, output_tokens: 800, cache_read_input_tokens: 0, cache_creation_input_tokens: 300 },
      cost_usd: 0.0421,
    } satisfies Job;
    assert.match(
      renderDescriptor(describeJob(done, ctx), Date.now()),
      /^ {2}usage {6}12,000 in · 800 out · cache 300 written · \$0\.0421$/m,
    );
  });
});

describe('text for people shows control characters, never sends them to the terminal', () => {
  // a session name and an error with escape sequences: set the title, clear the screen, erase the line above
  const name = 'evil\x1b]0;pwned\x07\x1b[2J';
  const error = 'oops\x1b[1A\x1b[2K\rjob_000000000000  completed';
  const ESC = '\x1b';

  it('list, status, sessions, watch and refusals show them as \\xNN; output prints the bytes as they are', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: name, prompt: 'x' });
    await c.launcher.claimAndStart();
    await c.launcher.output(job.job_id, 0, 'colour \x1b[31mred\x1b[0m\n');
    await c.launcher.fail(job.job_id, error);

    const runs = {
      list: await cli(c.url, ['list', '--all']),
      status: await cli(c.url, ['status', job.job_id]),
      sessions: await cli(c.url, ['sessions']),
      tree: await cli(c.url, ['sessions', name]),
      watch: await cli(c.url, ['watch', '--since', '0', '--job', job.job_id, '--count', '1']),
      refused: await cli(c.url, ['start', name, '-p', 'again']),
    };
    for (const [what, r] of Object.entries(runs)) {
      assert.ok(!r.stdout.includes(ESC) && !r.stderr.includes(ESC), `${what} sends no ESC: ${JSON.stringify(r)}`);
      assert.ok(`${r.stdout}${r.stderr}`.includes('evil\\x1b]0;pwned\\x07\\x1b[2J'), `${what} shows the name`);
    }
    assert.equal(runs.status.code, 4);
    assert.match(runs.status.stdout, /^ {2}error {6}oops\\x1b\[1A\\x1b\[2K\\x0djob_000000000000 {2}completed$/m);
    assert.equal(runs.refused.code, 2);

    // the job's own output is its bytes, like cat; --json escapes as JSON does
    const output = await cli(c.url, ['output', job.job_id]);
    assert.equal(output.stdout, 'colour \x1b[31mred\x1b[0m\n');
    const json = await cli(c.url, ['status', job.job_id, '--json']);
    assert.equal((JSON.parse(json.stdout) as { data: Job }).data.session_name, name);
  });

  it('a CR before a LF goes, tabs and line feeds stay', () => {
    assert.equal(printable('a\r\nb\tc\rd\x7f\x9b'), 'a\nb\tc\\x0dd\\x7f\\x9b');
  });
});

describe('text for people shows bidi controls and line breaks in one-line values, never sends them', () => {
  // a name that reads backwards after U+202E, and one whose line break would start a row or field of its own
  const bidi = 'report\u202egnp.exe';
  const broken = 'alpha\n  status     completed';

  it('status, list, sessions and the tree show \\u202e and \\n; --json keeps the name as it is', async (t) => {
    const c = await coordinator(t);
    const a = await c.client.createJob({ type: 'start_session', session_name: bidi, prompt: 'x' });
    const b = await c.client.createJob({ type: 'start_session', session_name: broken, prompt: 'x' });
    const runs = {
      statusA: await cli(c.url, ['status', a.job_id]),
      statusB: await cli(c.url, ['status', b.job_id]),
      list: await cli(c.url, ['list']),
      sessions: await cli(c.url, ['sessions']),
      tree: await cli(c.url, ['sessions', broken]),
    };
    for (const [what, r] of Object.entries(runs)) {
      assert.ok(!r.stdout.includes('\u202e'), `${what} sends no U+202E: ${JSON.stringify(r.stdout)}`);
      assert.ok(!r.stdout.includes(broken), `${what} sends no line break inside the name`);
    }
    assert.match(runs.statusA.stdout, /^ {2}session {4}report\\u202egnp\.exe$/m);
    assert.match(runs.statusB.stdout, /^ {2}session {4}alpha\\n {2}status {5}completed$/m);
    assert.doesNotMatch(runs.statusB.stdout, /^ {2}status /m);
    assert.ok(runs.list.stdout.includes('report\\u202egnp.exe') && runs.list.stdout.includes('alpha\\n  status'), runs.list.stdout);
    assert.ok(runs.sessions.stdout.includes('alpha\\n  status'), runs.sessions.stdout);
    assert.match(runs.tree.stdout, /^alpha\\n {2}status {5}completed {2}busy/);
    const json = await cli(c.url, ['status', b.job_id, '--json']);
    assert.equal((JSON.parse(json.stdout) as { data: Job }).data.session_name, broken);
    // the session_exists refusal: the name escaped in the message, the hint a template
    const refused = await cli(c.url, ['start', broken, '-p', 'again']);
    assert.equal(refused.code, 2);
    assert.ok(!refused.stderr.includes(broken), refused.stderr);
    assert.match(refused.stderr, /agentq resume <session> -p <prompt>/);
  });

  it('printable shows bidi controls and line separators; printableLine also line feeds and tabs', () => {
    assert.equal(printable('a\u202eb\u2066c\u2028d\ne\tf'), 'a\\u202eb\\u2066c\\u2028d\ne\tf');
    assert.equal(printableLine('a\nb\tc\u200fd\x1b'), 'a\\nb\\tc\\u200fd\\x1b');
  });
});
