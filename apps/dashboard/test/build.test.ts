import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startServer } from './harness.js';
import type * as Publish from '../publish.mjs';

// build.mjs and publish.mjs sit beside dist/, not in it: found from here at run time
const root = new URL('../../', import.meta.url);
const { publish, MANIFEST } = (await import(new URL('publish.mjs', root).href)) as typeof Publish;

/** A folder for a dashboard build (not made: publish makes it) and a coordinator serving it. */
async function servedFolder(t: TestContext): Promise<{ dir: string; url: string }> {
  const parent = mkdtempSync(join(tmpdir(), 'agentq-dashboard-build-'));
  const dir = join(parent, 'public');
  const server = await startServer({ deps: { dashboardDir: dir } });
  t.after(async () => {
    await server.close();
    rmSync(parent, { recursive: true, force: true });
  });
  return { dir, url: server.url };
}

/** A small build whose every file says which build it is of. */
function fakeBuild(tag: string) {
  const js = `app-${tag}.js`;
  const css = `app-${tag}.css`;
  return {
    indexHtml: `<!doctype html><title>agentq ${tag}</title><link rel="stylesheet" href="/assets/${css}" /><script type="module" src="/assets/${js}"></script>`,
    assets: new Map<string, string>([
      [js, `console.log('${tag}')`],
      [`${js}.map`, `{"build":"${tag}"}`],
      [css, `body { --build: ${tag}; }`],
    ]),
  };
}

/** GET / and every asset the page names, as a browser loading it: all must be there. Returns the page. */
async function load(url: string): Promise<string> {
  const page = await fetch(`${url}/`);
  assert.equal(page.status, 200, 'GET /');
  const html = await page.text();
  const names = [...html.matchAll(/"\/assets\/([^"]+)"/g)].map((m) => m[1]!);
  assert.equal(names.length, 2, `the page names its script and its stylesheet: ${html}`);
  for (const name of names) {
    const asset = await fetch(`${url}/assets/${name}`);
    assert.equal(asset.status, 200, `/assets/${name} named by ${html}`);
    await asset.arrayBuffer();
  }
  return html;
}

/** Which fake build a complete load of the dashboard got. */
async function loadedBuild(url: string): Promise<string> {
  const html = await load(url);
  const tag = /<title>agentq (\w+)<\/title>/.exec(html)?.[1];
  assert.ok(tag, html);
  const script = await fetch(`${url}/assets/app-${tag}.js`);
  assert.equal(await script.text(), `console.log('${tag}')`, 'the page and its script are of one build');
  return tag;
}

test('a rebuild while the coordinator serves the folder: at every step a reader loads a complete dashboard, the old build or the new one', async (t) => {
  const { dir, url } = await servedFolder(t);
  await publish(dir, fakeBuild('OLD'));
  assert.equal(await loadedBuild(url), 'OLD');

  const seen: string[] = [];
  await publish(dir, fakeBuild('NEW'), { onStep: async (step) => void seen.push(`${step} -> ${await loadedBuild(url)}`) });
  assert.deepEqual(seen, [
    'assets/app-NEW.js -> OLD',
    'assets/app-NEW.js.map -> OLD',
    'assets/app-NEW.css -> OLD',
    'index.html -> NEW',
    `${MANIFEST} -> NEW`,
  ]);
  // a page loaded just before the swap still gets the files it names
  assert.equal(await (await fetch(`${url}/assets/app-OLD.js`)).text(), "console.log('OLD')");

  // the next build removes the assets of the one before the last, after its page is replaced
  seen.length = 0;
  await publish(dir, fakeBuild('NEWER'), { onStep: async (step) => void seen.push(`${step} -> ${await loadedBuild(url)}`) });
  assert.deepEqual(seen, [
    'assets/app-NEWER.js -> NEW',
    'assets/app-NEWER.js.map -> NEW',
    'assets/app-NEWER.css -> NEW',
    'index.html -> NEWER',
    `${MANIFEST} -> NEWER`,
    'removed assets/app-OLD.css -> NEWER',
    'removed assets/app-OLD.js -> NEWER',
    'removed assets/app-OLD.js.map -> NEWER',
  ]);
  assert.equal((await fetch(`${url}/assets/app-OLD.js`)).status, 404);
  assert.equal((await fetch(`${url}/assets/app-NEW.js`)).status, 200);
});

test('a build stopped after its page was put in place, before build.json: the next build still keeps the files of that page', async (t) => {
  const { dir, url } = await servedFolder(t);
  await publish(dir, fakeBuild('OLD'));
  // killed right after the rename of index.html: the page is NEW's, build.json still OLD's
  const killed = new Error('killed');
  await assert.rejects(
    publish(dir, fakeBuild('NEW'), {
      onStep: (step) => {
        if (step === 'index.html') throw killed;
      },
    }),
    killed,
  );
  assert.equal(await loadedBuild(url), 'NEW');
  assert.deepEqual((JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as { assets: string[] }).assets, [...fakeBuild('OLD').assets.keys()]);

  await publish(dir, fakeBuild('NEWER'));
  assert.equal(await loadedBuild(url), 'NEWER');
  // a page of NEW loaded just before the swap still gets the files it names
  for (const name of fakeBuild('NEW').assets.keys()) assert.equal((await fetch(`${url}/assets/${name}`)).status, 200, name);
  // and the build after that removes them, as it would have without the stop
  await publish(dir, fakeBuild('NEWEST'));
  for (const tag of ['OLD', 'NEW']) assert.equal((await fetch(`${url}/assets/app-${tag}.js`)).status, 404, tag);
  assert.equal((await fetch(`${url}/assets/app-NEWER.js`)).status, 200);
});

test('a build.json spoilt by hand does not fail the build: every asset there is kept one more build, as with none', async (t) => {
  const { dir, url } = await servedFolder(t);
  await publish(dir, fakeBuild('OLD'));
  writeFileSync(join(dir, MANIFEST), '{"assets": [');
  await publish(dir, fakeBuild('NEW'));
  assert.equal(await loadedBuild(url), 'NEW');
  assert.equal((await fetch(`${url}/assets/app-OLD.js`)).status, 200, "the previous build's files stay one more build");
});

test('build.mjs writes into the folder a coordinator serves without removing it first: the previous build stays until the new one is in place', async (t) => {
  const { dir, url } = await servedFolder(t);
  await publish(dir, fakeBuild('OLD'));

  const { stdout } = await promisify(execFile)(process.execPath, [fileURLToPath(new URL('build.mjs', root)), '--no-check', '--out', dir]);
  assert.match(stdout, /dashboard: .*app-\w+\.js/);

  const html = await load(url);
  assert.match(html, /<title>agentq<\/title>/, 'the page of the real build');
  const manifest = JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as { assets: string[] };
  for (const name of [...html.matchAll(/"\/assets\/([^"]+)"/g)].map((m) => m[1]!)) assert.ok(manifest.assets.includes(name), name);
  // had the build emptied the folder first, these would be gone, and / a 503 while it bundled
  assert.equal((await fetch(`${url}/assets/app-OLD.js`)).status, 200);
  assert.equal((await fetch(`${url}/assets/app-OLD.css`)).status, 200);
});
