import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type CliCompletion } from '@agentq/protocol';
import { cli, envelope } from './helpers.js';

const has = (shell: string) => spawnSync(shell, ['-c', 'exit 0']).status === 0;

async function script(shell: string): Promise<string> {
  const r = await cli(undefined, ['completion', shell]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

describe('agentq completion', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'agentq-completion-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** What bash offers after the words typed so far (the last one is being completed). */
  async function bashComplete(words: string[]): Promise<string[]> {
    const file = join(dir, 'agentq.bash');
    await writeFile(file, await script('bash'));
    const quoted = words.map((w) => `'${w}'`).join(' ');
    const r = spawnSync('bash', [
      '-c',
      `source '${file}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _agentq_completion; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ]);
    assert.equal(r.status, 0, r.stderr.toString());
    return r.stdout.toString().split('\n').filter(Boolean);
  }

  it('bash: commands, subcommands, options and their fixed values, from the command tree', async () => {
    const top = await bashComplete(['agentq', '']);
    for (const c of [
      'start',
      'wait',
      'sessions',
      'session',
      'launchers',
      'watch',
      'health',
      'token',
      'send',
      'completion',
      '--json',
    ]) {
      assert.ok(top.includes(c), `${c} in ${top.join(' ')}`);
    }
    assert.deepEqual(await bashComplete(['agentq', 'st']), ['start', 'status']);
    assert.deepEqual(await bashComplete(['agentq', 'session', 's']), ['stop']);
    assert.deepEqual(await bashComplete(['agentq', 'launchers', 'r']), ['rm']);
    assert.deepEqual(await bashComplete(['agentq', 'start', 'alpha', '--prom']), ['--prompt', '--prompt-file']);
    assert.deepEqual(await bashComplete(['agentq', '--json', 'start', 'alpha', '--no-']), ['--no-parent']);
    assert.deepEqual(await bashComplete(['agentq', 'token', 'create', 'bob', '--role', '']), [
      'admin',
      'client',
      'reader',
      'launcher',
    ]);
    assert.deepEqual(await bashComplete(['agentq', 'sessions', '--status', '']), ['idle', 'busy']);
    assert.deepEqual(
      await bashComplete(['agentq', 'completion', '']).then((w) => w.filter((x) => !x.startsWith('-'))),
      ['bash', 'zsh', 'fish'],
    );
    assert.deepEqual(await bashComplete(['agentq', 'start', '--timeout', '']), [], 'a value: nothing to offer');
  });

  it('zsh and fish: every command is in the script, which the shell accepts', async (t) => {
    for (const shell of ['zsh', 'fish'] as const) {
      const text = await script(shell);
      for (const c of ['start', 'status', 'stop', 'rm', 'create', 'watch', 'health']) {
        assert.ok(text.includes(c), `${shell}: ${c}`);
      }
      if (!has(shell)) {
        t.diagnostic(`${shell} is not installed: its syntax check is left out`);
        continue;
      }
      const file = join(dir, `agentq.${shell}`);
      await writeFile(file, text);
      const r = spawnSync(shell, ['-n', file]);
      assert.equal(r.status, 0, `${shell} -n: ${r.stderr.toString()}`);
    }
  });

  it('fish completes like bash (when fish is installed)', async (t) => {
    if (!has('fish')) return t.skip('fish is not installed');
    const file = join(dir, 'agentq.fish');
    await writeFile(file, await script('fish'));
    const complete = (line: string) =>
      spawnSync('fish', ['-c', `source '${file}'; complete -C '${line}'`])
        .stdout.toString()
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]);
    assert.deepEqual(complete('agentq session '), ['stop']);
    assert.deepEqual(complete('agentq token create bob --role ').sort(), ['admin', 'client', 'launcher', 'reader']);
  });

  it('--json gives the script as data; an unknown shell is a usage error', async () => {
    const r = await cli(undefined, ['completion', 'fish', '--json']);
    const data = envelope<{ ok: true; data: CliCompletion }>(r, CliEnvelope(CliCommandData.completion)).data;
    assert.equal(data.shell, 'fish');
    assert.match(data.script, /^complete -c agentq /m);
    const bad = await cli(undefined, ['completion', 'ksh']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /Allowed choices are bash, zsh, fish/);
  });
});
