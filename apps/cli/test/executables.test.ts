/**
 * The project's executables as a newcomer meets them: on PATH after `npm link`, and answering
 * --help / --version without doing anything else.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run a command to its end. `failIf` ends it early when its output shows it is doing what it
 * must not (a server starting), so that a regression fails fast instead of hanging.
 */
function runToEnd(
  command: string,
  args: string[],
  o: { env?: NodeJS.ProcessEnv; cwd?: string; failIf?: RegExp } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: o.cwd ?? ROOT,
      env: o.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    const watch = () => {
      if (o.failIf?.test(stdout + stderr)) child.kill('SIGKILL');
    };
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
      watch();
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
      watch();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const version = async (pkg: string) =>
  (JSON.parse(await readFile(join(ROOT, pkg, 'package.json'), 'utf8')) as { version: string }).version;

describe('npm link', () => {
  it('at the repository root puts agentq on PATH, as docs/cli.md says', async (t) => {
    // a private global prefix: npm link writes there, not into the machine's global packages
    const prefix = await mkdtemp(join(tmpdir(), 'agentq-link-'));
    t.after(() => rm(prefix, { recursive: true, force: true }));
    const env = { ...process.env, npm_config_prefix: prefix, npm_config_audit: 'false', npm_config_fund: 'false' };
    const link = await runToEnd('npm', ['link', '--offline', '--ignore-scripts'], { env });
    assert.equal(link.code, 0, link.stderr);

    const PATH = `${join(prefix, 'bin')}:${dirname(process.execPath)}`;
    const r = await runToEnd('agentq', ['--version'], { env: { PATH }, cwd: tmpdir() });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `agentq ${await version('apps/cli')}\n`);

    const docs = await readFile(join(ROOT, 'docs/cli.md'), 'utf8');
    assert.match(docs, /`npm link`/, 'the docs still say how');
  });
});

describe('--help and --version of the servers', () => {
  const COORDINATOR = join(ROOT, 'apps/coordinator/dist/src/main.js');
  const LAUNCHER = join(ROOT, 'apps/launcher/dist/src/main.js');
  // PORT=0: should the help regress into starting the server, it must not take a real port
  const env = { ...process.env, PORT: '0' };

  it('agentq-coordinator --help prints its help and does not start', async () => {
    const r = await runToEnd(process.execPath, [COORDINATOR, '--help'], { env, failIf: /coordinator ready/ });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /^Usage: agentq-coordinator/);
    assert.match(r.stdout, /^ {2}PORT$/m);
    assert.doesNotMatch(r.stdout + r.stderr, /coordinator ready|listening/i);
  });

  it('agentq-coordinator --version prints the version; an unknown option is exit 2', async () => {
    const r = await runToEnd(process.execPath, [COORDINATOR, '--version'], { env, failIf: /coordinator ready/ });
    assert.equal(r.code, 0);
    assert.equal(r.stdout, `agentq-coordinator ${await version('apps/coordinator')}\n`);
    const bad = await runToEnd(process.execPath, [COORDINATOR, '--port', '9'], { env, failIf: /coordinator ready/ });
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /Unknown option '--port'.*\n.*environment variables/);
  });

  it('agentq-launcher --version prints the version and exits 0', async () => {
    const r = await runToEnd(process.execPath, [LAUNCHER, '--version'], { failIf: /registered/ });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `agentq-launcher ${await version('apps/launcher')}\n`);
    const help = await runToEnd(process.execPath, [LAUNCHER, '--help']);
    assert.match(help.stdout, /-V, --version/);
  });
});

describe('npm install', () => {
  it('has no install script to ask about: every dependency with one is named in allowScripts, as the README says', async () => {
    // npm 11.16+ lists the install scripts that allowScripts does not name after every install
    // (and npm 12 does not run them); the lockfile marks each package that has one
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean }>;
    };
    const withScripts = Object.entries(lock.packages)
      .filter(([, p]) => p.hasInstallScript === true)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length));
    assert.ok(withScripts.includes('better-sqlite3'), 'the lockfile marks install scripts');
    const unnamed = withScripts.filter((name) => typeof pkg.allowScripts?.[name] !== 'boolean');
    assert.deepEqual(unnamed, []);
    assert.equal(pkg.allowScripts?.['better-sqlite3'], true, 'the SQLite addon needs its own');
  });
});
