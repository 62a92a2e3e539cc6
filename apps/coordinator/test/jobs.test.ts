import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { rejectsWith, start, startTest } from './helpers.js';

const CONTRACT_FIELDS = [
  'job_id', 'type', 'session_name', 'agent_name', 'prompt', 'project_dir', 'parent_session_name', 'status',
  'launcher_id', 'error', 'created_at', 'claimed_at', 'started_at', 'completed_at',
];
const ISO_UTC = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

async function post(url: string, body: string, contentType = 'application/json') {
  const res = await request(`${url}/jobs`, { method: 'POST', body, headers: { 'content-type': contentType } });
  return { status: res.statusCode, body: (await res.body.json()) as { error: { code: string; message: string; details?: { field?: string } } } };
}

test('POST /jobs answers 201 with a pending job whose id is job_ + 12 hex', async (t) => {
  const { client } = await startTest(t);
  const job = await client.createJob({
    type: 'start_session',
    session_name: 'research',
    prompt: 'Research quantum computing',
    agent_name: 'researcher',
    project_dir: '/srv/project',
  });
  assert.match(job.job_id, /^job_[0-9a-f]{12}$/);
  assert.equal(job.status, 'pending');
  assert.equal(job.terminal, false);
  assert.equal(job.agent_name, 'researcher');
  assert.equal(job.project_dir, '/srv/project');
});

test('GET /jobs/{id} returns every field of the original data model, null where unset, UTC timestamps', async (t) => {
  const { client } = await startTest(t);
  const created = await start(client, 'fields');
  const job = await client.getJob(created.job_id);
  for (const field of CONTRACT_FIELDS) assert.ok(field in job, `missing ${field}`);
  assert.equal(job.agent_name, null);
  assert.equal(job.project_dir, null);
  assert.equal(job.parent_session_name, null);
  assert.equal(job.launcher_id, null);
  assert.equal(job.error, null);
  assert.equal(job.claimed_at, null);
  assert.equal(job.started_at, null);
  assert.equal(job.completed_at, null);
  assert.match(job.created_at, ISO_UTC);
  assert.equal(job.prompt, 'do fields');
});

test("an empty agent_name or project_dir is none, as the seed's dashboard sends them from empty form fields; a resume keeps the session's", async (t) => {
  const { client, c } = await startTest(t);
  const res = await post(c.url, JSON.stringify({ type: 'start_session', session_name: 'form', prompt: 'p', agent_name: '', project_dir: '' }));
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const job = res.body as unknown as { agent_name: string | null; project_dir: string | null };
  assert.equal(job.agent_name, null);
  assert.equal(job.project_dir, null);

  await client.createJob({ type: 'start_session', session_name: 'kept', prompt: 'p', agent_name: 'researcher', project_dir: '/srv/app' });
  const resumed = await client.createJob({ type: 'resume_session', session_name: 'kept', prompt: 'again', agent_name: '', project_dir: '' });
  assert.equal(resumed.agent_name, 'researcher');
  assert.equal(resumed.project_dir, '/srv/app');
});

test('GET /jobs/{id} of an unknown id is 404 job_not_found with the error body', async (t) => {
  const { client } = await startTest(t);
  const details = await rejectsWith(client.getJob('job_000000000000'), 404, 'job_not_found');
  assert.equal(details.job_id, 'job_000000000000');
  await rejectsWith(client.getJob('not-even-an-id'), 404, 'job_not_found');
});

test('POST /jobs rejects bad input with 400 naming the failing field', async (t) => {
  const { c } = await startTest(t);
  const cases: Array<[string, string]> = [
    ['{"session_name":"s","prompt":"p"}', 'type'],
    ['{"type":"delete_everything","session_name":"s","prompt":"p"}', 'type'],
    ['{"type":"start_session","prompt":"p"}', 'session_name'],
    ['{"type":"start_session","session_name":"","prompt":"p"}', 'session_name'],
    ['{"type":"start_session","session_name":"s"}', 'prompt'],
    ['{"type":"start_session","session_name":"s","prompt":""}', 'prompt'],
    ['{"type":"start_session","session_name":"s","prompt":42}', 'prompt'],
    ['{"type":"start_session","session_name":"s","prompt":"p","colour":"red"}', 'colour'],
    ['{"type":"start_session","session_name":"s","prompt":"p","timeout_ms":-5}', 'timeout_ms'],
  ];
  for (const [body, field] of cases) {
    const res = await post(c.url, body);
    assert.equal(res.status, 400, body);
    assert.equal(res.body.error.code, 'validation_failed', body);
    assert.equal(res.body.error.details?.field, field, body);
    assert.match(res.body.error.message, new RegExp(`^${field}`), body);
  }
});

test('POST /jobs rejects malformed JSON and non-JSON bodies with a coded error', async (t) => {
  const { c } = await startTest(t);
  const broken = await post(c.url, '{"type": ');
  assert.equal(broken.status, 400);
  assert.equal(broken.body.error.code, 'bad_request');
  const text = await post(c.url, 'hello', 'text/plain');
  assert.equal(text.status, 415);
  assert.equal(text.body.error.code, 'unsupported_media_type');
});

test('a session cannot be named . or .. (no URL can name it); other dots are fine', async (t) => {
  const { client } = await startTest(t);
  for (const name of ['.', '..']) {
    const details = await rejectsWith(start(client, name), 400, 'validation_failed');
    assert.equal(details.field, 'session_name', name);
  }
  for (const name of ['...', '.hidden', 'a..b']) {
    await start(client, name);
    assert.equal((await client.getSession(name)).session_name, name);
  }
});

test('a NUL character in a name the executor is given is refused 400 naming the field, in every store (no launcher could run it)', async (t) => {
  const { client } = await startTest(t);
  await start(client, 'parent');
  const cases = [
    { field: 'session_name', body: { session_name: 'a\u0000b' } },
    { field: 'parent_session_name', body: { session_name: 'child', parent_session_name: 'par\u0000ent' } },
    { field: 'agent_name', body: { session_name: 'agent', agent_name: 'x\u0000' } },
    { field: 'project_dir', body: { session_name: 'dir', project_dir: '/srv/\u0000' } },
  ];
  for (const { field, body } of cases) {
    const details = await rejectsWith(client.createJob({ type: 'start_session', prompt: 'p', ...body }), 400, 'validation_failed');
    assert.equal(details.field, field);
  }
  // nothing was created
  assert.deepEqual((await client.listJobs()).jobs.map((j) => j.session_name), ['parent']);
});

test('a prompt over the configured byte limit is rejected with 400 on prompt', async (t) => {
  const { client } = await startTest(t, { maxPromptBytes: 4096 });
  const ok = await start(client, 'fits', 'x'.repeat(4096));
  assert.equal(ok.status, 'pending');
  // 1,366 three-byte characters = 4,098 bytes: over the limit although under 4,096 characters
  const details = await rejectsWith(start(client, 'too-big', '€'.repeat(1366)), 400, 'validation_failed');
  assert.equal(details.field, 'prompt');
});

test('the default prompt limit is 1 MiB and the body limit lets such a prompt through', async (t) => {
  const { client } = await startTest(t);
  const big = 'a'.repeat(1024 * 1024);
  const job = await start(client, 'mib', big);
  assert.equal((await client.getJob(job.job_id)).prompt.length, big.length);
  await rejectsWith(start(client, 'mib-plus-one', big + 'a'), 400, 'validation_failed');
});

test('unknown routes answer 404 with the error body', async (t) => {
  const { c } = await startTest(t);
  const res = await request(`${c.url}/nope`);
  assert.equal(res.statusCode, 404);
  const body = (await res.body.json()) as { error: { code: string } };
  assert.equal(body.error.code, 'route_not_found');
});

test('GET /openapi.json describes the routes from the same schemas that validate', async (t) => {
  const { c } = await startTest(t);
  const res = await request(`${c.url}/openapi.json`);
  const doc = (await res.body.json()) as { paths: Record<string, Record<string, { requestBody?: unknown }>> };
  assert.ok(doc.paths['/jobs']?.post?.requestBody, 'POST /jobs has a request body schema');
  assert.ok(doc.paths['/jobs/{job_id}']?.get, 'GET /jobs/{job_id} is documented');
  assert.ok(doc.paths['/launcher/jobs']?.get, 'the long-poll is documented');
});
