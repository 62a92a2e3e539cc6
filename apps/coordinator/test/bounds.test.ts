import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { fakeLauncher, rejectsWith, start, startTest } from './helpers.js';

// issue 11, items 7, 8 and 13: the limits agree with each other, and every number has a bound

async function raw(url: string, method: string, path: string, body?: string): Promise<{ status: number; body: Record<string, any> }> {
  const res = await request(`${url}${path}`, {
    method: method as 'GET',
    ...(body !== undefined ? { body, headers: { 'content-type': 'application/json' } } : {}),
  });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, any> };
}

test('session names of 101 to 200 characters (any script) can be created, read, listed, messaged and stopped', async (t) => {
  const { client } = await startTest(t);
  // lengths count UTF-16 units, as everywhere in the API: 100 emoji are 200 of them
  const names = ['n'.repeat(101), 's'.repeat(200), 'é'.repeat(200), '会'.repeat(200), '😀'.repeat(100), `${'a/b?c#d%'.repeat(25)}`];
  for (const name of names) {
    const job = await start(client, name);
    assert.equal(job.session_name, name);
    assert.equal((await client.getSession(name)).session_name, name);
    assert.deepEqual((await client.listJobs({ session_name: name })).jobs.map((j) => j.job_id), [job.job_id]);
    assert.equal((await client.sendMessage(name, { text: 'hello' })).outcome, 'queued');
    const stopped = await client.stopSession(name);
    assert.equal(stopped.session_name, name);
    assert.equal(stopped.stopped[0]?.job_id, job.job_id);
  }
});

test('too-long ids are a 400 naming the field, longer still a 400 on the URL, unknown ones a 404: all in the standard shape', async (t) => {
  const { c, client } = await startTest(t);
  await rejectsWith(start(client, 'x'.repeat(201)), 400, 'validation_failed');
  const long = await raw(c.url, 'GET', `/sessions/${'x'.repeat(201)}`);
  assert.equal(long.status, 400);
  assert.equal(long.body.error.code, 'validation_failed');
  assert.equal(long.body.error.details.field, 'session_name');
  for (const path of [`/sessions/${'x'.repeat(3000)}`, `/jobs/${'x'.repeat(3000)}`]) {
    const r = await raw(c.url, 'GET', path);
    assert.equal(r.status, 400, path.slice(0, 12));
    assert.deepEqual(Object.keys(r.body), ['error']);
    assert.equal(r.body.error.code, 'bad_request');
  }
  for (const [method, path, code] of [
    ['GET', `/jobs/${'j'.repeat(200)}`, 'job_not_found'],
    ['POST', `/jobs/${'j'.repeat(150)}/stop`, 'job_not_found'],
    ['GET', `/sessions/${'s'.repeat(150)}`, 'session_not_found'],
    ['POST', `/sessions/${'s'.repeat(150)}/stop`, 'session_not_found'],
    ['DELETE', `/launchers/${'l'.repeat(150)}`, 'launcher_not_found'],
  ] as const) {
    const r = await raw(c.url, method, path);
    assert.equal(r.status, 404, `${method} ${path.slice(0, 20)}`);
    assert.equal(r.body.error.code, code);
  }
});

test('an output offset past 2^40 and a timeout past 30 days are refused, naming the field', async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'bounded');
  await l.take();
  await l.started(job.job_id);

  const offset = await raw(c.url, 'POST', `/launcher/jobs/${job.job_id}/output`, JSON.stringify({ launcher_id: l.id, offset: 1e300, data: 'x' }));
  assert.equal(offset.status, 400);
  assert.equal(offset.body.error.details.field, 'offset');
  const synced = await raw(
    c.url,
    'POST',
    '/launcher/sync',
    JSON.stringify({ launcher_id: l.id, capacity: 0, reports: [{ job_id: job.job_id, kind: 'output', offset: 2 ** 40 + 1, data: 'x' }] }),
  );
  assert.equal(synced.status, 400);
  // later batches are still taken: nothing was recorded at that offset
  await client.reportOutput(job.job_id, { launcher_id: l.id, offset: 0, data: 'hello' });
  const out = await client.getOutput(job.job_id);
  assert.equal(out.output, 'hello');
  assert.equal(out.total_bytes, 5);

  const timeout = await raw(c.url, 'POST', '/jobs', JSON.stringify({ type: 'start_session', session_name: 'forever', prompt: 'p', timeout_ms: 1e300 }));
  assert.equal(timeout.status, 400);
  assert.equal(timeout.body.error.details.field, 'timeout_ms');
  await rejectsWith(client.getSession('forever'), 404, 'session_not_found');
  const month = await raw(c.url, 'POST', '/jobs', JSON.stringify({ type: 'start_session', session_name: 'month', prompt: 'p', timeout_ms: 30 * 86_400_000 }));
  assert.equal(month.status, 201, '30 days is the bound itself');
  // in a querystring a number is read whole and in decimal: not 1e300 as 1, nor 12.5 as 12, nor
  // 0b1111 or the empty text as 0, nor 0x7d0 as 2000
  for (const q of ['timeout_ms=1e300', 'timeout_ms=12.5', 'timeout_ms=3600001', 'timeout_ms=0b1111', 'timeout_ms=0o17', 'timeout_ms=0x7d0', 'timeout_ms=']) {
    const wait = await raw(c.url, 'GET', `/jobs/${job.job_id}/wait?${q}`);
    assert.equal(wait.status, 400, q);
    assert.equal(wait.body.error.details.field, 'timeout_ms');
  }
  const l2 = await fakeLauncher(client, 'h2');
  const poll = await raw(c.url, 'GET', `/launcher/jobs?launcher_id=${l2.id}&capacity=0b1`);
  assert.equal(poll.status, 400, 'capacity=0b1 is not read as 0 (a poll that takes nothing)');
  assert.equal(poll.body.error.details.field, 'capacity');
  const tail = await raw(c.url, 'GET', `/jobs/${job.job_id}/output?offset=1e300`);
  assert.equal(tail.status, 400);
  assert.equal(tail.body.error.details.field, 'offset');
});

test("a batch ending past 2^40 is refused: every next_offset a reader is given is an offset it may ask for", async (t) => {
  const { c, client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'edge');
  await l.take();
  await l.started(job.job_id);
  const max = 2 ** 40;
  // the offset itself is within bounds, its last byte is not
  const past = await raw(c.url, 'POST', `/launcher/jobs/${job.job_id}/output`, JSON.stringify({ launcher_id: l.id, offset: max, data: 'xy' }));
  assert.equal(past.status, 400);
  assert.equal(past.body.error.details.field, 'data');
  const synced = await raw(
    c.url,
    'POST',
    '/launcher/sync',
    JSON.stringify({ launcher_id: l.id, capacity: 0, reports: [{ job_id: job.job_id, kind: 'output', offset: max - 1, data: 'é' }] }),
  );
  assert.equal(synced.status, 200);
  assert.equal(synced.body.results[0].ok, false);
  assert.equal(synced.body.results[0].error.details.field, 'data');
  assert.equal((await client.getJob(job.job_id)).output_bytes, 0, 'nothing was recorded');

  // up to the bound itself is taken, and its end can be read from
  await client.reportOutput(job.job_id, { launcher_id: l.id, offset: max - 2, data: 'é' });
  const out = await client.getOutput(job.job_id);
  assert.equal(out.next_offset, max);
  const next = await raw(c.url, 'GET', `/jobs/${job.job_id}/output?offset=${out.next_offset}`);
  assert.equal(next.status, 200);
  assert.equal(next.body.output, '');
});

test('every number a client or launcher can send has a lower and an upper bound (OpenAPI document)', async (t) => {
  const { c } = await startTest(t);
  const doc = (await raw(c.url, 'GET', '/openapi.json')).body;
  const unbounded: string[] = [];
  const components = doc.components.schemas as Record<string, unknown>;
  const seenRefs = new Set<string>();
  let numbers = 0;
  const walk = (schema: any, where: string): void => {
    if (!schema || typeof schema !== 'object') return;
    if (typeof schema.$ref === 'string') {
      const name = schema.$ref.replace('#/components/schemas/', '');
      if (seenRefs.has(`${where}>${name}`)) return;
      seenRefs.add(`${where}>${name}`);
      return walk(components[name], `${where}>${name}`);
    }
    if (schema.type === 'integer' || schema.type === 'number') {
      const low = schema.minimum !== undefined || schema.exclusiveMinimum !== undefined;
      const high = schema.maximum !== undefined || schema.exclusiveMaximum !== undefined;
      if (!low || !high) unbounded.push(where);
      numbers++;
    }
    for (const [k, v] of Object.entries(schema)) {
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${where}.${k}[${i}]`));
      else if (typeof v === 'object') walk(v, `${where}.${k}`);
    }
  };
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const p of op.parameters ?? []) {
        walk(p.schema, `${method.toUpperCase()} ${path} ${p.in} ${p.name}`);
      }
      for (const media of Object.values(op.requestBody?.content ?? {}) as { schema: unknown }[]) {
        walk(media.schema, `${method.toUpperCase()} ${path} body`);
      }
    }
  }
  assert.ok(numbers > 20, `the walk found the request numbers (${numbers})`);
  assert.deepEqual(unbounded, []);
});

test('a 1 MiB prompt of emoji sent \\u-escaped (3 MiB of JSON), or of control characters (6 MiB), is accepted', async (t) => {
  const { c, client } = await startTest(t);
  const emoji = '😀'.repeat(256 * 1024); // 4 bytes each: exactly MAX_PROMPT_BYTES
  assert.equal(Buffer.byteLength(emoji), 1024 * 1024);
  // every UTF-16 unit as \uXXXX: what a client that escapes everything sends
  const escaped = (s: string) => s.split('').map((u) => `\\u${u.charCodeAt(0).toString(16).padStart(4, '0')}`).join('');
  const body = (name: string, prompt: string) => `{"type":"start_session","session_name":"${name}","prompt":"${escaped(prompt)}"}`;
  const smiles = body('smiles', emoji);
  assert.ok(smiles.length > 3 * 1024 * 1024);
  const r = await raw(c.url, 'POST', '/jobs', smiles);
  assert.equal(r.status, 201, JSON.stringify(r.body.error));
  assert.equal((await client.getJob(r.body.job_id as string)).prompt, emoji);

  const controls = '\u0001'.repeat(1024 * 1024);
  const worst = body('controls', controls);
  assert.ok(worst.length > 6 * 1024 * 1024);
  assert.equal((await raw(c.url, 'POST', '/jobs', worst)).status, 201);

  // one byte more is a 400 naming the prompt, not a 413
  const over = await raw(c.url, 'POST', '/jobs', body('over', `${emoji}x`));
  assert.equal(over.status, 400);
  assert.equal(over.body.error.details.field, 'prompt');
});
