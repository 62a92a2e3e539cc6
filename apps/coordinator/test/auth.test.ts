import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { AgentqApiError, AgentqAuthError } from '@agentq/client';
import { ManualClock } from '../src/core/clock.js';
import { migrate } from '../src/core/store/sqlite-schema.js';
import { startCoordinator } from '../src/start.js';
import { hashSecret, parseTokenFile, TokenFileError, TokenStore } from '../src/http/auth/tokens.js';
import { MemoryLauncherCredentials, launcherIdOf } from '../src/http/auth/launcher-credentials.js';
import { credentialedLauncher, newSecret, startAuthTest, tempDir, tokenFileText } from './auth-helpers.js';
import { closeAfter, rejectsWith, startTest } from './helpers.js';
import { freshDatabaseUrl } from './pg-server.js';

const job = { type: 'start_session' as const, prompt: 'p' };

test('the token file: NAME ROLE SHA256HEX lines, # comments, and errors that name the line', () => {
  const hex = hashSecret('s3cret');
  const entries = parseTokenFile(`# tokens\n\nalice admin ${hex}  # the admin\n  bob\treader ${'A'.repeat(64)}\n`, 'f');
  assert.deepEqual(
    entries.map((e) => [e.name, e.role, e.hash.toString('hex')]),
    [
      ['alice', 'admin', hex],
      ['bob', 'reader', 'a'.repeat(64)],
    ],
  );
  const bad = (text: string, message: RegExp) => assert.throws(() => parseTokenFile(text, 'tokens'), (e: Error) => e instanceof TokenFileError && message.test(e.message));
  bad(`alice boss ${hex}`, /tokens line 1: role "boss" is not one of admin, client, reader, launcher/);
  bad(`# x\nalice admin s3cret`, /tokens line 2: .*SHA-256 of the secret, not the secret itself/);
  bad(`alice admin`, /expected "NAME ROLE SHA256HEX", got 2 field/);
  bad(`alice admin ${hex}\nalice reader ${'b'.repeat(64)}`, /line 2: the name alice is used twice/);
  bad(`alice admin ${hex}\nbob reader ${hex}`, /line 2: the same secret is listed twice/);
  bad(`-x admin ${hex}`, /name "-x" must be/);
});

test('the token store finds a secret by its hash and a launcher credential works for its own launcher only', async (t) => {
  const file = join(tempDir(t), 'tokens');
  writeFileSync(file, tokenFileText([{ name: 'ci', role: 'client', secret: 'one' }]));
  const store = new TokenStore(file);
  assert.equal(store.verify('one')?.name, 'ci');
  assert.equal(store.verify('two'), undefined);
  assert.equal(store.verify(''), undefined);

  const creds = new MemoryLauncherCredentials();
  const token = await creds.issue('lnch_0123456789ab', 'ci');
  assert.equal(launcherIdOf(token), 'lnch_0123456789ab');
  assert.equal(await creds.verify(token), 'lnch_0123456789ab');
  assert.equal(await creds.verify(`${token}x`), undefined);
  assert.equal(await creds.verify(token.replace('lnch_0123456789ab', 'lnch_ba9876543210')), undefined);
  creds.revoke('lnch_0123456789ab');
  assert.equal(await creds.verify(token), undefined);
});

test('without a token: 401 unauthorized with WWW-Authenticate, a typed AgentqAuthError in the client; a bad token too', async (t) => {
  const a = await startAuthTest(t);
  const err = await a.anonymous.listJobs().catch((e: unknown) => e);
  assert.ok(err instanceof AgentqAuthError, String(err));
  assert.equal(err.status, 401);
  assert.equal(err.code, 'unauthorized');
  assert.match(err.message, /no valid token/);
  await rejectsWith(a.withToken('not-a-token').listJobs(), 401, 'unauthorized');
  const res = await fetch(`${a.c.url}/jobs`, { headers: { authorization: `Basic ${a.secrets.admin}` } });
  assert.equal(res.status, 401);
  assert.equal(res.headers.get('www-authenticate'), 'Bearer realm="agentq"');
  // the scheme is case-insensitive (RFC 9110)
  const lower = await fetch(`${a.c.url}/jobs`, { headers: { authorization: `bearer ${a.secrets.admin}` } });
  assert.equal(lower.status, 200);
  // public routes need none
  assert.equal((await a.anonymous.health()).status, 'ok');
});

test('a role that may not call a route gets 403 forbidden, naming the roles that may', async (t) => {
  const a = await startAuthTest(t);
  const details = await rejectsWith(a.as.reader.createJob({ ...job, session_name: 's' }), 403, 'forbidden');
  assert.equal(details.role, 'reader');
  assert.deepEqual(details.allowed_roles, ['admin', 'client']);
  const err = await a.as.client.deleteLauncher('lnch_000000000000').catch((e: unknown) => e);
  assert.ok(err instanceof AgentqAuthError && err.status === 403, String(err));
});

test('a launcher with a stolen launcher id but not its credential can neither poll nor report', async (t) => {
  const a = await startAuthTest(t);
  const victim = await credentialedLauncher(a, 'victim');
  const created = await a.as.client.createJob({ ...job, session_name: 'stolen' });
  await victim.claim(created.job_id);

  const thief = await credentialedLauncher(a, 'thief');
  const attempts: Array<[string, ReturnType<typeof a.withToken>, number, string]> = [
    ['no token', a.anonymous, 401, 'unauthorized'],
    ['a client token', a.as.client, 403, 'forbidden'],
    ['the launcher-role token', a.as.launcher, 403, 'forbidden'],
    ["another launcher's credential", thief.client, 403, 'forbidden'],
  ];
  for (const [what, client, status, code] of attempts) {
    await t.test(what, async () => {
      await rejectsWith(client.poll(victim.id, { capacity: 1, holdSeconds: 1 }), status, code);
      await rejectsWith(client.heartbeat({ launcher_id: victim.id }), status, code);
      await rejectsWith(client.reportCompleted(created.job_id, { launcher_id: victim.id, result: 'forged' }), status, code);
      await rejectsWith(client.reportOutput(created.job_id, { launcher_id: victim.id, offset: 0, data: 'forged' }), status, code);
      await rejectsWith(client.deleteLauncher(victim.id, { self: true }), status, code);
    });
  }
  const after = await a.as.admin.getJob(created.job_id);
  assert.equal(after.status, 'claimed');
  assert.equal(after.launcher_id, victim.id);
  assert.equal(after.output_bytes, 0);
  assert.ok((await a.as.admin.listLaunchers()).launchers.some((l) => l.launcher_id === victim.id));
});

test("a launcher cannot touch another launcher's job: 403, with its own id or the holder's", async (t) => {
  const a = await startAuthTest(t);
  const holder = await credentialedLauncher(a, 'holder');
  const other = await credentialedLauncher(a, 'other');
  const created = await a.as.client.createJob({ ...job, session_name: 'mine' });
  await holder.claim(created.job_id);

  for (const launcher_id of [other.id, holder.id]) {
    await rejectsWith(other.client.reportStarted(created.job_id, { launcher_id }), 403, 'forbidden');
    await rejectsWith(other.client.reportFailed(created.job_id, { launcher_id, error: 'x' }), 403, 'forbidden');
    await rejectsWith(other.client.reportStopped(created.job_id, { launcher_id }), 403, 'forbidden');
    await rejectsWith(other.client.reportOutput(created.job_id, { launcher_id, offset: 0, data: 'x' }), 403, 'forbidden');
  }
  assert.equal((await a.as.admin.getJob(created.job_id)).status, 'claimed');
  // its holder still can
  await holder.client.reportStarted(created.job_id, { launcher_id: holder.id });
  await holder.client.reportCompleted(created.job_id, { launcher_id: holder.id, result: 'done' });
  assert.equal((await a.as.admin.getJob(created.job_id)).result, 'done');
  // an unknown job is still 404
  await rejectsWith(holder.client.reportStarted('job_000000000000', { launcher_id: holder.id }), 404, 'job_not_found');
});

test('a removed launcher\'s credential answers 401 launcher_unknown (register again), not "bad token"', async (t) => {
  const a = await startAuthTest(t);
  const l = await credentialedLauncher(a);
  await l.client.deleteLauncher(l.id, { self: true });
  const err = await l.client.poll(l.id, { holdSeconds: 1 }).catch((e: unknown) => e);
  assert.ok(err instanceof AgentqApiError && !(err instanceof AgentqAuthError), String(err));
  assert.equal(err.code, 'launcher_unknown');
  // registering again (with the launcher-role token) gives a new id and credential
  const again = await credentialedLauncher(a);
  assert.notEqual(again.id, l.id);
  assert.equal(await again.poll(0), null);
});

test('a registration replaces only launchers registered with the same token', async (t) => {
  const a = await startAuthTest(t);
  const host = { hostname: 'box', host_id: 'h_shared-host-id' };
  const mine = await a.as.launcher.register(host);
  const admins = await a.as.admin.register(host);
  const reg = await a.as.launcher.register({ ...host, replaces: [mine.launcher_id, admins.launcher_id] });
  assert.deepEqual(reg.replaced, [mine.launcher_id]);
  const left = (await a.as.admin.listLaunchers()).launchers.map((l) => l.launcher_id).sort();
  assert.deepEqual(left, [admins.launcher_id, reg.launcher_id].sort());
});

test('a launcher registered before host identities were bound (schema 6) holds its host after the upgrade: another launcher token is 403 host_bound', async (t) => {
  const path = join(tempDir(t), 'agentq.db');
  const db = new Database(path);
  migrate(db, 6);
  // as a coordinator of schema 6 kept it: registered with the token launcher-token, no binding
  db.prepare(
    `INSERT INTO launchers (id, hostname, executor_type, registered_at, last_seen, status, labels, roots, host_id, portable, created_by, token_hash)
     VALUES ('lnch_0ld000000001', 'oldbox', 'test', ?, ?, 'online', ?, '[]', 'h_old00001', 0, 'launcher-token', ?)`,
  ).run(Date.now(), Date.now(), JSON.stringify({ hostname: 'oldbox', executor: 'test' }), 'a'.repeat(64));
  db.close();
  const a = await startAuthTest(t, { databaseUrl: `sqlite:${path}` });
  const second = newSecret();
  writeFileSync(a.file, `${readFileSync(a.file, 'utf8')}${tokenFileText([{ name: 'launcher-2', role: 'launcher', secret: second }])}`);
  a.c.app.auth.reload();
  const other = a.withToken(second);

  const refused = await rejectsWith(other.register({ hostname: 'box-2', host_id: 'h_old00001', executor_type: 'test' }), 403, 'host_bound');
  assert.deepEqual(refused, { host_id: 'h_old00001', bound_to: 'launcher-token' });
  await rejectsWith(other.register({ hostname: 'oldbox', host_id: 'h_other0001', executor_type: 'test' }), 403, 'host_bound');
  // its own token registers it again (and binds it)
  await a.as.launcher.register({ hostname: 'oldbox', host_id: 'h_old00001', executor_type: 'test' });
  await rejectsWith(other.register({ hostname: 'box-2', host_id: 'h_old00001', executor_type: 'test' }), 403, 'host_bound');
});

test('a host identity is bound to the launcher token that registered it first: another one is 403 host_bound until the first is revoked; kept across a restart', async (t) => {
  // a store that keeps it: SQLite, or PostgreSQL under AGENTQ_TEST_STORE=postgres
  const databaseUrl =
    process.env.AGENTQ_TEST_STORE === 'postgres' ? (await freshDatabaseUrl(t))! : `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const a = await startAuthTest(t, { databaseUrl });
  const original = readFileSync(a.file, 'utf8');
  const second = newSecret();
  const withSecond = (text: string) => `${text}${tokenFileText([{ name: 'launcher-2', role: 'launcher', secret: second }])}`;
  writeFileSync(a.file, withSecond(original));
  a.c.app.auth.reload();
  const other = a.withToken(second);

  const box = { hostname: 'box', host_id: 'h_box00001', executor_type: 'test' };
  await a.as.launcher.register(box);
  const refused = await rejectsWith(other.register(box), 403, 'host_bound');
  assert.deepEqual(refused, { host_id: 'h_box00001', bound_to: 'launcher-token' });
  // a launcher that sends no host_id (the seed's) is its hostname's host: bound the same way
  await a.as.launcher.register({ hostname: 'seedbox' });
  await rejectsWith(other.register({ hostname: 'seedbox' }), 403, 'host_bound');
  // another host (its own host_id and name) is its own; the same token again is fine; an admin acts for any launcher
  await other.register({ ...box, hostname: 'box-2', host_id: 'h_other0001' });
  await a.as.launcher.register(box);
  await a.as.admin.register(box);
  assert.equal((await a.as.reader.listLaunchers()).launchers.filter((l) => l.host_id === 'h_box00001').length, 3);

  // the first token revoked: the host may be registered with another, and is bound to it from then on
  const lines = original.split('\n');
  writeFileSync(a.file, withSecond(lines.filter((l) => !l.startsWith('launcher-token ')).join('\n')));
  a.c.app.auth.reload();
  await other.register(box);
  writeFileSync(a.file, withSecond(original));
  a.c.app.auth.reload();
  await rejectsWith(a.as.launcher.register(box), 403, 'host_bound');
  await a.c.close();

  const again = closeAfter(t, await startCoordinator({ databaseUrl, authTokensFile: a.file, logLevel: 'silent', host: '127.0.0.1', port: 0 }));
  const res = await fetch(`${again.url}/launcher/register`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.secrets.launcher}`, 'content-type': 'application/json' },
    body: JSON.stringify(box),
  });
  assert.equal(res.status, 403);
  assert.deepEqual(((await res.json()) as { error: { details: unknown } }).error.details, { host_id: 'h_box00001', bound_to: 'launcher-2' });
});

test("a launcher token cannot take another host's name: the hostname label jobs require is bound like the host_id", async (t) => {
  const a = await startAuthTest(t);
  const second = newSecret();
  writeFileSync(a.file, `${readFileSync(a.file, 'utf8')}${tokenFileText([{ name: 'launcher-2', role: 'launcher', secret: second }])}`);
  a.c.app.auth.reload();
  const other = a.withToken(second);

  await a.as.launcher.register({ hostname: 'gpu-1', host_id: 'h_gpu10001', executor_type: 'test' });
  // its own host_id, the other host's name (as the hostname field or as the label)
  const refused = await rejectsWith(other.register({ hostname: 'gpu-1', host_id: 'h_other001', executor_type: 'test' }), 403, 'host_bound');
  assert.deepEqual(refused, { host_id: 'hostname:gpu-1', bound_to: 'launcher-token' });
  await rejectsWith(other.register({ hostname: 'box-2', host_id: 'h_other001', labels: { hostname: 'gpu-1' } }), 403, 'host_bound');
  // under its own name it registers; the first token registers more launchers of gpu-1
  await other.register({ hostname: 'box-2', host_id: 'h_other001', executor_type: 'test' });
  await a.as.launcher.register({ hostname: 'gpu-1', host_id: 'h_gpu10001', executor_type: 'test' });
  const gpu1 = (await a.as.reader.listLaunchers()).launchers.filter((l) => l.labels.hostname === 'gpu-1');
  assert.deepEqual(gpu1.map((l) => l.created_by), ['launcher-token', 'launcher-token']);
});

test('registration answers a launcher_token only when authentication is on', async (t) => {
  const open = await startTest(t);
  const reg = await open.client.register({ hostname: 'h' });
  assert.equal(reg.launcher_token, undefined);
  const a = await startAuthTest(t);
  const authed = await a.as.launcher.register({ hostname: 'h' });
  assert.match(authed.launcher_token ?? '', new RegExp(`^${authed.launcher_id}\\.[A-Za-z0-9_-]{43}$`));
  // a launcher credential cannot register another launcher, nor read jobs
  const l = a.withToken(authed.launcher_token);
  await rejectsWith(l.register({}), 403, 'forbidden');
  await rejectsWith(l.listJobs(), 403, 'forbidden');
});

test('audit: jobs record who created and who stopped them, launchers who registered them; kept across a restart', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t), 'agentq.db')}`;
  const a = await startAuthTest(t, { databaseUrl });
  const j1 = await a.as.client.createJob({ ...job, session_name: 'audit-1' });
  assert.equal(j1.created_by, 'client-token');
  assert.equal(j1.stopped_by, null);
  const stop = await a.as.admin.stopJob(j1.job_id);
  assert.equal(stop.job.stopped_by, 'admin-token');
  const j2 = await a.as.admin.createJob({ ...job, session_name: 'audit-2' });
  assert.equal(j2.created_by, 'admin-token');
  await a.as.client.stopSession('audit-2');
  assert.equal((await a.as.reader.getJob(j2.job_id)).stopped_by, 'client-token');
  const l = await credentialedLauncher(a);
  const listed = (await a.as.reader.listLaunchers()).launchers.find((x) => x.launcher_id === l.id);
  assert.equal(listed?.created_by, 'launcher-token');
  await a.c.close();

  const again = closeAfter(t, await startCoordinator({ databaseUrl, authTokensFile: a.file, logLevel: 'silent', host: '127.0.0.1', port: 0 }));
  const restored = await fetch(`${again.url}/jobs/${j1.job_id}`, { headers: { authorization: `Bearer ${a.secrets.reader}` } });
  const body = (await restored.json()) as { created_by: string; stopped_by: string };
  assert.deepEqual([body.created_by, body.stopped_by], ['client-token', 'admin-token']);
});

test('with authentication off the audit fields stay null', async (t) => {
  const { client } = await startTest(t);
  const j = await client.createJob({ ...job, session_name: 'open' });
  assert.equal(j.created_by, null);
  assert.equal((await client.stopJob(j.job_id)).job.stopped_by, null);
});

/** A raw request with the Host and Origin a browser would send; the status and error code. */
async function rawRequest(url: string, method: string, path: string, headers: Record<string, string>, body?: string) {
  const { port } = new URL(url);
  return await new Promise<{ status: number; code: string | undefined }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += String(d)));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('with authentication off (loopback) a web page cannot use the coordinator: foreign Host or Origin is 403', async (t) => {
  const { c, client } = await startTest(t);
  const { port } = new URL(c.url);
  const create = JSON.stringify({ ...job, session_name: 'rebound' });
  const json = { 'content-type': 'application/json' };
  // DNS rebinding: the attacker's name resolves to 127.0.0.1, the browser sends that name as Host
  const rebound = await rawRequest(c.url, 'POST', '/jobs', { ...json, host: `rebind.attacker.example:${port}`, origin: `http://rebind.attacker.example:${port}` }, create);
  assert.deepEqual(rebound, { status: 403, code: 'forbidden' });
  // a cross-site request from a page elsewhere: loopback Host, foreign (or opaque) Origin
  for (const origin of ['http://evil.example', 'null']) {
    assert.deepEqual(await rawRequest(c.url, 'POST', '/sessions/rebound/stop', { host: `127.0.0.1:${port}`, origin }), { status: 403, code: 'forbidden' }, origin);
  }
  assert.deepEqual((await client.listJobs()).jobs, [], 'nothing was created');
  // local callers: no Origin (curl, the CLI, launchers), or a page on loopback (the dashboard)
  for (const [host, origin] of [[`localhost:${port}`, undefined], [`[::1]:${port}`, undefined], [`127.0.0.1:${port}`, `http://127.0.0.1:${port}`], [`localhost:${port}`, 'http://localhost:5173']] as const) {
    const headers: Record<string, string> = { ...json, host, ...(origin ? { origin } : {}) };
    const name = `local-${host.length}-${origin?.length ?? 0}`;
    const answer = await rawRequest(c.url, 'POST', '/jobs', headers, JSON.stringify({ ...job, session_name: name }));
    assert.equal(answer.status, 201, `${host} ${origin}`);
  }
});

/** One request written as it goes on the wire (its request line as given), on a connection of its own; the status and the error. */
async function rawSocketRequest(url: string, lines: string[], body = ''): Promise<{ status: number; error: { code?: string; message?: string } | undefined }> {
  const { port } = new URL(url);
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += String(d)));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
    // written, not ended: the answer to a client that half-closed may never be written (seen with
    // PostgreSQL's slower reads); `connection: close` has the server end the connection once it answered
    socket.write([...lines, 'connection: close', `content-length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'));
  });
  const [head = '', payload = ''] = text.split('\r\n\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1]);
  return { status, error: (JSON.parse(payload) as { error?: { code?: string; message?: string } }).error };
}

test('with authentication off, a request line with an absolute URL is for the host it names, whatever Host says (RFC 9112 §3.2.2)', async (t) => {
  const { c, client } = await startTest(t);
  const { port } = new URL(c.url);
  const create = JSON.stringify({ ...job, session_name: 'absolute' });
  // a loopback Host does not vouch for a target that names another host
  for (const target of [`http://evil.example:${port}/jobs`, `http://127.0.0.1@evil.example/jobs`, `HTTP://EVIL.EXAMPLE/jobs?x=1`]) {
    const refused = await rawSocketRequest(c.url, [`POST ${target} HTTP/1.1`, `host: 127.0.0.1:${port}`, 'content-type: application/json'], create);
    assert.equal(refused.status, 403, target);
    assert.equal(refused.error?.code, 'forbidden', target);
    assert.match(refused.error?.message ?? '', /^a request for host "evil\.example(:\d+)?" is refused/i, target);
  }
  assert.deepEqual((await client.listJobs()).jobs, [], 'nothing was created');
  // and a foreign Host is ignored when the target names a loopback host
  for (const target of [`http://127.0.0.1:${port}/jobs`, `http://user@[::1]:${port}/jobs`, `http://LOCALHOST/jobs`]) {
    const answer = await rawSocketRequest(c.url, [`GET ${target} HTTP/1.1`, 'host: evil.example']);
    assert.deepEqual([answer.status, answer.error], [200, undefined], target);
  }
  // origin-form leaves it to Host, as before
  assert.equal((await rawSocketRequest(c.url, ['GET /jobs HTTP/1.1', 'host: evil.example'])).status, 403);
});

test('AUTH_DISABLED=true (open on purpose) and authentication on leave Host and Origin alone', async (t) => {
  const open = await startTest(t, { authDisabled: true });
  const headers = { 'content-type': 'application/json', host: 'coordinator.internal:8765', origin: 'http://dashboard.internal' };
  const a = await rawRequest(open.c.url, 'POST', '/jobs', headers, JSON.stringify({ ...job, session_name: 'open-on-purpose' }));
  assert.equal(a.status, 201);
  const auth = await startAuthTest(t);
  const b = await rawRequest(auth.c.url, 'POST', '/jobs', { ...headers, authorization: `Bearer ${auth.secrets.client}` }, JSON.stringify({ ...job, session_name: 'with-token' }));
  assert.equal(b.status, 201);
});

test('JOBS_RATE_LIMIT_PER_MINUTE counts creations: refusals and Idempotency-Key replays do not use it up; it comes back after a minute', async (t) => {
  const clock = new ManualClock();
  const a = await startAuthTest(t, { jobsRateLimitPerMinute: 2 }, { clock });
  const c = a.as.client;
  await rejectsWith(c.createJob({ ...job, session_name: '' }), 400, 'validation_failed');
  await rejectsWith(c.createJob({ ...job, type: 'resume_session', session_name: 'nobody' }), 404, 'session_not_found');
  await rejectsWith(c.createJobs([{ ...job, session_name: 'b1' }, { ...job, session_name: 'b1' }]), 409, 'session_exists');
  const first = await c.createJob({ ...job, session_name: 'keyed' }, { idempotencyKey: 'k-1' });
  const replay = await c.createJob({ ...job, session_name: 'keyed' }, { idempotencyKey: 'k-1' });
  assert.equal(replay.job_id, first.job_id);
  await rejectsWith(c.createJob({ ...job, session_name: 'keyed' }), 409, 'session_exists');
  // one creation so far: one more fits, then the minute is used up
  await c.createJob({ ...job, session_name: 'second' });
  await rejectsWith(c.createJob({ ...job, session_name: 'third' }), 429, 'rate_limited');
  clock.advance(60_000);
  await c.createJob({ ...job, session_name: 'third' });
});

test('JOBS_RATE_LIMIT_PER_MINUTE: job creation beyond the limit is 429 rate_limited with Retry-After, per token', async (t) => {
  const a = await startAuthTest(t, { jobsRateLimitPerMinute: 2 });
  await a.as.client.createJob({ ...job, session_name: 'r1' });
  await a.as.client.createJob({ ...job, session_name: 'r2' });
  const res = await fetch(`${a.c.url}/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${a.secrets.client}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...job, session_name: 'r3' }),
  });
  assert.equal(res.status, 429);
  assert.ok(Number(res.headers.get('retry-after')) > 0);
  const body = (await res.json()) as { error: { code: string; message: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, 'rate_limited');
  assert.equal(body.error.details.limit_per_minute, 2);
  const err = await a.as.client.createJob({ ...job, session_name: 'r4' }).catch((e: unknown) => e);
  assert.ok(err instanceof AgentqApiError && err.status === 429 && (err.retryAfterMs ?? 0) > 0, String(err));
  // another token has its own budget; reads are not limited
  await a.as.admin.createJob({ ...job, session_name: 'r5' });
  await a.as.client.listJobs();
  assert.equal((await a.as.reader.listSessions()).sessions.length, 3);
});

test('JOBS_RATE_LIMIT_PER_MINUTE is off by default', async (t) => {
  const a = await startAuthTest(t);
  for (let i = 0; i < 30; i++) await a.as.client.createJob({ ...job, session_name: `n${i}` });
  assert.equal((await a.as.client.listJobs({ limit: 100 })).jobs.length, 30);
});

test('launchers of new hosts registering at once on PostgreSQL are answered, however small the connection pool (the binding check reads in its transaction)', async (t) => {
  const databaseUrl = await freshDatabaseUrl(t);
  if (databaseUrl === null) return;
  // every registration holds a connection for its transaction: a read of the launchers on another
  // one of the pool waited for a free connection, and with as many registrations as connections
  // none came (until the pool's 30 s timeout, then 503 for all)
  const a = await startAuthTest(t, { databaseUrl, databasePoolSize: 2 });
  const regs = await Promise.all(['n-1', 'n-2'].map((hostname) => a.as.launcher.register({ hostname, host_id: `h_host_${hostname}`, executor_type: 'test' })));
  assert.equal(regs.length, 2);
});
