import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Pool } from 'undici';
import { ErrorCodes } from '@agentq/protocol';
import { credentialedLauncher, startAuthTest } from './auth-helpers.js';
import { fuzzValue, junkJson, junkString, type JsonSchema } from './fuzz-arbitraries.js';

/**
 * Property: whatever arrives (any route, method, path, query, body, content type, token), the
 * coordinator answers below 500, and every error is `{ error: { code, message, details? } }`
 * with a code from the registry and that code's status. Requests are generated from the
 * OpenAPI document, so every endpoint with a schema is fuzzed on its body, query and path.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 3000);

interface OpenApiOperation {
  parameters?: Array<{ name: string; in: 'path' | 'query'; schema: JsonSchema }>;
  requestBody?: { content: { 'application/json': { schema: JsonSchema } } };
}

interface Endpoint {
  method: string;
  /** Fastify path, e.g. /jobs/:job_id */
  url: string;
  query: Record<string, JsonSchema>;
  body: JsonSchema | undefined;
}

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/**
 * Long-polls and waits hold as long as asked (30 s when not asked): the fuzzer asks for at most
 * 20 ms wherever the schema has such a field.
 */
const HOLD_KEYS = ['timeout_ms', 'wait_ms'];
function shortHolds(value: unknown, schema: JsonSchema | undefined): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const copy = { ...(value as Record<string, unknown>) };
  for (const k of HOLD_KEYS) {
    if (!schema?.properties?.[k]) continue;
    const v = copy[k];
    const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
    if (!(k in copy) || (Number.isFinite(n) && n > 20)) copy[k] = Number.isFinite(n) ? Math.abs(n) % 20 : 5;
  }
  return copy;
}

function queryString(query: unknown, raw: string, holds: boolean): string {
  let qs = raw;
  if (!raw && typeof query === 'object' && query !== null && !Array.isArray(query)) {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query as Record<string, unknown>)) {
      for (const one of Array.isArray(v) ? v : [v]) params.append(k, typeof one === 'string' ? one : String(JSON.stringify(one)));
    }
    qs = params.toString();
  }
  // a wait without timeout_ms holds 30 s
  if (holds && !/(^|&)timeout_ms=/.test(qs)) qs = qs ? `${qs}&timeout_ms=3` : 'timeout_ms=3';
  return qs;
}

test(`fuzz: ${RUNS} generated requests over every endpoint; none is answered 5xx, every error has the standard shape`, async (t) => {
  const a = await startAuthTest(t, { pollTimeoutSeconds: 0.02 });
  // some state for ids to hit: jobs (pending, claimed, running, done), sessions, launchers
  const launcher = await credentialedLauncher(a);
  const ids = { job: [] as string[], session: [] as string[], launcher: [launcher.id, 'lnch_000000000000'] };
  for (let i = 0; i < 6; i++) {
    const job = await a.as.client.createJob({ type: 'start_session', session_name: `fz${i}`, prompt: `p${i}` });
    ids.job.push(job.job_id);
    ids.session.push(job.session_name);
  }
  await launcher.claim(ids.job[0]!);
  await launcher.claim(ids.job[1]!);
  await launcher.client.reportStarted(ids.job[1]!, { launcher_id: launcher.id });

  const doc = (await (await fetch(`${a.c.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, OpenApiOperation>> };
  const endpoints: Endpoint[] = a.c.app.auth.routes
    .filter((r) => r.method !== 'HEAD')
    .map((r) => {
      const op = doc.paths[r.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[r.method.toLowerCase()];
      const query = Object.fromEntries((op?.parameters ?? []).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
      return { method: r.method, url: r.url, query, body: op?.requestBody?.content['application/json'].schema };
    });
  assert.ok(endpoints.length >= 20, `endpoints: ${endpoints.length}`);

  // lone surrogates cannot be percent-encoded: they go as U+FFFD
  const enc = (s: string) => encodeURIComponent((s as string & { toWellFormed(): string }).toWellFormed());
  const paramValue = (name: string) => {
    const known = name === 'job_id' ? ids.job : name === 'session_name' ? ids.session : ids.launcher;
    return fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...known).map(enc) },
      { weight: 2, arbitrary: junkString().map(enc) },
      // raw text where the router must cope with it (bad percent-encoding, dots, slashes)
      { weight: 1, arbitrary: fc.constantFrom('%zz', '%', '%E0%A4%A', '..', '%2F..%2F', 'a%00b') },
    );
  };
  const tokens = fc.oneof(
    { weight: 8, arbitrary: fc.constant(a.secrets.admin) },
    { weight: 1, arbitrary: fc.constantFrom(a.secrets.client, a.secrets.reader, a.secrets.launcher, launcher.token) },
    { weight: 1, arbitrary: fc.oneof(fc.constant(undefined), junkString().map((s) => s.replace(/[^\x21-\x7e]/g, 'x'))) },
  );
  const contentTypes = fc.oneof(
    { weight: 8, arbitrary: fc.constant('application/json') },
    {
      weight: 2,
      arbitrary: fc.constantFrom(undefined, 'text/plain', 'application/json; charset=utf-8', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/json; charset=latin1'),
    },
  );

  const request: fc.Arbitrary<FuzzRequest> = fc.constantFrom(...endpoints).chain((ep) => {
    const params = [...ep.url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!);
    return fc
      .record({
        method: fc.oneof({ weight: 9, arbitrary: fc.constant(ep.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH') }),
        params: fc.tuple(...params.map(paramValue)),
        query: fuzzValue({ type: 'object', properties: ep.query }),
        rawQuery: fc.oneof({ weight: 9, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom('limit=1&limit=2', 'a=%zz', '=', '&&', 'status[]=x', 'timeout_ms=1&timeout_ms=x') }),
        body: fuzzValue(ep.body),
        rawBody: fc.oneof(
          { weight: 12, arbitrary: fc.constant(undefined) },
          { weight: 1, arbitrary: fc.constantFrom('', '{', '{"a":', 'null', '[]', '"x"', '\u0000', '{"__proto__":{"x":1}}') },
          { weight: 1, arbitrary: junkJson().map((v) => JSON.stringify(v)) },
        ),
        noBody: fc.boolean(),
        contentType: contentTypes,
        token: tokens,
      })
      .map((r): FuzzRequest => {
        let path = ep.url;
        params.forEach((name, i) => (path = path.replace(`:${name}`, r.params[i]!)));
        path = path.replace('*', 'x');
        const qs = queryString(shortHolds(r.query, { properties: ep.query }), r.rawQuery, 'timeout_ms' in ep.query);
        const hasBody = r.method !== 'GET' && !(r.noBody && ep.body === undefined);
        const body = hasBody ? (r.rawBody ?? JSON.stringify(shortHolds(r.body, ep.body) ?? null)) : undefined;
        const headers: Record<string, string> = {};
        if (r.token !== undefined) headers.authorization = `Bearer ${r.token}`;
        if (body !== undefined && r.contentType !== undefined) headers['content-type'] = r.contentType;
        return { method: r.method, path: qs ? `${path}?${qs}` : path, headers, body };
      });
  });

  const pool = new Pool(a.c.url, { connections: 4 });
  t.after(() => pool.close());
  const seen = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(request, async (req) => {
      const res = await pool.request({
        method: req.method as 'GET',
        path: req.path,
        headers: req.headers,
        ...(req.body !== undefined ? { body: req.body } : {}),
        // a long-poll is held at most pollTimeoutSeconds; a wait at most 20 ms
        headersTimeout: 10_000,
      });
      seen.set(res.statusCode, (seen.get(res.statusCode) ?? 0) + 1);
      const isStream = String(res.headers['content-type']).startsWith('text/event-stream');
      const text = isStream ? (res.body.destroy(), '') : await res.body.text();
      const where = `${req.method} ${req.path.slice(0, 200)} ${req.body?.slice(0, 200) ?? ''} -> ${res.statusCode} ${text.slice(0, 300)}`;
      assert.ok(res.statusCode < 500, where);
      if (res.statusCode < 400) return;
      const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
      assert.deepEqual(Object.keys(parsed), ['error'], where);
      const e = parsed.error!;
      assert.ok(Object.keys(e).every((k) => ['code', 'message', 'details'].includes(k)), where);
      assert.equal(typeof e.message, 'string', where);
      assert.ok(typeof e.code === 'string' && e.code in ErrorCodes, where);
      assert.equal(ErrorCodes[e.code as keyof typeof ErrorCodes], res.statusCode, where);
      if (e.details !== undefined) assert.ok(typeof e.details === 'object' && e.details !== null && !Array.isArray(e.details), where);
    }),
    { numRuns: RUNS },
  );
  // the fuzzer reached past the front door: successes and several kinds of refusal
  assert.ok([...seen.keys()].some((s) => s < 300), JSON.stringify([...seen]));
  for (const status of [400, 401, 403, 404]) assert.ok(seen.has(status), `no ${status} in ${JSON.stringify([...seen])}`);
  // and the coordinator still works
  assert.equal((await a.anonymous.health()).status, 'ok');
});
