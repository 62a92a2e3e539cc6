import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { OnePerTurn } from '../src/http/json-body.js';
import { requestTimeoutMs } from '../src/http/timeouts.js';
import { BIG_STRING, jsonBytes, largeStrings, memoStats } from '../src/json-bytes.js';
import { InvalidJson, JsonThread } from '../src/http/json-thread.js';
import { jobEvent } from '../src/core/store/lazy-events.js';
import { countTurns, jobRowFixture, startTest } from './helpers.js';

// Large bodies are parsed on the JSON thread and handled one per turn of the event loop; large
// strings are encoded once for all the answers and event frames that carry them.

/** A prompt past the large-body threshold with every kind of character JSON escapes or encodes. */
const tricky = (n: number) => `"quoted" \\ back\nnew line\ttab \u0001 é ü 漢字 😀 \u2028 \ud800 lone `.repeat(n);

test('a large body is parsed off the event loop and stored exactly; its answer and reads carry the same prompt', async (t) => {
  const { client } = await startTest(t);
  const sent = tricky(4000);
  assert.ok(sent.length > 64 * 1024);
  // a lone surrogate (\ud800) is made U+FFFD as the body is read: every store holds the same text
  const prompt = sent.replaceAll('\ud800', '\ufffd');
  const created = await client.createJob({ type: 'start_session', session_name: 'large', prompt: sent });
  assert.equal(created.prompt, prompt, 'the answer to the create');
  assert.equal((await client.getJob(created.job_id)).prompt, prompt, 'a read');
  const [listed] = (await client.listJobs({ session_name: 'large' })).jobs;
  assert.equal(listed?.prompt, prompt, 'a list');
});

test('lone surrogates in any body, large or small, are stored as U+FFFD; the rest of the text is kept exactly', async (t) => {
  const { client } = await startTest(t);
  for (const size of [1, 4000]) {
    const sent = `${tricky(size)} pair 😀 high \ud83d low \ude00 end`;
    const job = await client.createJob({ type: 'start_session', session_name: `surrogates-${size}`, prompt: sent });
    const expected = sent.replaceAll('\ud800', '\ufffd').replace('high \ud83d low \ude00', 'high \ufffd low \ufffd');
    assert.equal(job.prompt, expected);
    assert.equal((await client.getJob(job.job_id)).prompt, expected);
    assert.equal((await client.listJobs({ session_name: `surrogates-${size}` })).jobs[0]?.prompt, expected, 'read back from the store');
  }
});

test('a large body that is not JSON is refused 400 in the standard shape', async (t) => {
  const { c } = await startTest(t);
  const filler = 'x'.repeat(100 * 1024);
  const body = `{"type":"start_session","session_name":"bad","prompt":"${filler}"`;
  const res = await request(`${c.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  const answer = (await res.body.json()) as { error: { code: string; message: string } };
  assert.equal(res.statusCode, 400);
  assert.equal(answer.error.code, 'bad_request');
  assert.equal(answer.error.message, 'body: is not valid JSON');
});

test('a body with a __proto__ key or a constructor.prototype, large or small, is refused 400 saying so, not as invalid JSON', async (t) => {
  const { c, client } = await startTest(t);
  for (const filler of ['x', 'x'.repeat(100 * 1024)]) {
    for (const extra of ['"__proto__":{"polluted":true}', '"nested":{"a":[{"__proto__":null}]}', '"constructor":{"prototype":{"polluted":true}}']) {
      const body = `{"type":"start_session","session_name":"bad","prompt":"${filler}",${extra}}`;
      const res = await request(`${c.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const answer = (await res.body.json()) as { error: { code: string; message: string; details: Record<string, unknown> } };
      const what = `${extra} in a body of ${body.length} bytes`;
      assert.equal(res.statusCode, 400, what);
      assert.equal(answer.error.code, 'bad_request', what);
      assert.match(answer.error.message, /^body: a "__proto__" key, or a "constructor" object with a "prototype" key, is not accepted/, what);
      assert.deepEqual(answer.error.details, { field: 'body', in: 'body' }, what);
    }
  }
  // a key merely named constructor (not an object with a prototype) is no threat: it is refused as
  // any unknown field is, by the schema
  const res = await request(`${c.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"type":"start_session","session_name":"bad","prompt":"p","constructor":1}',
  });
  assert.equal(res.statusCode, 400);
  assert.equal(((await res.body.json()) as { error: { code: string } }).error.code, 'validation_failed');
  assert.deepEqual((await client.listJobs()).jobs, []);
});

test('a body that is not UTF-8, or says it is in another charset, is refused, not stored with U+FFFD in its place', async (t) => {
  const { c, client } = await startTest(t);
  const create = (prompt: Buffer, contentType: string, name = 'enc') =>
    request(`${c.url}/jobs`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: Buffer.concat([Buffer.from(`{"type":"start_session","session_name":"${name}","prompt":"`), prompt, Buffer.from('"}')]),
    });
  const latin1 = Buffer.from('caf\xe9', 'latin1'); // é as one byte: not UTF-8
  for (const [prompt, contentType, status, code, field] of [
    [latin1, 'application/json', 400, 'bad_request', 'body'],
    [Buffer.concat([latin1, Buffer.alloc(70 * 1024, 'p')]), 'application/json', 400, 'bad_request', 'body'], // large: the JSON thread's path
    [latin1, 'application/json; charset=iso-8859-1', 415, 'unsupported_media_type', 'content-type'],
    [Buffer.from('café'), 'application/json; charset="latin1"', 415, 'unsupported_media_type', 'content-type'],
  ] as const) {
    const res = await create(prompt, contentType);
    const answer = (await res.body.json()) as { error: { code: string; details: { field: string } } };
    assert.equal(res.statusCode, status, contentType);
    assert.equal(answer.error.code, code);
    assert.equal(answer.error.details.field, field);
  }
  assert.deepEqual((await client.listJobs()).jobs, []);
  // UTF-8, said or not, is taken exactly (and a body said to be US-ASCII, which is UTF-8 as it stands)
  for (const contentType of ['application/json; charset=utf-8', 'application/json; charset=UTF8', 'application/json', 'application/json; charset=us-ascii']) {
    const res = await create(Buffer.from('café 😀'), contentType, `enc-${contentType.length}`);
    const job = (await res.body.json()) as { prompt: string };
    assert.equal(res.statusCode, 201, contentType);
    assert.equal(job.prompt, 'café 😀');
  }
});

test('the JSON thread parses a large body and sends back the JSON bytes of its large strings, which answers then reuse', async () => {
  const thread = new JsonThread();
  try {
    const big = `${tricky(2000)} one`.replaceAll('\ud800', '\ufffd');
    const other = `${tricky(2000)} two`.replaceAll('\ud800', '\ufffd');
    const body = { prompt: big, nested: { list: ['small', other] }, n: 1 };
    const before = memoStats().strings;
    const value = await thread.parse(Buffer.from(JSON.stringify(body), 'utf8'));
    assert.deepEqual(value, body);
    assert.deepEqual(largeStrings(value), [big, other]);
    assert.equal(memoStats().strings - before, 2, 'both large strings came back encoded, before any answer was made');
    assert.ok(jsonBytes(value).equals(Buffer.from(JSON.stringify(body), 'utf8')));
    assert.equal(memoStats().strings - before, 2, 'the answer used them');
    await assert.rejects(thread.parse(Buffer.from('{"prompt": "unterminated', 'utf8')), InvalidJson);
  } finally {
    await thread.close();
  }
});

test('a body nesting deeper than 32 levels is refused 400, however deep and whichever thread parses it; the coordinator carries on', async (t) => {
  const { c, client } = await startTest(t);
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;
  const padding = 'p'.repeat(100 * 1024);
  for (const [levels, pad] of [
    [33, ''],
    [30_000, ''],
    [30_000, padding],
    [33, padding],
  ] as const) {
    const body = `{"type":"start_session","session_name":"deep","prompt":"${pad}x","extra":${nested(levels)}}`;
    const res = await request(`${c.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    const answer = (await res.body.json()) as { error: { code: string; message: string } };
    assert.equal(res.statusCode, 400, `${levels} levels, ${body.length} bytes`);
    assert.equal(answer.error.code, 'bad_request');
    assert.equal(answer.error.message, 'body: nests deeper than 32 levels');
    assert.deepEqual((answer.error as { details?: unknown }).details, { field: 'body', in: 'body' });
  }
  // 32 levels pass the parser (and meet the schema, which has no such field)
  const ok = await request(`${c.url}/jobs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: `{"type":"start_session","session_name":"deep","prompt":"x","extra":${nested(31)}}`,
  });
  const okAnswer = (await ok.body.json()) as { error: { code: string } };
  assert.equal(ok.statusCode, 400);
  assert.equal(okAnswer.error.code, 'validation_failed');
  assert.equal((await client.health()).status, 'ok');
});

test('a body with an object of more than 64 members or an array of more than 10,000 items is refused 400 from its bytes, whichever thread would parse it', async (t) => {
  const { c, client } = await startTest(t);
  const post = async (body: string) => {
    const res = await request(`${c.url}/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: res.statusCode, answer: (await res.body.json()) as { error: { code: string; message: string; details?: unknown } } };
  };
  const members = (n: number) => `{${Array.from({ length: n }, (_, i) => `"k${i}":1`).join(',')}}`;
  const items = (n: number) => `[${Array(n).fill('0').join(',')}]`;
  const padding = 'p'.repeat(100 * 1024);
  for (const [extra, message] of [
    [members(65), 'body: an object has more than 64 members'],
    [members(6000), 'body: an object has more than 64 members'],
    [items(10_001), 'body: an array has more than 10000 items'],
  ] as const) {
    for (const pad of ['', padding]) {
      const { status, answer } = await post(`{"type":"start_session","session_name":"wide","prompt":"${pad}x","extra":${extra}}`);
      assert.equal(status, 400, `${message}, ${pad.length} bytes of padding`);
      assert.equal(answer.error.code, 'bad_request');
      assert.equal(answer.error.message, message);
      assert.deepEqual(answer.error.details, { field: 'body', in: 'body' });
    }
  }
  // the whole body is one object: its members count too
  assert.equal((await post(members(100))).answer.error.message, 'body: an object has more than 64 members');
  // 64 members and 10,000 items pass the look at the shape (and fail the schema, which has no such field)
  for (const extra of [members(64), items(10_000)]) {
    const { status, answer } = await post(`{"type":"start_session","session_name":"wide","prompt":"x","extra":${extra}}`);
    assert.equal(status, 400);
    assert.equal(answer.error.code, 'validation_failed');
  }
  // commas, brackets and escaped quotes inside strings are text, not members: this prompt is kept exactly
  const prompt = `${'a, b, [c], {d}, \\"e\\", '.repeat(2000)} \\`;
  for (const pad of ['', padding]) {
    const job = await client.createJob({ type: 'start_session', session_name: `commas-${pad.length}`, prompt: `${pad}${prompt}` });
    assert.equal(job.prompt, `${pad}${prompt}`);
  }
  assert.equal((await client.health()).status, 'ok');
});

test('tasks queued together run one per turn of the event loop', async () => {
  const loop = countTurns();
  await new Promise((resolve) => setImmediate(resolve));
  const turns = new OnePerTurn();
  const seen: number[] = [];
  await new Promise<void>((resolve) => {
    for (let i = 0; i < 4; i++) turns.run(() => (seen.push(loop.turn), i === 3 && resolve()));
  });
  loop.stop();
  assert.equal(seen.length, 4);
  for (let i = 1; i < seen.length; i++) assert.ok(seen[i]! > seen[i - 1]!, `task ${i} ran in a later turn than task ${i - 1}: ${seen.join(',')}`);
});

test('jsonBytes is JSON.stringify as UTF-8, large strings included, in plain objects, lists and lazy events', () => {
  const prompt = tricky(3000);
  const result = `${tricky(2000)} the result`;
  assert.ok(prompt.length >= BIG_STRING && result.length >= BIG_STRING);
  const job = { job_id: 'job_1', prompt, result, error: null, n: 1, nested: { deep: [prompt, 'small'] } };
  const row = jobRowFixture(1, { prompt, result, status: 'completed', completedAt: 0, attempts: 1 });
  const event = jobEvent(7, 'job.completed', '2026-01-01T00:00:00.000Z', row);
  for (const data of [job, { jobs: [job, job, { prompt: 'small' }] }, { job }, event, prompt, { small: 'only' }, [1, 'two', null]]) {
    // twice: the second time the large strings come from the memo
    for (let i = 0; i < 2; i++) assert.ok(jsonBytes(data).equals(Buffer.from(JSON.stringify(data), 'utf8')));
  }
});

test('jsonBytes: strings made to share a fingerprint each get their own bytes, and at most four of them are kept', () => {
  // same length, the same characters at both ends and at every sampled place: they differ only at index 200
  const base = 'a'.repeat(BIG_STRING * 2);
  const variants = 'bcdefghij'.split('').map((ch) => `${base.slice(0, 200)}${ch}${base.slice(201)}`);
  const before = memoStats().strings;
  for (let round = 0; round < 2; round++) {
    for (const v of variants) assert.ok(jsonBytes({ prompt: v }).equals(Buffer.from(JSON.stringify({ prompt: v }), 'utf8')));
  }
  assert.equal(memoStats().strings - before, 4, 'one fingerprint keeps four strings; the rest are encoded each time');
});

test('jsonBytes: prompts that differ only in their first characters are each kept (encoded once each)', () => {
  const filler = 'z'.repeat(BIG_STRING * 2);
  const prompts = Array.from({ length: 10 }, (_, i) => `job-${i}:${filler}`);
  const before = memoStats().strings;
  for (const p of prompts) jsonBytes({ prompt: p });
  assert.equal(memoStats().strings - before, 10);
  for (const p of prompts) assert.ok(jsonBytes({ prompt: p }).equals(Buffer.from(JSON.stringify({ prompt: p }), 'utf8')));
  assert.equal(memoStats().strings - before, 10, 'the second time they came from the memo');
});

test('jsonBytes: the memo holds at most 64 MiB of strings and their bytes, the least recently used going first', () => {
  const first = `first ${'x'.repeat(1024 * 1024)}`;
  jsonBytes({ prompt: first });
  for (let i = 0; i < 80; i++) {
    const s = `${i} ${'y'.repeat(1024 * 1024)}`;
    assert.ok(jsonBytes({ prompt: s }).equals(Buffer.from(JSON.stringify({ prompt: s }), 'utf8')));
  }
  const { bytes, strings } = memoStats();
  assert.ok(bytes <= 64 * 1024 * 1024, `${bytes} bytes held`);
  assert.ok(strings < 40, `${strings} strings held`);
  // the first one went out long ago, and comes back right
  assert.ok(jsonBytes({ prompt: first }).equals(Buffer.from(JSON.stringify({ prompt: first }), 'utf8')));
});

test('request timeouts are spread over the last tenth of HTTP_REQUEST_TIMEOUT_MS, never past it', () => {
  assert.equal(requestTimeoutMs(60_000, () => 0), 60_000);
  assert.equal(requestTimeoutMs(60_000, () => 0.999999), 54_000);
  for (let i = 0; i < 1000; i++) {
    const ms = requestTimeoutMs(60_000);
    assert.ok(ms >= 54_000 && ms <= 60_000, String(ms));
  }
});
