import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type JobDescriptor,
  type LauncherList,
  type SessionList,
} from '@agentq/protocol';
import { cli, coordinator, envelope } from './helpers.js';

describe('agentq start / resume', () => {
  it('start of an existing session: exit 2, session_exists', async (t) => {
    const c = await coordinator(t);
    assert.equal((await cli(c.url, ['start', 'alpha', '-p', 'one'])).code, 0);
    const again = await cli(c.url, ['start', 'alpha', '-p', 'two', '--json']);
    assert.equal(again.code, 2);
    assert.equal(envelope<Failure>(again, CliFailure).error.code, 'session_exists');
  });

  it('start of an existing session: the hint names the session to resume, quoted for the shell', async (t) => {
    const c = await coordinator(t);
    for (const [name, shown] of [['alpha', 'alpha'], ["bob's notes", `'bob'\\''s notes'`]] as const) {
      assert.equal((await cli(c.url, ['start', name, '-p', 'one'])).code, 0);
      const again = await cli(c.url, ['start', name, '-p', 'two']);
      assert.equal(again.code, 2);
      assert.ok(again.stderr.includes(`to continue this one: agentq resume ${shown} -p <prompt>`), again.stderr);
    }
  });

  // a name with a line break gets the template instead (tables.test.ts): a one-line hint never sends one
  it('the session_exists hint, pasted into a shell, resumes that very session, whatever its name (quotes, $, backticks, a leading dash)', async (t) => {
    const c = await coordinator(t);
    const names = ["it's", '$HOME', '`echo x`', '-x', '--json', '-p', 'two  spaces', 'back\\slash', '!x*?~'];
    for (const name of names) {
      assert.equal((await cli(c.url, ['start', '-p', 'one', '--', name])).code, 0, name);
      const again = await cli(c.url, ['start', '-p', 'two', '--', name]);
      assert.equal(again.code, 2, again.stderr);
      const hint = /to continue this one: (agentq resume [^]*)\n$/.exec(again.stderr)?.[1];
      assert.ok(hint !== undefined, again.stderr);
      // the words a POSIX shell makes of it, with the prompt filled in
      const sh = spawnSync('sh', ['-c', `agentq() { node -e 'console.log(JSON.stringify(process.argv.slice(1)))' -- "$@"; }; ${hint.replace('<prompt>', 'again')}`], { encoding: 'utf8' });
      assert.equal(sh.status, 0, sh.stderr);
      const argv = JSON.parse(sh.stdout) as string[];
      assert.equal(argv[0], 'resume', hint);
      const run = await cli(c.url, ['--json', ...argv]);
      assert.equal(run.code, 0, `${JSON.stringify(name)}: ${hint}: ${run.stdout}${run.stderr}`);
      assert.equal(envelope<{ ok: true; data: JobDescriptor }>(run, CliEnvelope(CliCommandData.start)).data.session_name, name);
    }
  });

  it('the session_exists hint of a name with a control character is the template: it sends nothing raw to the terminal', async (t) => {
    const c = await coordinator(t);
    const name = 'evil\u001b]0;owned\u0007';
    assert.equal((await cli(c.url, ['start', name, '-p', 'one'])).code, 0);
    const again = await cli(c.url, ['start', name, '-p', 'two']);
    assert.equal(again.code, 2);
    assert.doesNotMatch(again.stderr, /[\u001b\u0007]/);
    assert.ok(again.stderr.includes('to continue this one: agentq resume <session> -p <prompt>'), again.stderr);
  });

  it('start of a closed session under another parent: session_exists that says to pick another name, without the resume hint', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'lead' });
    const first = await c.client.createJob({ type: 'start_session', session_name: 'gone', prompt: 'one' });
    await c.client.stopJob(first.job_id); // stopped before any launcher ran it: closed
    const again = await cli(c.url, ['start', 'gone', '-p', 'two', '--parent', 'boss']);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /\(session_exists\)/);
    assert.match(again.stderr, /another name/);
    assert.doesNotMatch(again.stderr, /agentq resume/);
  });

  it('resume of an unknown session: exit 2, session_not_found', async (t) => {
    const c = await coordinator(t);
    const r = await cli(c.url, ['resume', 'ghost', '-p', 'hello']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /\(session_not_found\)/);
  });

  it('resume sends a new prompt to the session once its job ended', async (t) => {
    const c = await coordinator(t);
    const first = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'one' });
    await c.launcher.claimAndStart();
    await c.launcher.complete(first.job_id);
    const r = await cli(c.url, ['resume', 'alpha', '-p', 'two', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const d = envelope<{ ok: true; data: JobDescriptor }>(r, CliEnvelope(CliCommandData.resume)).data;
    assert.equal(d.type, 'resume_session');
    assert.equal(d.session_name, 'alpha');
    assert.equal(d.prompt, 'two');
  });

  it('passes --agent, --project-dir, --parent and --timeout; text names the follow-up commands', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'parent', prompt: 'p' });
    const r = await cli(c.url, [
      'start',
      'child',
      '-p',
      'go',
      '--agent',
      'reviewer',
      '--project-dir',
      '/srv/repo',
      '--parent',
      'parent',
      '--timeout',
      '1h30m',
      '--url',
      c.url,
    ]);
    assert.equal(r.code, 0, r.stderr);
    const id = /job (job_[0-9a-f]{12})/.exec(r.stdout)?.[1] as string;
    const job = await c.client.getJob(id);
    assert.equal(job.agent_name, 'reviewer');
    assert.equal(job.project_dir, '/srv/repo');
    assert.equal(job.parent_session_name, 'parent');
    assert.equal(job.timeout_ms, 5_400_000);
    // the URL came from --url, so the follow-up commands repeat it
    assert.ok(r.stdout.includes(`agentq status ${id} --url ${c.url}`), r.stdout);
    assert.ok(r.stdout.includes(`agentq cancel ${id} --url ${c.url}`), r.stdout);
  });
});

describe('agentq sessions / launchers', () => {
  it('lists sessions', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x', agent_name: 'coder' });
    const r = await cli(c.url, ['sessions', '--json']);
    assert.equal(r.code, 0);
    const data = envelope<{ ok: true; data: SessionList }>(r, CliEnvelope(CliCommandData.sessions)).data;
    assert.deepEqual(
      data.sessions.map((s) => s.session_name),
      ['alpha'],
    );
    const text = await cli(c.url, ['sessions']);
    assert.match(text.stdout, /^SESSION +STATUS +AGENT/);
    assert.match(text.stdout, /alpha +busy +coder/);
  });

  it('lists launchers', async (t) => {
    const c = await coordinator(t);
    const none = await cli(c.url, ['launchers']);
    assert.equal(none.stdout, 'no launchers registered\n');
    const id = await c.launcher.id();
    const r = await cli(c.url, ['launchers', '--json']);
    const data = envelope<{ ok: true; data: LauncherList }>(r, CliEnvelope(CliCommandData.launchers)).data;
    assert.deepEqual(
      data.launchers.map((l) => l.launcher_id),
      [id],
    );
    const text = await cli(c.url, ['launchers']);
    assert.match(text.stdout, new RegExp(`${id}  online +test-host +fake +0/4`));
  });
});
