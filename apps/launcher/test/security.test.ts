import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, type TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { startCoordinator } from '@agentq/coordinator';
import { killOnExit, trackRunning } from '@agentq/test-support';
import { closeAfter, controlServer, COORDINATOR_OPTIONS, coordinatorAgain, fixture, script, settled, tempDir } from './helpers.js';
import { makeCertificate, RecordingCredentials, recordingLogger, writeTokens } from './security-helpers.js';

const LAUNCHER = fileURLToPath(new URL('../src/main.js', import.meta.url));
const CLI = fileURLToPath(new URL('../../../cli/bin/agentq.js', import.meta.url));

/** A program run to its end: exit code and everything it printed. */
async function runToEnd(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += String(d)));
  child.stderr.on('data', (d: Buffer) => (stderr += String(d)));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** The real launcher program; every line it prints is kept. Killed after the test if still running. */
function spawnLauncher(t: TestContext, args: string[], env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [LAUNCHER, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', AGENTQ_LOG_LEVEL: 'trace', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  killOnExit(child);
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const end = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  };
  trackRunning(t, end);
  t.after(end);
  const lines: string[] = [];
  const waiters: Array<{ re: RegExp; resolve: () => void }> = [];
  const onLine = (text: string) => {
    lines.push(text);
    for (const w of [...waiters]) {
      if (!w.re.test(text)) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  createInterface({ input: child.stdout! }).on('line', onLine);
  createInterface({ input: child.stderr! }).on('line', onLine);
  return {
    child,
    lines,
    exited,
    logged: (re: RegExp) =>
      new Promise<void>((resolve) => (lines.some((l) => re.test(l)) ? resolve() : waiters.push({ re, resolve }))),
  };
}

test('HTTPS end to end with a self-signed certificate: coordinator, launcher, client and CLI; no secret in any log line; executors get no token', async (t) => {
  const dir = tempDir(t);
  const { certFile, keyFile } = await makeCertificate(dir);
  const tokens = writeTokens(dir, ['admin', 'client', 'launcher']);
  const credentials = new RecordingCredentials();
  const logs = recordingLogger();
  const c = closeAfter(
    t,
    await startCoordinator(
      { ...COORDINATOR_OPTIONS, logLevel: 'trace', tlsCertFile: certFile, tlsKeyFile: keyFile, authTokensFile: tokens.file },
      { logger: logs.log, credentials },
    ),
  );
  assert.match(c.url, /^https:\/\/127\.0\.0\.1:\d+$/);

  const client = new AgentqClient({ url: c.url, token: tokens.secrets.client, caFile: certFile });
  t.after(() => client.close());
  const control = await controlServer(t);
  // the token arrives in the environment (as a service manager would set it) and --pass-env
  // asks for nothing secret: the executor must see neither it nor the launcher's own credential
  const l = spawnLauncher(t, ['--url', c.url, '--ca-file', certFile, '--executor', fixture('executor.js'), '--max-jobs', '1'], {
    AGENTQ_TOKEN: tokens.secrets.launcher!,
  });
  await l.logged(/launcher ready/);

  const job = await client.createJob({
    type: 'start_session',
    session_name: 'over-tls',
    prompt: script([{ hello: true }, { await: true }, { say: 'working' }, { event: { type: 'result', text: 'done over TLS' } }], control),
  });
  const hello = await control.next();
  hello.release();
  const done = await settled(client, job.job_id);
  assert.equal(done.status, 'completed');
  assert.equal(done.result, 'done over TLS');
  assert.equal(done.created_by, 'client-token');
  const { launchers } = await client.listLaunchers();
  assert.equal(launchers[0]?.created_by, 'launcher-token');

  // the executor's environment holds no coordinator credential, under any name
  assert.equal(credentials.issued.length, 1);
  const secrets = [...Object.values(tokens.secrets), ...credentials.issued, ...credentials.issued.map((x) => x.split('.')[1]!)];
  // AGENTQ_TOKEN is the job's own agent token (scoped to its session, issue 12), nothing else
  assert.match(hello.env.AGENTQ_TOKEN ?? '', new RegExp(`^agt_${job.job_id}\\.[A-Za-z0-9_-]{43}$`));
  assert.equal(hello.env.AGENTQ_TOKEN_FILE, undefined);
  for (const [name, value] of Object.entries(hello.env)) {
    for (const s of secrets) assert.ok(!value.includes(s), `executor env ${name} holds a secret`);
  }
  assert.equal(hello.env.AGENTQ_COORDINATOR_URL, c.url);
  // what the agentq CLI reads, so that an agent's own `agentq` reaches this coordinator over TLS
  assert.equal(hello.env.AGENTQ_URL, c.url);
  assert.equal(hello.env.AGENTQ_CA_FILE, certFile);

  // the CLI speaks HTTPS too (trusting the certificate through NODE_EXTRA_CA_CERTS): it reaches
  // the coordinator over TLS, which refuses it without a token
  const cli = await runToEnd([CLI, 'status', job.job_id, '--json'], { AGENTQ_URL: c.url, NODE_EXTRA_CA_CERTS: certFile });
  const envelope = JSON.parse(cli.stdout) as { ok: boolean; error?: { code: string } };
  assert.equal(envelope.ok, false, cli.stdout);
  assert.equal(envelope.error?.code, 'unauthorized', cli.stdout);
  // and without the CA it does not trust the certificate
  const untrusted = await runToEnd([CLI, 'status', job.job_id, '--json'], { AGENTQ_URL: c.url });
  assert.equal((JSON.parse(untrusted.stdout) as { error?: { code: string } }).error?.code, 'coordinator_unreachable');

  l.child.kill('SIGTERM');
  assert.deepEqual(await l.exited, [0, null]);

  // not one log line of the coordinator (at trace), the launcher (at trace) or the CLI holds a secret
  const everything = [...logs.lines, ...l.lines, cli.stdout, cli.stderr, untrusted.stdout, untrusted.stderr];
  assert.ok(logs.lines.length > 20 && l.lines.length > 10, 'the logs were captured');
  for (const line of everything) {
    for (const s of secrets) assert.ok(!line.includes(s), `a secret in a log line: ${line.slice(0, 300)}`);
  }
});

test('a coordinator TLS refuses (certificate not trusted, https:// for plain HTTP) is logged as what to fix, not as "coordinator unreachable"', async (t) => {
  const dir = tempDir(t);
  const { certFile, keyFile } = await makeCertificate(dir);
  const tls = closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS, tlsCertFile: certFile, tlsKeyFile: keyFile }));
  const plain = closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS }));
  const cases = [
    // --ca-file forgotten
    { url: tls.url, says: /TLS certificate is not trusted: give the CA certificate that signed it with --ca-file or AGENTQ_CA_FILE/, code: 'DEPTH_ZERO_SELF_SIGNED_CERT' },
    // https:// for a coordinator without TLS_CERT_FILE
    { url: plain.url.replace(/^http:/, 'https:'), says: /does not speak TLS there: use an http:\/\/ --url/, code: 'ERR_SSL_WRONG_VERSION_NUMBER' },
  ];
  for (const c of cases) {
    const l = spawnLauncher(t, ['--url', c.url, '--executor', 'demo', '--state-dir', join(dir, 'state')], {});
    // the first failed registration, however it is told
    await l.logged(/retrying with backoff/);
    const text = l.lines.find((x) => /retrying with backoff/.test(x))!;
    assert.match(text, c.says);
    const line = JSON.parse(text) as { tls_error?: string; during?: string };
    assert.equal(line.tls_error, c.code);
    assert.equal(line.during, 'register');
    assert.ok(!l.lines.some((x) => /coordinator unreachable/.test(x)), l.lines.join('\n'));
    l.child.kill('SIGTERM');
    assert.deepEqual(await l.exited, [0, null]);
  }
});

test('the CLI works against an https:// coordinator whose certificate it trusts', async (t) => {
  const dir = tempDir(t);
  const { certFile, keyFile } = await makeCertificate(dir);
  const c = closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS, tlsCertFile: certFile, tlsKeyFile: keyFile }));
  const client = new AgentqClient({ url: c.url, caFile: certFile });
  t.after(() => client.close());
  const job = await client.createJob({ type: 'start_session', session_name: 'cli-tls', prompt: 'p' });
  const cli = await runToEnd([CLI, 'status', job.job_id, '--json'], { AGENTQ_URL: c.url, NODE_EXTRA_CA_CERTS: certFile });
  const envelope = JSON.parse(cli.stdout) as { ok: boolean; data?: { job_id: string; status: string } };
  assert.equal(cli.code, 3, cli.stdout + cli.stderr); // still pending: "running" exit code
  assert.deepEqual([envelope.ok, envelope.data?.job_id, envelope.data?.status], [true, job.job_id, 'pending']);

  // the CLI's own ways to trust the certificate: --ca-file, and AGENTQ_CA_FILE
  for (const [args, env] of [
    [['--ca-file', certFile], {}],
    [[], { AGENTQ_CA_FILE: certFile }],
  ] as Array<[string[], Record<string, string>]>) {
    const trusted = await runToEnd([CLI, 'status', job.job_id, '--json', ...args], { AGENTQ_URL: c.url, ...env });
    assert.equal(trusted.code, 3, trusted.stdout + trusted.stderr);
  }
  // and without any, the self-signed certificate is refused (a connection error: exit 1)
  const untrusted = await runToEnd([CLI, 'status', job.job_id, '--json'], { AGENTQ_URL: c.url });
  assert.equal(untrusted.code, 1, untrusted.stdout + untrusted.stderr);
});

test('a launcher whose token is refused says so and exits 1 after one try, not a retry loop', async (t) => {
  const dir = tempDir(t);
  const tokens = writeTokens(dir, ['launcher', 'reader']);
  const logs = recordingLogger();
  const c = closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS, authTokensFile: tokens.file }, { logger: logs.log }));
  const cases: Array<[string, string[], Record<string, string>, RegExp]> = [
    ['no token', [], {}, /no valid token.*Set AGENTQ_TOKEN \(or --token-file\) to a token with the launcher role/],
    ['a token of the wrong role', ['--token-file', tokens.secretFile('reader')], {}, /may not do this.*launcher role/],
    ['an unknown token', [], { AGENTQ_TOKEN: 'not-a-real-token' }, /no valid token/],
  ];
  for (const [what, args, env, message] of cases) {
    await t.test(what, async () => {
      const refusedBefore = logs.lines.filter((x) => x.includes('request refused')).length;
      const l = spawnLauncher(t, ['--url', c.url, '--executor', 'demo', ...args], { AGENTQ_LOG_LEVEL: 'info', ...env });
      const [code] = await l.exited;
      assert.equal(code, 1);
      assert.ok(l.lines.some((x) => message.test(x)), l.lines.join('\n'));
      const refused = logs.lines.filter((x) => x.includes('request refused')).length - refusedBefore;
      assert.equal(refused, 1, 'one registration attempt');
    });
  }
});

test('credentials are kept in the database: a restart keeps the launcher id and credential; a coordinator that lost them gets a new registration', async (t) => {
  const dir = tempDir(t);
  const tokens = writeTokens(dir, ['client', 'launcher']);
  const options = { ...COORDINATOR_OPTIONS, authTokensFile: tokens.file, databaseUrl: `sqlite:${join(dir, 'agentq.db')}` };
  const c = closeAfter(t, await startCoordinator(options));
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--token-file', tokens.secretFile('launcher')], {});
  await l.logged(/launcher ready/);
  const probe = new AgentqClient({ url: c.url, token: tokens.secrets.client });
  const [before] = (await probe.listLaunchers()).launchers;
  await probe.close();
  await c.close();

  // the same database: the launcher's credential is still good, its id unchanged
  const c2 = await coordinatorAgain(t, c.port, options);
  const client2 = new AgentqClient({ url: c2.url, token: tokens.secrets.client });
  const kept = await client2.createJob({ type: 'start_session', session_name: 'kept', prompt: script([{ event: { type: 'result', text: 'ok' } }]) });
  assert.equal((await settled(client2, kept.job_id)).result, 'ok');
  assert.deepEqual((await client2.listLaunchers()).launchers.map((x) => x.launcher_id), [before!.launcher_id]);
  await client2.close();
  await c2.close();

  // a coordinator that lost its state (another database): the launcher registers again with its token
  const c3 = await coordinatorAgain(t, c.port, { ...options, databaseUrl: 'memory:' });
  await l.logged(/registered again under a new id/);
  const client3 = new AgentqClient({ url: c3.url, token: tokens.secrets.client });
  t.after(() => client3.close());
  const job = await client3.createJob({ type: 'start_session', session_name: 'after-restart', prompt: script([{ event: { type: 'result', text: 'ok' } }]) });
  assert.equal((await settled(client3, job.job_id)).result, 'ok');
});

test('a launcher registering again uses the token its token file holds now: a token rotated while it ran is not refused', async (t) => {
  const dir = tempDir(t);
  const tokens = writeTokens(dir, ['client', 'launcher']);
  const c = closeAfter(t, await startCoordinator({ ...COORDINATOR_OPTIONS, authTokensFile: tokens.file }));
  const l = spawnLauncher(t, ['--url', c.url, '--executor', fixture('executor.js'), '--token-file', tokens.secretFile('launcher'), '--state-dir', join(dir, 'state')], {});
  await l.logged(/launcher ready/);

  // the operator rotates the launcher token (a new secret under the same name, in both files)
  // and the coordinator comes back without its state: the launcher must register again
  const rotated = writeTokens(dir, ['client', 'launcher']);
  assert.notEqual(rotated.secrets.launcher, tokens.secrets.launcher);
  await c.close();
  const c2 = await coordinatorAgain(t, c.port, { authTokensFile: rotated.file });
  const outcome = await Promise.race([l.logged(/registered again under a new id/).then(() => 'registered'), l.exited.then(() => 'exited')]);
  assert.equal(outcome, 'registered', l.lines.join('\n'));
  const client = new AgentqClient({ url: c2.url, token: rotated.secrets.client });
  t.after(() => client.close());
  const job = await client.createJob({ type: 'start_session', session_name: 'after-rotation', prompt: script([{ event: { type: 'result', text: 'ok' } }]) });
  assert.equal((await settled(client, job.job_id)).result, 'ok');
  assert.ok(!l.lines.some((x) => x.includes(rotated.secrets.launcher!) || x.includes(tokens.secrets.launcher!)), 'no token in the log');
});
