import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import selfsigned from 'selfsigned';
import { ConfigError, loadConfig } from '../src/config.js';
import { checkExposure, isLoopback } from '../src/exposure.js';
import { TokenStore } from '../src/http/auth/tokens.js';
import { newSecret, tempDir, tokenFileText } from './auth-helpers.js';
import { followLog } from './coordinator-process.js';
import { rejectsWith } from './helpers.js';

const MAIN = fileURLToPath(new URL('../src/main.js', import.meta.url));

/** The real coordinator process, with its log lines to wait on; killed when the test ends. */
function spawnCoordinator(t: TestContext, env: Record<string, string>) {
  const child = spawn(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, ...followLog(child) };
}

async function exitOf(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

test('HOST=0.0.0.0 without tokens: the coordinator refuses to start, naming AUTH_TOKENS_FILE (exit 2)', async (t) => {
  const p = spawnCoordinator(t, { HOST: '0.0.0.0' });
  assert.equal(await exitOf(p.child), 2);
  assert.match(p.stderr(), /invalid configuration: AUTH_TOKENS_FILE: is not set, and HOST=0\.0\.0\.0 is not a loopback address/);
  assert.match(p.stderr(), /AUTH_DISABLED=true/);
  // it never listened
  assert.equal(p.lines.find((l) => l.msg === 'coordinator ready'), undefined);
});

test('an unreadable or malformed token file stops the start, naming AUTH_TOKENS_FILE and the line', async (t) => {
  const dir = tempDir(t);
  const missing = spawnCoordinator(t, { AUTH_TOKENS_FILE: join(dir, 'nope') });
  assert.equal(await exitOf(missing.child), 2);
  assert.match(missing.stderr(), /AUTH_TOKENS_FILE: cannot read .*nope/);
  const file = join(dir, 'tokens');
  writeFileSync(file, 'alice admin plain-secret\n');
  const malformed = spawnCoordinator(t, { AUTH_TOKENS_FILE: file });
  assert.equal(await exitOf(malformed.child), 2);
  assert.match(malformed.stderr(), /AUTH_TOKENS_FILE: .*tokens line 1: .*not the secret itself/);
});

test('a TLS certificate or key that TLS cannot use stops the start naming its variable (exit 2), before the database is made', async (t) => {
  const dir = tempDir(t);
  const pair = async (name: string) => {
    const pems = await selfsigned.generate([{ name: 'commonName', value: name }], { keyType: 'ec', algorithm: 'sha256' });
    const cert = join(dir, `${name}.pem`);
    const key = join(dir, `${name}-key.pem`);
    writeFileSync(cert, pems.cert);
    writeFileSync(key, pems.private, { mode: 0o600 });
    return { cert, key };
  };
  const a = await pair('a');
  const b = await pair('b');
  const cases = [
    // the two files swapped
    { cert: a.key, key: a.cert, variable: 'TLS_CERT_FILE', says: /is not a PEM certificate/ },
    // the certificate twice
    { cert: a.cert, key: a.cert, variable: 'TLS_KEY_FILE', says: /is not a PEM private key/ },
    // the key of another certificate (renewed one file, not the other)
    { cert: a.cert, key: b.key, variable: 'TLS_KEY_FILE', says: /is not the private key of the certificate in TLS_CERT_FILE/ },
  ];
  for (const [i, c] of cases.entries()) {
    const database = join(dir, `state-${i}.db`);
    const p = spawnCoordinator(t, { TLS_CERT_FILE: c.cert, TLS_KEY_FILE: c.key, DATABASE_URL: `sqlite:${database}` });
    assert.equal(await exitOf(p.child), 2, p.stderr());
    assert.match(p.stderr(), new RegExp(`^agentq-coordinator: invalid configuration: ${c.variable}: `));
    assert.match(p.stderr(), c.says);
    assert.ok(!p.stderr().includes('    at '), `a configuration error, not a stack trace: ${p.stderr()}`);
    assert.equal(existsSync(database), false, 'refused before the database was made');
  }
  // the pair that belongs together starts
  const good = spawnCoordinator(t, { TLS_CERT_FILE: a.cert, TLS_KEY_FILE: a.key, DATABASE_URL: 'memory:' });
  assert.match(String((await good.waitFor((l) => l.msg === 'coordinator ready')).url), /^https:/);
  good.child.kill('SIGTERM');
  assert.equal(await exitOf(good.child), 0);
});

test('a port already in use stops the start with a line on stderr naming HOST and PORT (exit 1), even with LOG_LEVEL=silent', async (t) => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const port = (taken.address() as AddressInfo).port;
  const p = spawnCoordinator(t, { PORT: String(port), LOG_LEVEL: 'silent', DATABASE_URL: 'memory:' });
  assert.equal(await exitOf(p.child), 1);
  assert.equal(
    p.stderr(),
    `agentq-coordinator: cannot listen on HOST=127.0.0.1 PORT=${port}: listen EADDRINUSE: address already in use 127.0.0.1:${port}\n`,
  );
});

test('which set-ups may start open: loopback, or AUTH_DISABLED=true said on purpose', () => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost']) assert.ok(isLoopback(host), host);
  for (const host of ['0.0.0.0', '::', '10.0.0.5', '192.168.1.2', 'coordinator', 'example.com']) assert.ok(!isLoopback(host), host);
  assert.doesNotThrow(() => checkExposure(loadConfig({})));
  assert.doesNotThrow(() => checkExposure(loadConfig({ HOST: '0.0.0.0', AUTH_DISABLED: 'true' })));
  assert.doesNotThrow(() => checkExposure(loadConfig({ HOST: '0.0.0.0', AUTH_TOKENS_FILE: '/etc/agentq/tokens' })));
  assert.throws(() => checkExposure(loadConfig({ HOST: '0.0.0.0' })), (e: Error) => e instanceof ConfigError && e.variable === 'AUTH_TOKENS_FILE');
});

test('the password of DATABASE_URL never reaches the output: with an @ in it, with no user, in the query, or in a URL refused', async (t) => {
  // port 1: nothing listens there, so the start fails at once and says which database it tried
  const urls = [
    ['postgres://agentq:pa@ss-one@127.0.0.1:1/agentq', 'pa@ss-one', 'postgres://agentq:***@127.0.0.1:1/agentq'],
    ['postgres://:pass-two@127.0.0.1:1/agentq', 'pass-two', 'postgres://:***@127.0.0.1:1/agentq'],
    ['postgres://agentq@127.0.0.1:1/agentq?sslmode=disable&password=pass-three', 'pass-three', 'postgres://agentq@127.0.0.1:1/agentq?sslmode=disable&password=***'],
  ] as const;
  for (const [url, password, shown] of urls) {
    const p = spawnCoordinator(t, { DATABASE_URL: url });
    assert.equal(await exitOf(p.child), 1);
    const output = `${JSON.stringify(p.lines)}\n${p.stderr()}`;
    assert.ok(output.includes(`cannot open the PostgreSQL database ${shown}:`), output);
    assert.ok(!p.stderr().includes('    at '), `an unreachable database is said in a line, not a stack trace: ${p.stderr()}`);
    assert.ok(!output.includes(password) && !output.includes(password.split('@').pop()!), `the password of ${url} is in the output: ${output}`);
  }
  // a scheme the coordinator does not know: the configuration error quotes the URL, not its password
  const typo = spawnCoordinator(t, { DATABASE_URL: 'postgresql+pg://agentq:pass-four@db/agentq' });
  assert.equal(await exitOf(typo.child), 2);
  assert.match(typo.stderr(), /DATABASE_URL: expected .*got "postgresql\+pg:\/\/agentq:\*\*\*@db\/agentq"/);
  assert.ok(!typo.stderr().includes('pass-four'));
});

test('the SQLite database a first start makes, with its WAL and shared-memory index, is readable by its owner only; its lock file always', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'agentq.db');
  // a file that exists keeps its mode: the operator chose it
  const chosen = join(dir, 'chosen.db');
  writeFileSync(chosen, '', { mode: 0o640 });
  for (const [file, expected] of [[path, 0o600], [chosen, 0o640]] as const) {
    const p = spawnCoordinator(t, { DATABASE_URL: `sqlite:${file}` });
    const url = String((await p.waitFor((l) => l.msg === 'coordinator ready')).url);
    const client = new AgentqClient({ url });
    t.after(() => client.close());
    // a prompt is written: the WAL holds it
    await client.createJob({ type: 'start_session', session_name: 'private', prompt: 'a prompt for token holders only' });
    for (const f of [file, `${file}-wal`, `${file}-shm`]) {
      assert.equal((statSync(f).mode & 0o777).toString(8), expected.toString(8), `mode of ${f}`);
    }
    // the lock file beside it holds nothing, but a user who may open it can keep coordinators from starting
    assert.equal((statSync(`${file}-lock`).mode & 0o777).toString(8), '600', 'mode of the lock file');
    p.child.kill('SIGTERM');
    assert.equal(await exitOf(p.child), 0);
  }
});

test('a lock file an earlier version left readable by all is made readable by its owner only at start', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'agentq.db');
  // as a version before the lock file was made private left it (umask 022)
  writeFileSync(`${file}-lock`, '', { mode: 0o644 });
  chmodSync(`${file}-lock`, 0o644);
  const p = spawnCoordinator(t, { DATABASE_URL: `sqlite:${file}` });
  await p.waitFor((l) => l.msg === 'coordinator ready');
  assert.equal((statSync(`${file}-lock`).mode & 0o777).toString(8), '600', 'another user could hold a shared lock on it');
  p.child.kill('SIGTERM');
  assert.equal(await exitOf(p.child), 0);
});

test('SIGHUP re-reads the token file: a token added works, a token removed stops working; a bad file keeps the tokens', async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'tokens');
  const alice = newSecret();
  const bob = newSecret();
  writeFileSync(file, tokenFileText([{ name: 'alice', role: 'client', secret: alice }]));
  const p = spawnCoordinator(t, { AUTH_TOKENS_FILE: file });
  const ready = await p.waitFor((l) => l.msg === 'coordinator ready');
  assert.equal(ready.auth, 'tokens');
  const url = String(ready.url);
  const as = (secret: string) => {
    const client = new AgentqClient({ url, token: secret });
    t.after(() => client.close());
    return client;
  };
  await as(alice).listJobs();
  await rejectsWith(as(bob).listJobs(), 401, 'unauthorized');

  writeFileSync(file, tokenFileText([{ name: 'bob', role: 'client', secret: bob }]));
  const reloaded = p.waitFor((l) => l.msg === 'token file reloaded', false);
  p.child.kill('SIGHUP');
  const line = await reloaded;
  assert.deepEqual([line.added, line.removed, line.count], [['bob'], ['alice'], 1]);
  await as(bob).listJobs();
  await rejectsWith(as(alice).listJobs(), 401, 'unauthorized');

  // a typo in the file does not lock everyone out: the tokens in force stay
  writeFileSync(file, 'bob client not-a-hash\n');
  const refused = p.waitFor((l) => l.msg === 'token file not reloaded: keeping the tokens in force', false);
  p.child.kill('SIGHUP');
  assert.match(String((await refused).error), /line 1/);
  await as(bob).listJobs();

  p.child.kill('SIGTERM');
  assert.equal(await exitOf(p.child), 0);
});

test('SIGHUP that removes a token cuts its open requests (event stream, parked wait); other tokens keep theirs', { timeout: 30_000 }, async (t) => {
  const dir = tempDir(t);
  const file = join(dir, 'tokens');
  const alice = newSecret();
  const carol = newSecret();
  writeFileSync(file, tokenFileText([{ name: 'alice', role: 'client', secret: alice }, { name: 'carol', role: 'client', secret: carol }]));
  const p = spawnCoordinator(t, { AUTH_TOKENS_FILE: file, LOG_LEVEL: 'debug', DATABASE_URL: 'memory:' });
  const url = String((await p.waitFor((l) => l.msg === 'coordinator ready')).url);
  const as = (secret: string) => {
    const client = new AgentqClient({ url, token: secret });
    t.after(() => client.close());
    return client;
  };
  const job = await as(carol).createJob({ type: 'start_session', session_name: 'waited-on', prompt: 'x' }); // no launcher: stays pending
  /** Follow a stream until it ends: the event types seen ('(ended)' last), and a wait for one. */
  const follow = async (client: AgentqClient) => {
    const seen: string[] = [];
    const waiting = new Map<string, () => void>();
    const note = (type: string) => {
      seen.push(type);
      waiting.get(type)?.();
    };
    await new Promise<void>((opened) => {
      void (async () => {
        try {
          for await (const m of client.events({ onOpen: opened })) note(m.event);
        } catch {
          // a cut stream may end in an error: what matters is that it ends
        }
        note('(ended)');
      })();
    });
    const until = (type: string) => (seen.includes(type) ? Promise.resolve() : new Promise<void>((r) => waiting.set(type, r)));
    return { seen, until };
  };
  const aliceStream = await follow(as(alice));
  const carolStream = await follow(as(carol));
  const waitArrived = p.waitFor((l) => l.msg === 'incoming request' && String((l.req as { url?: string } | undefined)?.url).includes('/wait'));
  const wait = as(alice).waitJob(job.job_id, 600_000).then(
    (j) => `answered ${j.status}`,
    (err: Error) => `refused: ${err.message}`,
  );
  await waitArrived;

  writeFileSync(file, tokenFileText([{ name: 'carol', role: 'client', secret: carol }]));
  const reloaded = p.waitFor((l) => l.msg === 'token file reloaded', false);
  p.child.kill('SIGHUP');
  const line = await reloaded;
  assert.deepEqual([line.removed, line.open_requests_cut], [['alice'], 2], 'alice had two requests open: the stream and the wait');
  assert.doesNotMatch(await wait, /answered/, 'the wait ended without an answer for the revoked token');
  await rejectsWith(as(alice).waitJob(job.job_id, 0), 401, 'unauthorized');
  await aliceStream.until('(ended)');
  // carol's stream goes on: it sees her next job
  await as(carol).createJob({ type: 'start_session', session_name: 'after-the-cut', prompt: 'y' });
  await carolStream.until('job.created');
  assert.ok(!carolStream.seen.includes('(ended)'));
  assert.ok(!aliceStream.seen.includes('job.created'), "alice's stream saw nothing after the cut");
});

test('bootstrap-tokens (docker-compose first start) makes random secrets in their own files and the token file, once', async (t) => {
  const dir = tempDir(t);
  const script = fileURLToPath(new URL('../src/bootstrap-tokens.js', import.meta.url));
  const run = () => {
    const child = spawn(process.execPath, [script, join(dir, 'auth'), 'admin:admin', 'cli:client', `launcher:launcher=${join(dir, 'l', 'launcher.token')}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return exitOf(child);
  };
  assert.equal(await run(), 0);
  const tokensFile = join(dir, 'auth', 'tokens');
  const before = readFileSync(tokensFile, 'utf8');
  const secret = (path: string) => readFileSync(path, 'utf8').trim();
  const store = new TokenStore(tokensFile);
  assert.deepEqual(store.summary, [
    { name: 'admin', role: 'admin' },
    { name: 'cli', role: 'client' },
    { name: 'launcher', role: 'launcher' },
  ]);
  assert.equal(store.verify(secret(join(dir, 'auth', 'cli.token')))?.name, 'cli');
  assert.equal(store.verify(secret(join(dir, 'l', 'launcher.token')))?.name, 'launcher');
  assert.equal(statSync(join(dir, 'auth', 'admin.token')).mode & 0o077, 0, 'secret files are private');
  assert.ok(!before.includes(secret(join(dir, 'auth', 'admin.token'))));
  // a second start changes nothing
  assert.equal(await run(), 0);
  assert.equal(readFileSync(tokensFile, 'utf8'), before);
});
