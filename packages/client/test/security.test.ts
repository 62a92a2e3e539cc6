import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import selfsigned from 'selfsigned';
import { AgentqApiError, AgentqAuthError, AgentqClient, MAX_CA_FILE_BYTES, parseRetryAfter, readCaFile } from '../src/index.js';

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;

/** A real HTTP server on 127.0.0.1:0 answering with `handler`; records each request's headers. */
async function server(t: TestContext, handler: Handler) {
  const seen: IncomingMessage['headers'][] = [];
  const s = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => handler(req, res, seen.length));
  });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => s.close(() => resolve())));
  return { url: `http://127.0.0.1:${(s.address() as { port: number }).port}`, seen };
}

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const health = { status: 'ok', uptime_seconds: 1, queue_depth: 0, jobs_active: 0, launchers: { online: 0, stale: 0, parked_polls: 0 } };

test('the token goes out as a bearer token; a function is asked on every request; a call may override it', async (t) => {
  const s = await server(t, (_req, res) => json(res, 200, health));
  let current = 'first';
  const client = new AgentqClient({ url: s.url, token: () => current });
  t.after(() => client.close());
  await client.health();
  current = 'second';
  await client.health();
  await client.register({}, { token: 'registration' });
  const none = new AgentqClient({ url: s.url });
  t.after(() => none.close());
  await none.health();
  assert.deepEqual(
    s.seen.map((h) => h.authorization),
    ['Bearer first', 'Bearer second', 'Bearer registration', undefined],
  );
});

test('401 and 403 are an AgentqAuthError at once, never retried; launcher_unknown stays a plain API error', async (t) => {
  const s = await server(t, (req, res) => {
    if (req.url === '/jobs') return json(res, 401, { error: { code: 'unauthorized', message: 'this endpoint needs a token' } });
    if (req.url === '/launchers') return json(res, 403, { error: { code: 'forbidden', message: 'a reader token may not' } });
    json(res, 401, { error: { code: 'launcher_unknown', message: 'register again' } });
  });
  const client = new AgentqClient({ url: s.url });
  t.after(() => client.close());
  const e401 = await client.listJobs().catch((e: unknown) => e);
  assert.ok(e401 instanceof AgentqAuthError);
  assert.equal(e401.status, 401);
  assert.equal(e401.isFinal, true);
  assert.match(e401.message, /no valid token \(this endpoint needs a token\)/);
  const e403 = await client.listLaunchers().catch((e: unknown) => e);
  assert.ok(e403 instanceof AgentqAuthError && e403.code === 'forbidden');
  const unknown = await client.heartbeat({ launcher_id: 'lnch_000000000000' }).catch((e: unknown) => e);
  assert.ok(unknown instanceof AgentqApiError && !(unknown instanceof AgentqAuthError) && unknown.code === 'launcher_unknown');
  assert.equal(s.seen.length, 3);
});

test('503 and 429 with Retry-After are sent again after the wait the server asked for, up to overloadRetries', async (t) => {
  const s = await server(t, (_req, res, n) => {
    if (n <= 2) return json(res, 503, { error: { code: 'overloaded', message: 'busy' } }, { 'retry-after': '0' });
    json(res, 200, health);
  });
  const client = new AgentqClient({ url: s.url });
  t.after(() => client.close());
  assert.equal((await client.health()).status, 'ok');
  assert.equal(s.seen.length, 3);

  const always = await server(t, (_req, res) => json(res, 429, { error: { code: 'rate_limited', message: 'slow down' } }, { 'retry-after': '0' }));
  const once = new AgentqClient({ url: always.url, overloadRetries: 1 });
  t.after(() => once.close());
  const err = await once.createJob({ type: 'start_session', session_name: 's', prompt: 'p' }).catch((e: unknown) => e);
  assert.ok(err instanceof AgentqApiError && err.code === 'rate_limited' && err.retryAfterMs === 0);
  assert.equal(always.seen.length, 2);

  // a wait longer than maxRetryAfterMs fails at once, with the wait on the error for the caller
  const later = await server(t, (_req, res) => json(res, 503, { error: { code: 'overloaded', message: 'busy' } }, { 'retry-after': '120' }));
  const impatient = new AgentqClient({ url: later.url, maxRetryAfterMs: 1000 });
  t.after(() => impatient.close());
  const slow = await impatient.health().catch((e: unknown) => e);
  assert.ok(slow instanceof AgentqApiError && slow.retryAfterMs === 120_000);
  assert.equal(later.seen.length, 1);
});

test("a change refused with a proxy's 503 (no agentq error code) is not sent again: the coordinator may have made it; a read is", async (t) => {
  const proxy = await server(t, (_req, res) => {
    res.writeHead(503, { 'content-type': 'text/html', 'retry-after': '0' });
    res.end('<html>Service Unavailable</html>');
  });
  const client = new AgentqClient({ url: proxy.url });
  t.after(() => client.close());
  const err = await client.sendMessage('s', { text: 'once' }).catch((e: unknown) => e);
  assert.ok(err instanceof AgentqApiError && err.status === 503 && err.code === 'http_503', String(err));
  assert.equal(proxy.seen.length, 1, 'the message went once');
  await client.health().catch(() => undefined);
  assert.equal(proxy.seen.length, 1 + 3, 'a read is tried again (overloadRetries: 2)');

  // a create carries its Idempotency-Key: a proxy's 429 is waited out and the create sent again, with the same key
  const limiter = await server(t, (_req, res) => {
    res.writeHead(429, { 'content-type': 'text/html', 'retry-after': '0' });
    res.end('<html>Too Many Requests</html>');
  });
  const creator = new AgentqClient({ url: limiter.url, createRetries: 0 });
  t.after(() => creator.close());
  await assert.rejects(creator.createJob({ type: 'start_session', session_name: 's', prompt: 'p' }), /429/);
  assert.equal(limiter.seen.length, 3, 'sent again overloadRetries (2) times');
  assert.equal(new Set(limiter.seen.map((h) => h['idempotency-key'])).size, 1, 'with one key');
});

test('Retry-After is delay-seconds or an HTTP date', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('5', now), 5000);
  assert.equal(parseRetryAfter('Wed, 01 Jan 2025 00:00:30 GMT', now), 30_000);
  assert.equal(parseRetryAfter('Tue, 31 Dec 2024 00:00:00 GMT', now), 0);
  assert.equal(parseRetryAfter('soon', now), undefined);
  // neither form (RFC 9110 has whole seconds only): ignored, not read as a date in the past
  for (const bad of ['1.5', '-1', '-30', '1e3', '']) assert.equal(parseRetryAfter(bad, now), undefined, bad);
  assert.equal(parseRetryAfter(undefined, now), undefined);
});

test('a CA file that cannot be read is an error at construction, naming it', () => {
  assert.throws(() => new AgentqClient({ url: 'https://127.0.0.1:1', caFile: '/nonexistent/ca.pem' }), /cannot read the CA file \/nonexistent\/ca\.pem/);
});

test('a CA file with no certificate in it (the key, another file, a certificate cut short or damaged) is an error at construction, naming it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-client-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'agentq test coordinator' }], { keyType: 'ec', algorithm: 'sha256' });
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const construct = (caFile: string) => new AgentqClient({ url: 'https://127.0.0.1:1', caFile }).close();
  // TLS would skip each of these without a word, and refuse the coordinator's certificate as self-signed at every call
  const key = file('key.pem', pems.private);
  assert.throws(() => construct(key), (e: Error) => e.message.includes(`the CA file ${key} holds no PEM certificate`) && /it holds a private key/.test(e.message));
  for (const [name, text] of [
    ['empty.pem', ''],
    ['notes.txt', 'the CA is on the wiki\n'],
    ['cut-short.pem', pems.cert.slice(0, 300)],
  ] as const) {
    const path = file(name, text);
    assert.throws(() => construct(path), (e: Error) => e.message.includes(`the CA file ${path} holds no PEM certificate`), name);
  }
  const damaged = file('damaged.pem', pems.cert.replace(/(\n[A-Za-z0-9+/]{20})[A-Za-z0-9+/]/, '$1!'));
  assert.throws(() => construct(damaged), (e: Error) => e.message.startsWith(`the CA file ${damaged}: certificate 1 of 1 cannot be read`));
  // a certificate, several (a chain), or one beside its key are taken
  await construct(file('ca.pem', pems.cert));
  await construct(file('chain.pem', `${pems.cert}\n${pems.cert}`));
  await construct(file('both.pem', `${pems.private}\n${pems.cert}`));
});

test('every form of CA file TLS takes is taken: the old X509 label, CRLF, text between certificates, a bundle, the system one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-client-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'agentq test coordinator' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
  });
  const s = createHttpsServer({ cert: pems.cert, key: pems.private }, (_req, res) => json(res, 200, health));
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => s.close(() => resolve())));
  const url = `https://127.0.0.1:${(s.address() as { port: number }).port}`;
  const other = await selfsigned.generate([{ name: 'commonName', value: 'another CA' }], { keyType: 'ec', algorithm: 'sha256' });
  const system = existsSync('/etc/ssl/certs/ca-certificates.crt') ? readFileSync('/etc/ssl/certs/ca-certificates.crt', 'utf8') : '';
  const forms: Record<string, string> = {
    // OpenSSL's old label, which its PEM reader (and so TLS) takes as a certificate
    'x509-label.pem': pems.cert.replace(/(BEGIN|END) CERTIFICATE/g, '$1 X509 CERTIFICATE'),
    'crlf.pem': pems.cert.replace(/\r?\n/g, '\r\n'),
    'commented.pem': `# the agentq CA\nSubject: CN=agentq test coordinator\n${other.cert}\nthe next one is ours\n${pems.cert}`,
    'system-bundle-and-ours.pem': `${system}\n${pems.cert}`,
  };
  for (const [name, text] of Object.entries(forms)) {
    const caFile = join(dir, name);
    writeFileSync(caFile, text);
    const client = new AgentqClient({ url, caFile });
    try {
      assert.equal((await client.health()).status, 'ok', name);
    } finally {
      await client.close();
    }
  }
});

test('a CA file is read within bounds: BEGIN lines without END are refused at once, a file past MAX_CA_FILE_BYTES unread', { timeout: 20_000 }, (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-client-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // a lazy BEGIN...END regex scanned to the end of the file from each BEGIN: minutes for this one
  const begins = join(dir, 'begins.pem');
  writeFileSync(begins, '-----BEGIN CERTIFICATE-----\nMIIB\n'.repeat(Math.floor((MAX_CA_FILE_BYTES - 1024) / 33)));
  assert.throws(() => readCaFile(begins), /holds no PEM certificate/);
  const big = join(dir, 'big.pem');
  writeFileSync(big, Buffer.alloc(MAX_CA_FILE_BYTES + 1, 0x41));
  assert.throws(() => readCaFile(big), (e: Error) => e.message === `cannot read the CA file ${big}: it is larger than 4 MiB: not a CA certificate file`);
});
