import assert from 'node:assert/strict';
import { realpathSync } from 'node:fs';
import { test } from 'node:test';
import { ConfigError, helpText, loadConfig, OPTIONS, parseEventLine } from '../src/index.js';

const load = (argv: string[], env: Record<string, string> = {}) => {
  const r = loadConfig(argv, env);
  if (r.help) throw new Error('unexpected help');
  return r.config;
};

test('defaults', () => {
  const c = load([]);
  assert.equal(c.url, 'http://127.0.0.1:8765');
  assert.equal(c.executor.name, 'claude-code');
  assert.equal(c.maxJobs, 4);
  assert.equal(c.projectDir, process.cwd());
  assert.equal(c.stopOnExit, false);
  assert.equal(c.shutdownGraceMs, 30_000);
  assert.equal(c.killGraceMs, 10_000);
  assert.equal(c.logLevel, 'info');
  assert.deepEqual(c.projectRoots, [realpathSync(process.cwd())]);
  assert.deepEqual(c.labels, {});
  assert.equal(c.portableSessions, undefined);
  assert.equal(c.idleTimeoutMs, 1_800_000);
  assert.equal(c.exitGraceMs, 10_000);
});

test('the state directory: --state-dir, else $XDG_STATE_HOME/agentq, else ~/.local/state/agentq', () => {
  assert.equal(load([], { HOME: '/home/u' }).stateDir, '/home/u/.local/state/agentq');
  assert.equal(load([], { HOME: '/home/u', XDG_STATE_HOME: '/var/state' }).stateDir, '/var/state/agentq');
  // a relative XDG_STATE_HOME is invalid by the spec and ignored
  assert.equal(load([], { HOME: '/home/u', XDG_STATE_HOME: 'rel' }).stateDir, '/home/u/.local/state/agentq');
  assert.equal(load(['--state-dir', '/srv/agentq'], { AGENTQ_STATE_DIR: '/x' }).stateDir, '/srv/agentq');
  assert.equal(load([], { AGENTQ_STATE_DIR: '/x' }).stateDir, '/x');
});

test('--label accumulates; watchdog and portability options parse', () => {
  const c = load(['--label', 'zone=a', '--label', 'gpu=a100,team=ml', '--idle-timeout', '0', '--exit-grace', '2.5', '--portable-sessions']);
  assert.deepEqual(c.labels, { zone: 'a', gpu: 'a100', team: 'ml' });
  assert.equal(c.idleTimeoutMs, 0);
  assert.equal(c.exitGraceMs, 2_500);
  assert.equal(c.portableSessions, true);
  assert.equal(load([], { AGENTQ_PORTABLE_SESSIONS: 'false' }).portableSessions, false);
  // a boolean flag turned off on the command line, over its variable
  assert.equal(load(['--no-portable-sessions'], { AGENTQ_PORTABLE_SESSIONS: 'true' }).portableSessions, false);
  assert.equal(load(['--no-stop-on-exit'], { AGENTQ_STOP_ON_EXIT: 'true' }).stopOnExit, false);
  assert.throws(() => load(['--no-url']), /Unknown option '--no-url'/);
});

test('environment variables set options and flags win over them', () => {
  const env = { AGENTQ_URL: 'http://coord:1', AGENTQ_MAX_JOBS: '7', AGENTQ_EXECUTOR: 'demo', AGENTQ_STOP_ON_EXIT: 'true' };
  const fromEnv = load([], env);
  assert.equal(fromEnv.url, 'http://coord:1');
  assert.equal(fromEnv.maxJobs, 7);
  assert.equal(fromEnv.executor.name, 'demo');
  assert.equal(fromEnv.stopOnExit, true);
  const flagged = load(['--url', 'http://other:2/', '--max-jobs', '2'], env);
  assert.equal(flagged.url, 'http://other:2');
  assert.equal(flagged.maxJobs, 2);
});

test('--verbose means debug logs; --pass-env accumulates', () => {
  assert.equal(load(['--verbose']).logLevel, 'debug');
  assert.deepEqual(load(['--pass-env', 'A,B', '--pass-env', 'C']).passEnv, ['A', 'B', 'C']);
  assert.deepEqual(load([], { AGENTQ_PASS_ENV: 'X, Y' }).passEnv, ['X', 'Y']);
});

test('a bad value throws ConfigError naming the flag or the variable', () => {
  const cases: Array<[string[], Record<string, string>, RegExp]> = [
    [['--max-jobs', '0'], {}, /^--max-jobs: /],
    [[], { AGENTQ_MAX_JOBS: '2.5' }, /^AGENTQ_MAX_JOBS: /],
    [['--url', 'ftp://x'], {}, /^--url: /],
    [['--executor', './missing.js'], {}, /^--executor: .*does not exist/],
    [['--project-dir', '/nonexistent/dir'], {}, /^--project-dir: /],
    [['--shutdown-grace=-1'], {}, /^--shutdown-grace: /],
    [[], { AGENTQ_STOP_ON_EXIT: 'maybe' }, /^AGENTQ_STOP_ON_EXIT: /],
    [['--log-level', 'loud'], {}, /^--log-level: /],
    [['--no-such-flag'], {}, /^arguments: /],
    [['--label', 'novalue'], {}, /^--label: expected key=value/],
    [[], { AGENTQ_LABELS: '-bad=x' }, /^AGENTQ_LABELS: label key "-bad"/],
    [['--label', `k=${'v'.repeat(129)}`], {}, /^--label: label k: the value must be 1 to 128/],
    [['--hostname', 'h'.repeat(200)], {}, /built-in label hostname=.* set it with --label hostname=VALUE/],
    [['--hostname', ''], {}, /^--hostname: expected a host name/],
    [[], { AGENTQ_HOSTNAME: 'a\tb' }, /^AGENTQ_HOSTNAME: expected a host name/],
    [['--max-jobs', '0x10'], {}, /^--max-jobs: expected an integer/],
    [['--kill-grace', '1e1'], {}, /^--kill-grace: expected seconds/],
    [['--idle-timeout', 'soon'], {}, /^--idle-timeout: /],
    [[], { AGENTQ_EXIT_GRACE: '-1' }, /^AGENTQ_EXIT_GRACE: /],
    [[], { AGENTQ_PROJECT_DIR: '/nonexistent/a,/tmp' }, /^AGENTQ_PROJECT_DIR: \/nonexistent\/a does not exist/],
  ];
  for (const [argv, env, message] of cases) {
    assert.throws(() => loadConfig(argv, env), (err: unknown) => err instanceof ConfigError && message.test(err.message));
  }
});

test('--help documents every option and its variable', () => {
  assert.deepEqual(loadConfig(['--help'], {}), { help: true });
  const text = helpText();
  for (const o of OPTIONS) {
    assert.ok(text.includes(`--${o.flag}`), o.flag);
    assert.ok(text.includes(o.env), o.env);
  }
});

test('executor stdout lines: events, plain text as output, unknown event types skipped', () => {
  assert.deepEqual(parseEventLine('{"type":"result","text":"x"}'), { type: 'result', text: 'x' });
  assert.deepEqual(parseEventLine('hello'), { type: 'output', text: 'hello\n' });
  assert.deepEqual(parseEventLine('{not json'), { type: 'output', text: '{not json\n' });
  assert.deepEqual(parseEventLine('{"type":"output"}'), { type: 'output', text: '{"type":"output"}\n' });
  assert.equal(parseEventLine('{"type":"progress","pct":5}'), null);
  const dropped: Array<[string, string[]]> = [];
  assert.deepEqual(
    parseEventLine('{"type":"result","text":"x","cost_usd":null,"num_turns":1}', (type, fields) => dropped.push([type, fields])),
    { type: 'result', text: 'x', num_turns: 1 },
  );
  assert.deepEqual(dropped, [['result', ['cost_usd']]]);
  assert.deepEqual(parseEventLine('{"type":"error","message":7,"code":"x"}'), { type: 'output', text: '{"type":"error","message":7,"code":"x"}\n' });
});
