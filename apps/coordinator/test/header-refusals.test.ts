import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import selfsigned from 'selfsigned';
import { startTest, tempDir } from './helpers.js';

/*
 * Requests Node's HTTP server used to answer itself with an empty body (no Host: 400; an Expect
 * other than 100-continue: 417): sent raw, as no HTTP client would send them.
 */

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: string; message: string; details?: Record<string, unknown> } };
}

/** The first complete answer on `socket` (its body by Content-Length); the socket is left open. */
function readAnswer(socket: Socket): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    let raw = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      raw = Buffer.concat([raw, chunk]);
      const end = raw.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const length = Number(headers['content-length']);
      // an empty body (what Node sent) has no JSON to read: it fails below, saying what came
      if (!Number.isInteger(length)) return done(new Error(`no content-length in ${JSON.stringify(raw.toString('latin1'))}`));
      if (raw.length < end + 4 + length) return;
      const text = raw.subarray(end + 4, end + 4 + length).toString('utf8');
      done(undefined, { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(text) as RawAnswer['body'] });
    };
    const onClose = () => done(new Error(`closed before a full answer: ${JSON.stringify(raw.toString('latin1'))}`));
    const done = (err: Error | undefined, answer?: RawAnswer) => {
      socket.off('data', onData);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(answer!);
    };
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** Send `text` on a new connection and read the answer; the connection is closed after. */
async function exchange(port: number, text: string): Promise<RawAnswer> {
  const socket = connect(port, '127.0.0.1');
  try {
    socket.write(text);
    return await readAnswer(socket);
  } finally {
    socket.destroy();
  }
}

function assertStandard(a: RawAnswer, status: number, code: string, field: string): void {
  assert.equal(a.status, status, JSON.stringify(a));
  assert.match(a.headers['content-type'] ?? '', /^application\/json/);
  assert.deepEqual(Object.keys(a.body), ['error']);
  assert.equal(a.body.error.code, code);
  assert.deepEqual(a.body.error.details, { field, in: 'headers' });
}

test('an HTTP/1.1 request without Host is refused 400 bad_request in the standard shape, naming the header; HTTP/1.0 needs none', async (t) => {
  const { c } = await startTest(t);
  for (const request of ['GET /health HTTP/1.1\r\n\r\n', 'POST /jobs HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}']) {
    const a = await exchange(c.port, request);
    assertStandard(a, 400, 'bad_request', 'host');
    assert.match(a.body.error.message, /^host: is missing/);
    assert.equal(a.headers.connection, 'close');
  }
  const old = await exchange(c.port, 'GET /jobs/job_000000000000 HTTP/1.0\r\n\r\n');
  assert.equal(old.status, 404);
  assert.equal(old.body.error.code, 'job_not_found');
});

test('a request without Host is refused over HTTPS too', async (t) => {
  const dir = tempDir(t, 'agentq-refusals-tls-');
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'agentq test coordinator' }], { keyType: 'ec', algorithm: 'sha256' });
  writeFileSync(join(dir, 'cert.pem'), pems.cert);
  writeFileSync(join(dir, 'key.pem'), pems.private);
  const { c } = await startTest(t, { tlsCertFile: join(dir, 'cert.pem'), tlsKeyFile: join(dir, 'key.pem') });
  assert.match(c.url, /^https:/);
  const socket = tlsConnect({ port: c.port, host: '127.0.0.1', rejectUnauthorized: false });
  t.after(() => socket.destroy());
  socket.write('GET /health HTTP/1.1\r\n\r\n');
  assertStandard(await readAnswer(socket as unknown as Socket), 400, 'bad_request', 'host');
});

test('an Expect other than 100-continue is refused 417 expectation_failed in the standard shape, naming the header', async (t) => {
  const { c, client } = await startTest(t);
  const get = await exchange(c.port, 'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: foo\r\n\r\n');
  assertStandard(get, 417, 'expectation_failed', 'expect');
  assert.equal(get.body.error.message, 'expect: "foo" cannot be met; only 100-continue is supported');
  // a create with such an expectation is refused before its body is read: nothing is created
  const body = JSON.stringify({ type: 'start_session', session_name: 'expects', prompt: 'p' });
  const post = await exchange(
    c.port,
    `POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  assertStandard(post, 417, 'expectation_failed', 'expect');
  assert.equal((await client.listJobs({})).jobs.length, 0);
  // as Node checks it: Expect is HTTP/1.1's; an HTTP/1.0 request's is ignored and the request served
  const old = await exchange(c.port, 'GET /jobs/job_000000000000 HTTP/1.0\r\nExpect: foo\r\n\r\n');
  assert.equal(old.status, 404);
  assert.equal(old.body.error.code, 'job_not_found');
});

test('Expect: 100-continue gets 100 Continue, then the answer to the body sent after it', async (t) => {
  const { c } = await startTest(t);
  const socket = connect(c.port, '127.0.0.1');
  t.after(() => socket.destroy());
  const body = JSON.stringify({ type: 'start_session', session_name: 'continued', prompt: 'p' });
  socket.write(`POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
  const interim = await new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
  assert.equal(interim, 'HTTP/1.1 100 Continue\r\n\r\n');
  const answer = readAnswer(socket);
  socket.write(body);
  const created = (await answer) as unknown as { status: number; body: { session_name: string; status: string } };
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal(created.body.session_name, 'continued');
});

test('a request without Host that expects 100-continue gets the 400 alone, not a 100 Continue first', async (t) => {
  const { c, client } = await startTest(t);
  const body = JSON.stringify({ type: 'start_session', session_name: 'no-host', prompt: 'p' });
  const socket = connect(c.port, '127.0.0.1');
  t.after(() => socket.destroy());
  // the body is never sent: the client waits for 100 Continue (or a final answer) first
  const first = new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
  const answer = readAnswer(socket);
  socket.write(`POST /jobs HTTP/1.1\r\nExpect: 100-continue\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
  assert.match(await first, /^HTTP\/1\.1 400 /);
  const a = await answer;
  assertStandard(a, 400, 'bad_request', 'host');
  assert.equal(a.headers.connection, 'close');
  assert.equal((await client.listJobs({})).jobs.length, 0);
});
