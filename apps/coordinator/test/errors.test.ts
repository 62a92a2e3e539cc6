import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { test } from 'node:test';
import { request } from 'undici';
import { ConfigError, DEFAULT_CONFIG, loadConfig } from '../src/config.js';
import { bodyLimitFor } from '../src/limits.js';
import { startTest } from './helpers.js';

interface ErrorReply {
  status: number;
  body: { error: { code: string; message: string; details?: Record<string, unknown> } };
  headers: Record<string, unknown>;
}

async function send(url: string, method: string, path: string, body?: string, contentType?: string): Promise<ErrorReply> {
  const res = await request(`${url}${path}`, {
    method: method as 'GET',
    ...(body !== undefined ? { body } : {}),
    headers: contentType ? { 'content-type': contentType } : {},
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: JSON.parse(text) as ErrorReply['body'], headers: res.headers };
}

/** `{ error: { code, message, details? } }` and nothing else. */
function assertStandard(r: ErrorReply, status: number, code: string): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.deepEqual(Object.keys(r.body), ['error']);
  assert.equal(r.body.error.code, code);
  assert.equal(typeof r.body.error.message, 'string');
  for (const k of Object.keys(r.body.error)) assert.ok(['code', 'message', 'details'].includes(k), k);
}

test("Fastify's own errors come back in the standard shape with a 4xx", async (t) => {
  const { c } = await startTest(t);
  const json = 'application/json';
  assertStandard(await send(c.url, 'GET', '/jobs/%zz'), 400, 'bad_request');
  assertStandard(await send(c.url, 'GET', '/jobs/%zz/wait?timeout_ms=0'), 400, 'bad_request');
  assertStandard(await send(c.url, 'POST', '/jobs', '{"type":', json), 400, 'bad_request');
  assertStandard(await send(c.url, 'POST', '/jobs', '', json), 400, 'bad_request');
  assertStandard(await send(c.url, 'POST', '/jobs', 'hello', 'text/plain'), 415, 'unsupported_media_type');
  assertStandard(await send(c.url, 'POST', '/jobs', 'a=b', 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
  assertStandard(await send(c.url, 'POST', '/jobs', `"${'x'.repeat(bodyLimitFor(DEFAULT_CONFIG))}"`, json), 413, 'payload_too_large');
  assertStandard(await send(c.url, 'GET', `/jobs/${'a'.repeat(2000)}`), 400, 'bad_request');
  assertStandard(await send(c.url, 'GET', '/no/such/route'), 404, 'route_not_found');
  const bad = await send(c.url, 'GET', '/jobs/%zz');
  assert.deepEqual(bad.body.error.details, { field: 'url', in: 'url' });
  // in the query too, where it would otherwise be read literally
  for (const path of ['/jobs?session_name=%zz', '/sessions?parent=%ff', '/jobs?session_name=a%2']) {
    const query = await send(c.url, 'GET', path);
    assertStandard(query, 400, 'bad_request');
    assert.deepEqual(query.body.error.details, { field: 'url', in: 'url' }, path);
  }
  assert.equal((await send(c.url, 'GET', '/jobs?session_name=%C3%A9t%C3%A9+x')).status, 200);
});

test('a known path with a method it does not take is 405 with Allow; an unknown path stays 404', async (t) => {
  const { c } = await startTest(t);
  for (const [method, path, allowed] of [
    ['DELETE', '/jobs/job_0123456789ab', ['GET', 'HEAD']],
    ['PUT', '/jobs', ['GET', 'HEAD', 'POST']],
    ['POST', '/health', ['GET', 'HEAD']],
    ['GET', '/launcher/register', ['POST']],
    ['OPTIONS', '/sessions/alpha/stop', ['POST']],
    // paths of routes of their own, which another route's parameter would match too
    ['GET', '/jobs/wait', ['POST']],
    ['GET', '/jobs/batch', ['POST']],
    ['HEAD', '/jobs/wait', ['POST']],
  ] as const) {
    if (method === 'HEAD') {
      const head = await request(`${c.url}${path}`, { method });
      await head.body.dump();
      assert.equal(head.statusCode, 405, path);
      assert.equal(head.headers.allow, allowed.join(', '), path);
      continue;
    }
    const r = await send(c.url, method, path);
    assertStandard(r, 405, 'method_not_allowed');
    assert.deepEqual(r.body.error.details, { allowed }, `${method} ${path}`);
    assert.equal(r.headers.allow, allowed.join(', '), `${method} ${path}`);
  }
  assertStandard(await send(c.url, 'DELETE', '/jobs/a/b/c/d'), 404, 'route_not_found');
  // a route that takes GET but has nothing there (a static file that does not exist) is 404
  assertStandard(await send(c.url, 'GET', '/docs/static/nope.js'), 404, 'route_not_found');
  assertStandard(await send(c.url, 'GET', '/assets/nope.js'), 404, 'route_not_found');
  assertStandard(await send(c.url, 'GET', '/jobs/x/nothing'), 404, 'route_not_found');
});

test('a compressed body (a content-encoding but identity) is refused 415 naming content-encoding, not read as JSON', async (t) => {
  const { c, client } = await startTest(t);
  const json = JSON.stringify({ type: 'start_session', session_name: 'enc', prompt: 'p' });
  const create = async (body: Buffer | string, encoding: string) => {
    const res = await request(`${c.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
      body,
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: JSON.parse(text) as ErrorReply['body'], headers: res.headers };
  };
  for (const [body, encoding] of [
    [gzipSync(json), 'gzip'],
    [json, 'gzip'], // plain JSON said to be gzip: refused too, not taken as it is
    [json, 'GZIP'],
    [json, 'br'],
    [json, 'identity, gzip'],
    [gzipSync(json), 'gzip, identity'],
  ] as const) {
    const r = await create(body, encoding);
    assertStandard(r, 415, 'unsupported_media_type');
    assert.deepEqual(r.body.error.details, { field: 'content-encoding', in: 'headers' }, encoding);
    assert.match(r.body.error.message, /^content-encoding: ".*" is not supported: send the body uncompressed/, encoding);
  }
  assert.deepEqual((await client.listJobs()).jobs, []);
  // identity is the body as it is
  for (const [encoding, name] of [['identity', 'id-1'], ['Identity', 'id-2']] as const) {
    const res = await request(`${c.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': encoding },
      body: JSON.stringify({ type: 'start_session', session_name: name, prompt: 'p' }),
    });
    assert.equal(res.statusCode, 201, await res.body.text());
  }
});

test('a refused body names what is wrong with it: 415 the content-type, 413 the body and the limit', async (t) => {
  const { c } = await startTest(t);
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', undefined]) {
    const r = await send(c.url, 'POST', '/jobs', 'hello', type);
    assertStandard(r, 415, 'unsupported_media_type');
    assert.deepEqual(r.body.error.details, { field: 'content-type', in: 'headers' }, String(type));
  }
  const limit = bodyLimitFor(DEFAULT_CONFIG);
  const big = await send(c.url, 'POST', '/jobs', `"${'x'.repeat(limit)}"`, 'application/json');
  assertStandard(big, 413, 'payload_too_large');
  assert.deepEqual(big.body.error.details, { field: 'body', in: 'body', max_bytes: limit });
  assert.match(big.body.error.message, new RegExp(`${limit} bytes`));
});

test('a request that is not even HTTP gets a standard error body', async (t) => {
  const { c } = await startTest(t);
  const socket = connect(c.port, '127.0.0.1');
  socket.write('THIS IS NOT HTTP\r\n\r\n');
  let raw = '';
  for await (const chunk of socket) raw += String(chunk);
  assert.match(raw, /^HTTP\/1\.1 400 /);
  const body = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as ErrorReply['body'];
  assert.equal(body.error.code, 'bad_request');
});

test('validation messages name the field and, for enums and unions, list what is allowed', async (t) => {
  const { c } = await startTest(t);
  const json = 'application/json';
  const post = (body: unknown) => send(c.url, 'POST', '/jobs', JSON.stringify(body), json);
  const bogus = await post({ type: 'bogus', session_name: 's', prompt: 'p' });
  assertStandard(bogus, 400, 'validation_failed');
  assert.equal(bogus.body.error.message, 'type: Expected one of start_session, resume_session');
  assert.deepEqual(bogus.body.error.details, { field: 'type', in: 'body' });
  // the checks past the schema say where the field came in too
  const ownParent = await post({ type: 'start_session', session_name: 's', prompt: 'p', parent_session_name: 's' });
  assert.deepEqual(ownParent.body.error.details, { field: 'parent_session_name', in: 'body' });
  const cursor = await send(c.url, 'GET', '/jobs?cursor=x');
  assert.deepEqual(cursor.body.error.details, { field: 'cursor', in: 'querystring' });

  const timeout = await post({ type: 'start_session', session_name: 's', prompt: 'p', timeout_ms: 'soon' });
  assert.match(timeout.body.error.message, /^timeout_ms: Expected an integer >= 1 and <= \d+ or null$/);
  // a value of the right kind gets the error of that kind, not the union's
  const zero = await post({ type: 'start_session', session_name: 's', prompt: 'p', timeout_ms: 0 });
  assert.match(zero.body.error.message, /^timeout_ms: Expected integer to be greater or equal to 1/);
  const missing = await post({ type: 'start_session', session_name: 's' });
  assert.equal(missing.body.error.message, 'prompt: is required');
  const unknown = await post({ type: 'start_session', session_name: 's', prompt: 'p', colour: 'red' });
  assert.match(unknown.body.error.message, /^colour: is not a known field \(known: type, session_name, prompt, /);

  const self = await send(c.url, 'DELETE', '/launchers/lnch_000000000000?self=maybe');
  assert.equal(self.body.error.message, 'self: Expected one of true, false');
  const mode = await send(c.url, 'POST', '/jobs/wait', JSON.stringify({ job_ids: ['x'], mode: 'some' }), json);
  assert.equal(mode.body.error.message, 'mode: Expected one of any, all');
  const register = await send(c.url, 'POST', '/launcher/register', '[1]', json);
  assert.equal(register.body.error.message, 'body: Expected an object or null');
});

test('configuration errors list the allowed values too (LOG_LEVEL=verbose)', () => {
  assert.throws(
    () => loadConfig({ LOG_LEVEL: 'verbose' }),
    (e: Error) =>
      e instanceof ConfigError &&
      e.message === 'LOG_LEVEL: Expected one of fatal, error, warn, info, debug, trace, silent (got "verbose")',
  );
  assert.throws(() => loadConfig({ AUTH_DISABLED: 'maybe' }), /AUTH_DISABLED: expected true or false, got "maybe"/);
  assert.throws(() => loadConfig({ TLS_CERT_FILE: '/x.pem' }), /TLS_KEY_FILE: TLS_CERT_FILE and TLS_KEY_FILE go together/);
  assert.throws(() => loadConfig({ AUTH_DISABLED: 'true', AUTH_TOKENS_FILE: '/t' }), /AUTH_DISABLED: cannot be true while AUTH_TOKENS_FILE is set/);
});

test('a history retention too long for an exact cut-off is a configuration error naming the variable that was set', () => {
  // 1e23 ms was accepted: on PostgreSQL every sweep then failed on the cut-off ("-1e+23" is no
  // bigint), and with it the purges of Idempotency-Keys and of the commit log that follow it
  assert.throws(() => loadConfig({ JOB_RETENTION_MS: '100000000000000000000000' }), /^ConfigError: JOB_RETENTION_MS: Expected integer to be less or equal to 9007199254740991/);
  assert.throws(() => loadConfig({ JOB_HISTORY_DAYS: '200000000000' }), /^ConfigError: JOB_HISTORY_DAYS: Expected integer to be less or equal to 9007199254740991/);
  // JOB_RETENTION_MS=0 was reported as JOB_HISTORY_DAYS, a variable the operator had not set
  assert.throws(() => loadConfig({ JOB_RETENTION_MS: '0' }), /^ConfigError: JOB_RETENTION_MS: Expected integer to be greater or equal to 1 \(got 0\)/);
  assert.throws(() => loadConfig({ JOB_HISTORY_DAYS: '0' }), /^ConfigError: JOB_HISTORY_DAYS: Expected integer to be greater or equal to 1 \(got 0\)/);
  assert.equal(loadConfig({ JOB_RETENTION_MS: String(Number.MAX_SAFE_INTEGER) }).jobRetentionMs, Number.MAX_SAFE_INTEGER);
});

test('overloaded (heap above OVERLOAD_MAX_HEAP_BYTES): 503 overloaded with Retry-After, in the standard shape; /health still answers and says so', async (t) => {
  const { c } = await startTest(t, { overloadMaxHeapBytes: 1, overloadSampleIntervalMs: 10, overloadRetryAfterSeconds: 7 });
  // the first samples after start are not acted on (the start itself blocks the event loop):
  // ask until the coordinator has measured (a bounded number of tries, each one round trip)
  let r: ErrorReply | undefined;
  for (let i = 0; i < 500; i++) {
    const res = await request(`${c.url}/ready`);
    const text = await res.body.text();
    if (res.statusCode === 503) {
      r = { status: 503, body: JSON.parse(text) as ErrorReply['body'], headers: res.headers };
      break;
    }
    assert.deepEqual(JSON.parse(text), { ready: true });
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(r, 'the coordinator never reported overload');
  assertStandard(r, 503, 'overloaded');
  assert.equal(r.headers['retry-after'], '7');
  assert.equal(r.body.error.details?.reason, 'heapUsedBytes');
  // liveness is not refused: a busy coordinator is alive
  const health = await request(`${c.url}/health`);
  assert.equal(health.statusCode, 200);
  assert.equal(((await health.body.json()) as { overloaded: boolean }).overloaded, true);
  const jobs = await request(`${c.url}/jobs`);
  assert.equal(jobs.statusCode, 503, 'other routes are refused');
  await jobs.body.dump();
});
