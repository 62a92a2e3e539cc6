import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { request } from 'undici';
import { credentialedLauncher, startAuthTest } from './auth-helpers.js';
import { startTest } from './helpers.js';

interface Operation {
  operationId?: string;
  tags?: string[];
  summary?: string;
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }>;
}
interface Document {
  openapi: string;
  tags: Array<{ name: string }>;
  security: unknown[];
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, unknown>; securitySchemes: Record<string, Record<string, unknown>> };
}

async function openapi(url: string): Promise<Document> {
  const res = await request(`${url}/openapi.json`);
  assert.equal(res.statusCode, 200);
  return (await res.body.json()) as Document;
}

const operations = (doc: Document) =>
  Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, op]) => ({ path, method, op })));

test('GET /openapi.json passes the Redocly linter (recommended rules) with no errors', async (t) => {
  const { c } = await startTest(t);
  const doc = await openapi(c.url);
  assert.equal(doc.openapi, '3.1.0');
  const config = await createConfig({ extends: ['recommended'] });
  const problems = await lintFromString({ source: JSON.stringify(doc), absoluteRef: '/openapi.json', config });
  const describe = (p: (typeof problems)[number]) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`;
  const errors = problems.filter((p) => p.severity === 'error');
  assert.deepEqual(errors.map(describe), []);
  // warnings are allowed (e.g. GET /health has no 4XX answer); show them
  for (const w of problems.filter((p) => p.severity === 'warn')) t.diagnostic(`lint warning: ${describe(w)}`);
});

test('every route has an operationId (unique), a summary and tags that the document declares', async (t) => {
  const { c } = await startTest(t);
  const doc = await openapi(c.url);
  const declared = new Set(doc.tags.map((x) => x.name));
  const ids = new Set<string>();
  const ops = operations(doc);
  assert.ok(ops.length >= 20, `all routes are documented (${ops.length})`);
  for (const { path, method, op } of ops) {
    const where = `${method.toUpperCase()} ${path}`;
    assert.ok(op.operationId, `${where} has an operationId`);
    assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} is unique`);
    ids.add(op.operationId);
    assert.ok(op.summary, `${where} has a summary`);
    assert.ok(op.tags?.length, `${where} has tags`);
    for (const tag of op.tags) assert.ok(declared.has(tag), `${where}: tag ${tag} is declared`);
  }
  assert.equal(doc.paths['/openapi.json'], undefined, 'the document does not describe itself');
  assert.equal(doc.paths['/docs'], undefined, 'nor the docs UI');
});

test('protocol schemas appear once, under components, and the routes refer to them', async (t) => {
  const { c } = await startTest(t);
  const doc = await openapi(c.url);
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  for (const name of ['Job', 'Session', 'Launcher', 'ErrorBody', 'CreateJobRequest', 'JobStatus', 'LifecycleEvent']) {
    assert.ok(doc.components.schemas[name], `${name} is a component`);
  }
  const json = (o: Operation, code: string) => o.responses[code]?.content?.['application/json']?.schema;
  assert.deepEqual(json(doc.paths['/jobs/{job_id}']!.get!, '200'), ref('Job'));
  assert.deepEqual(json(doc.paths['/jobs/{job_id}']!.get!, '404'), ref('ErrorBody'));
  // the Job schema's field list is written once in the whole document
  const text = JSON.stringify(doc);
  const jobFields = JSON.stringify((doc.components.schemas.Job as { required: string[] }).required);
  assert.equal(text.split(jobFields).length - 1, 1, 'one copy of the Job schema');
  // components refer to each other too
  assert.match(JSON.stringify(doc.components.schemas.Job), /#\/components\/schemas\/JobStatus/);
});

test('the bearer security scheme applies to every route but GET /health; /events is text/event-stream', async (t) => {
  const { c } = await startTest(t);
  const doc = await openapi(c.url);
  assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
    type: 'http',
    scheme: 'bearer',
    description: doc.components.securitySchemes.bearerAuth?.description,
  });
  assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
  assert.deepEqual(doc.paths['/health']!.get!.security, [], '/health is public');
  const events = doc.paths['/events']!.get!;
  assert.equal(events.operationId, 'streamEvents');
  const stream = events.responses['200']?.content?.['text/event-stream']?.schema;
  assert.ok(stream, '/events answers text/event-stream');
  assert.match(JSON.stringify(stream), /#\/components\/schemas\/LifecycleEvent/);
  assert.ok(doc.paths['/metrics']!.get!.responses['200']?.content?.['text/plain'], '/metrics answers text/plain');
});

test('GET /docs serves Swagger UI from the package, with no script or style from another host', async (t) => {
  const { c } = await startTest(t);
  const page = await request(`${c.url}/docs/`);
  assert.equal(page.statusCode, 200);
  assert.match(String(page.headers['content-type']), /text\/html/);
  const html = await page.body.text();
  assert.match(html, /swagger-ui/i);
  const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  assert.ok(assets.length > 0);
  for (const asset of assets) assert.doesNotMatch(asset, /^(https?:)?\/\//, `${asset} is served locally`);
  const bundle = await request(new URL('./static/swagger-ui-bundle.js', `${c.url}/docs/`));
  assert.equal(bundle.statusCode, 200);
  await bundle.body.dump();
  // the UI reads the same document as GET /openapi.json
  const ui = await request(`${c.url}/docs/json`);
  assert.deepEqual(await ui.body.json(), await openapi(c.url));
});

test('every error a route answers is declared for it in the document (auth, body parsing, overload, budget)', async (t) => {
  // 1 MiB request bodies (the floor of the body limit), no event streams: every refusal is cheap to provoke
  const a = await startAuthTest(t, { maxPromptBytes: 4096, outputMaxBytes: 1024, maxSseClients: 0, pollTimeoutSeconds: 0.05 });
  const doc = await openapi(a.c.url);
  const send = async (method: string, path: string, o: { token?: string; type?: string; body?: string; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    if (o.token) headers.authorization = `Bearer ${o.token}`;
    if (o.type) headers['content-type'] = o.type;
    const res = await request(`${a.c.url}${path}`, { method: method as 'GET', headers, ...(o.body === undefined ? {} : { body: o.body }) });
    return { status: res.statusCode, body: (await res.body.json()) as { error?: { code: string } } };
  };
  const declared = (method: string, path: string, status: number) =>
    (doc.paths[path]?.[method.toLowerCase()]?.responses[String(status)]?.content?.['application/json']?.schema as { $ref?: string } | undefined)?.$ref;

  // a child session of a tree that has spent its budget, for the 422 of a message
  const launcher = await credentialedLauncher(a);
  const admin = a.as.admin;
  const root = await admin.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan', budget_usd: 1 });
  await launcher.claim(root.job_id);
  const child = await admin.createJob({ type: 'start_session', session_name: 'kid', prompt: 'work', parent_session_name: 'lead' });
  await launcher.claim(child.job_id);
  await launcher.client.reportCompleted(child.job_id, { launcher_id: launcher.id, status: 'success', cost_usd: 5 });

  // a registration_key of an online launcher sent with other fields, for the 409 of a registration
  const registered = { hostname: 'box', executor_type: 'test', registration_key: 'openapi-409-key-0001' };
  await a.as.launcher.register(registered);

  const json = 'application/json';
  const cases: Array<[string, string, string, number, Parameters<typeof send>[2]]> = [
    ['GET', '/jobs/job_000000000000', '/jobs/{job_id}', 401, {}],
    ['GET', '/jobs', '/jobs', 401, {}],
    ['POST', '/jobs/wait', '/jobs/wait', 401, { type: json, body: '{"job_ids":["x"]}' }],
    ['POST', `/jobs/${root.job_id}/stop`, '/jobs/{job_id}/stop', 403, { token: a.secrets.reader }],
    ['GET', '/launchers', '/launchers', 403, { token: a.secrets.launcher }],
    ['GET', `/jobs/${root.job_id}?x=%zz`, '/jobs/{job_id}', 400, { token: a.secrets.reader }],
    ['POST', '/jobs', '/jobs', 415, { token: a.secrets.client, type: 'text/plain', body: 'hello' }],
    ['POST', `/jobs/${root.job_id}/stop`, '/jobs/{job_id}/stop', 415, { token: a.secrets.client, type: 'text/plain', body: 'x' }],
    ['POST', '/jobs', '/jobs', 413, { token: a.secrets.client, type: json, body: `{"prompt":"${'a'.repeat(2 * 1024 * 1024)}"}` }],
    ['GET', '/events', '/events', 503, { token: a.secrets.reader }],
    ['POST', '/launcher/register', '/launcher/register', 409, { token: a.secrets.launcher, type: json, body: JSON.stringify({ ...registered, max_jobs: 2 }) }],
    ['POST', '/sessions/kid/messages', '/sessions/{session_name}/messages', 422, { token: a.secrets.client, type: json, body: '{"text":"more"}' }],
  ];
  for (const [method, url, path, status, o] of cases) {
    const answer = await send(method, url, o);
    assert.equal(answer.status, status, `${method} ${url}: ${JSON.stringify(answer.body)}`);
    assert.ok(answer.body.error?.code, `${method} ${url} answers the error shape`);
    assert.equal(declared(method, path, status), '#/components/schemas/ErrorBody', `${method} ${path} declares ${status}`);
  }

  // and the same for every operation: what the hooks every route shares can answer
  for (const { path, method, op } of operations(doc)) {
    const where = `${method.toUpperCase()} ${path}`;
    const codes = Object.keys(op.responses);
    assert.ok(codes.includes('400'), `${where} declares 400 (a broken URL, a bad parameter)`);
    if (path !== '/health') assert.ok(codes.includes('503'), `${where} declares 503 (overloaded, shutting down)`);
    if (op.security === undefined || op.security.length > 0) {
      assert.ok(codes.includes('401') && codes.includes('403'), `${where} declares 401 and 403 (it needs a token)`);
    }
    if (method !== 'get') assert.ok(codes.includes('413') && codes.includes('415'), `${where} declares 413 and 415 (it reads a body)`);
  }
});
