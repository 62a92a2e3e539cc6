import assert from 'node:assert/strict';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ErrorCodes } from '@agentq/protocol';
import { Client } from 'undici';
import { startTest, tempDir } from './helpers.js';

function builtDashboard(t: import('node:test').TestContext): string {
  const dir = tempDir(t, 'agentq-dashboard-');
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>agentq</title><script src="/assets/app-ABC.js"></script>');
  mkdirSync(join(dir, 'assets'));
  writeFileSync(join(dir, 'assets', 'app-ABC.js'), 'console.log(1)');
  return dir;
}

test('GET / serves the built dashboard page with a strict content security policy', async (t) => {
  const { c } = await startTest(t, {}, { dashboardDir: builtDashboard(t) });
  const res = await fetch(`${c.url}/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  assert.equal(res.headers.get('cache-control'), 'no-cache');
  assert.match(res.headers.get('content-security-policy') ?? '', /default-src 'self'/);
  assert.match(await res.text(), /<title>agentq<\/title>/);
});

test('the dashboard assets are served with long-lived caching (their names carry a hash)', async (t) => {
  const { c } = await startTest(t, {}, { dashboardDir: builtDashboard(t) });
  const res = await fetch(`${c.url}/assets/app-ABC.js`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /javascript/);
  assert.match(res.headers.get('cache-control') ?? '', /immutable/);
  assert.equal(await res.text(), 'console.log(1)');
});

test('paths that are neither a dashboard file nor an API route still answer the JSON 404', async (t) => {
  const { c } = await startTest(t, {}, { dashboardDir: builtDashboard(t) });
  for (const path of [
    '/nope',
    '/assets/missing.js',
    '/index.html/..%2f..%2fpackage.json',
    '/assets/..%2findex.html',
    '/assets/%2e%2e/%2e%2e/package.json',
    '/assets/',
  ]) {
    const res = await fetch(`${c.url}${path}`);
    assert.equal(res.status, 404, path);
    const body = (await res.json()) as { error: { code: string } };
    assert.equal(body.error.code, 'route_not_found', path);
  }
});

test('a rebuild while the coordinator runs is served at once: the new page and its new assets, not a 404 until a restart', async (t) => {
  const dir = builtDashboard(t);
  const { c } = await startTest(t, {}, { dashboardDir: dir });
  assert.equal((await fetch(`${c.url}/assets/app-ABC.js`)).status, 200);

  // what `npm run build` does: new hashed names, and an index.html that names them
  rmSync(join(dir, 'assets', 'app-ABC.js'));
  writeFileSync(join(dir, 'assets', 'app-DEF.js'), 'console.log(2)');
  writeFileSync(join(dir, 'index.html.tmp'), '<!doctype html><title>agentq</title><script src="/assets/app-DEF.js"></script>');
  renameSync(join(dir, 'index.html.tmp'), join(dir, 'index.html'));

  for (const path of ['/', '/index.html']) {
    const page = await fetch(`${c.url}${path}`);
    assert.equal(page.status, 200, path);
    assert.equal(page.headers.get('cache-control'), 'no-cache', path);
    assert.match(await page.text(), /app-DEF\.js/, path);
  }
  const asset = await fetch(`${c.url}/assets/app-DEF.js`);
  assert.equal(asset.status, 200);
  assert.match(asset.headers.get('cache-control') ?? '', /immutable/);
  assert.equal(await asset.text(), 'console.log(2)');
  const gone = await fetch(`${c.url}/assets/app-ABC.js`);
  assert.equal(gone.status, 404);
  assert.equal(((await gone.json()) as { error: { code: string } }).error.code, 'route_not_found');
});

test('without a dashboard build, GET / answers 503 dashboard_not_built telling to run npm run build (no restart needed)', async (t) => {
  const dir = tempDir(t, 'agentq-no-dashboard-');
  const { c, client } = await startTest(t, {}, { dashboardDir: dir });
  const res = await fetch(`${c.url}/`);
  assert.equal(res.status, 503);
  const body = (await res.json()) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'dashboard_not_built');
  assert.match(body.error.message, /npm run build/);
  assert.doesNotMatch(body.error.message, /restart/);
  // the API itself is unaffected
  assert.equal((await client.health()).status, 'ok');
});

test('a coordinator started before the first dashboard build serves the build once it is written, without a restart', async (t) => {
  // the folder does not even exist yet, as apps/dashboard/dist/public before the first build
  const parent = tempDir(t, 'agentq-later-dashboard-');
  const dir = join(parent, 'public');
  const { c } = await startTest(t, {}, { dashboardDir: dir });
  for (const path of ['/', '/index.html']) {
    const res = await fetch(`${c.url}${path}`);
    assert.equal(res.status, 503, path);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, 'dashboard_not_built', path);
  }
  const missing = await fetch(`${c.url}/assets/app-ABC.js`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { error: { code: string } }).error.code, 'route_not_found');

  mkdirSync(join(dir, 'assets'), { recursive: true });
  writeFileSync(join(dir, 'assets', 'app-ABC.js'), 'console.log(1)');
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>agentq</title><script src="/assets/app-ABC.js"></script>');

  for (const path of ['/', '/index.html']) {
    const page = await fetch(`${c.url}${path}`);
    assert.equal(page.status, 200, path);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'self'/, path);
    assert.match(await page.text(), /app-ABC\.js/, path);
  }
  const asset = await fetch(`${c.url}/assets/app-ABC.js`);
  assert.equal(asset.status, 200);
  assert.equal(await asset.text(), 'console.log(1)');
});

test("file errors (a Range past the end, a failed If-Match, a path with .. or a NUL) answer the registry's code for their status", async (t) => {
  const { c } = await startTest(t, {}, { dashboardDir: builtDashboard(t) });
  const http = new Client(c.url);
  t.after(() => http.close());
  const ask = async (path: string, headers: Record<string, string> = {}) => {
    // an undici Client sends the path as given (fetch would resolve `%2e%2e` away)
    const res = await http.request({ method: 'GET', path, headers });
    const body = (await res.body.json()) as { error: { code: string; details?: Record<string, unknown> } };
    return { status: res.statusCode, headers: res.headers, error: body.error };
  };
  // the dashboard's files and the docs UI's, served by the same plugin
  for (const file of ['/assets/app-ABC.js', '/docs/static/index.css']) {
    const range = await ask(file, { range: 'bytes=999999-' });
    assert.equal(range.status, 416, file);
    assert.equal(range.error.code, 'range_not_satisfiable', file);
    assert.deepEqual(range.error.details, { field: 'range', in: 'headers' }, file);
    assert.match(String(range.headers['content-range']), /^bytes \*\/\d+$/, `${file}: the size of the file`);
    const match = await ask(file, { 'if-match': '"not-this-one"' });
    assert.equal(match.status, 412, file);
    assert.equal(match.error.code, 'precondition_failed', file);
  }
  const up = await ask('/docs/static/%2e%2e/%2e%2e/package.json');
  assert.equal(up.status, 404);
  assert.equal(up.error.code, 'route_not_found');
  const nul = await ask('/docs/static/%00');
  assert.equal(nul.status, 400);
  assert.equal(nul.error.code, 'bad_request');
  assert.deepEqual(nul.error.details, { field: 'url', in: 'url' });
  // and every status is the one the registry gives the code
  for (const e of [up, nul]) assert.equal(ErrorCodes[e.error.code as keyof typeof ErrorCodes], e.status);
});

test('the dashboard page and its assets are served while the overload protection refuses the API: a refused page stayed a JSON error, nothing reloaded it', async (t) => {
  const { c } = await startTest(t, { overloadMaxHeapBytes: 1, overloadSampleIntervalMs: 10, overloadRetryAfterSeconds: 7 }, { dashboardDir: builtDashboard(t) });
  // the first samples after start are not acted on: ask until the coordinator refuses (a bounded
  // number of tries, each one round trip)
  let refused = false;
  for (let i = 0; i < 500 && !refused; i++) {
    const res = await fetch(`${c.url}/ready`);
    await res.arrayBuffer();
    refused = res.status === 503;
    if (!refused) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.ok(refused, 'the coordinator never reported overload');
  const api = await fetch(`${c.url}/jobs`);
  assert.equal(api.status, 503, 'the API is refused');
  assert.equal(((await api.json()) as { error: { code: string } }).error.code, 'overloaded');
  const page = await fetch(`${c.url}/`);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<title>agentq<\/title>/);
  const asset = await fetch(`${c.url}/assets/app-ABC.js`);
  assert.equal(asset.status, 200);
  assert.equal(await asset.text(), 'console.log(1)');
});
