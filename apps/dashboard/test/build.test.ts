import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcessByStdio } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startServer } from './harness.js';
import type * as Publish from '../publish.mjs';

// build.mjs and publish.mjs sit beside dist/, not in it: found from here at run time
const root = new URL('../../', import.meta.url);
const { publish, MANIFEST, LOCK } = (await import(new URL('publish.mjs', root).href)) as typeof Publish;

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

/** A build.mjs process (no type check) into `dir`, `preload` imported first; killed if the test leaves it running. */
function startBuild(t: TestContext, dir: string, preload?: string) {
  const args = [...(preload ? ['--import', preload] : []), fileURLToPath(new URL('build.mjs', root)), '--no-check', '--out', dir];
  const child: ChildProcessByStdio<Writable, Readable, Readable> = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const output = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (d: string) => (output.stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output.stderr += d));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  /** Resolves when `stream` has said something matching `pattern` (true) or the process has ended (false). */
  const says = (stream: 'stdout' | 'stderr', pattern: RegExp) =>
    new Promise<boolean>((resolve) => {
      const look = () => {
        if (pattern.test(output[stream])) resolve(true);
      };
      child[stream].on('data', look);
      look();
      void exited.then(() => resolve(pattern.test(output[stream])));
    });
  return { child, output, exited, says };
}

test('two build.mjs publishing into one folder at once: the second waits for the first, and the folder holds one complete build, no temporary file and no lock', async (t) => {
  const { dir, url } = await servedFolder(t);
  // the first is held in the middle of its publish: its first asset written under its temporary name
  const first = startBuild(t, dir, new URL('test/fixtures/hold-publish.mjs', root).href);
  assert.ok(await first.says('stdout', /^holding$/m), `the first build reached its publish: ${first.output.stderr}`);
  const second = startBuild(t, dir);
  // before the lock, the second went on and its clean-up removed the first's temporary file
  const waited = await second.says('stderr', /waiting for the build of process \d+/);
  first.child.stdin.end();
  assert.equal(await first.exited, 0, `the first build: ${first.output.stderr}`);
  assert.equal(await second.exited, 0, `the second build: ${second.output.stderr}`);
  assert.ok(waited, 'the second build said it waited for the first');
  assert.match(second.output.stderr, new RegExp(`waiting for the build of process ${first.child.pid} on `));

  const html = await load(url);
  const named = [...html.matchAll(/"\/assets\/([^"]+)"/g)].map((m) => m[1]!);
  const manifest = (JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as { assets: string[] }).assets;
  for (const name of named) assert.ok(manifest.includes(name), `${MANIFEST} names ${name}`);
  assert.deepEqual(readdirSync(join(dir, 'assets')).sort(), [...manifest].sort(), 'assets/ holds the build and nothing else');
  assert.deepEqual(readdirSync(dir).sort(), ['assets', MANIFEST, 'index.html'].sort(), 'no temporary file, no lock');
});

test('a lock left by a build that died while publishing is taken over', async (t) => {
  const { dir, url } = await servedFolder(t);
  const dead = spawn(process.execPath, ['-e', '']);
  await once(dead, 'exit');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, LOCK), `${JSON.stringify({ pid: dead.pid, hostname: hostname() })}\n`);
  const waits: number[] = [];
  // a timeout of 0: a lock taken for a live process's fails at once instead of waiting
  await publish(dir, fakeBuild('NEW'), { lockTimeoutMs: 0, onWait: (holder) => void waits.push(holder.pid) });
  assert.equal(await loadedBuild(url), 'NEW');
  assert.deepEqual(waits, [], 'no wait for a dead process');
  assert.equal(existsSync(join(dir, LOCK)), false, 'the lock is gone after the publish');
});

test('a lock held by a live process: publish waits until it is removed, and fails after lockTimeoutMs naming the holder', async (t) => {
  const { dir, url } = await servedFolder(t);
  const live = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)']);
  t.after(async () => {
    live.kill('SIGKILL');
    await once(live, 'exit');
  });
  await once(live, 'spawn');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, LOCK), `${JSON.stringify({ pid: live.pid, hostname: hostname() })}\n`);

  await assert.rejects(publish(dir, fakeBuild('OLD'), { lockTimeoutMs: 0 }), new RegExp(`held by process ${live.pid} on .*Remove it if no build runs there`));
  assert.equal(existsSync(join(dir, 'index.html')), false, 'nothing published');

  // the holder's lock goes while this one waits: the wait ends and the publish goes on
  const waits: number[] = [];
  await publish(dir, fakeBuild('NEW'), {
    onWait: (holder) => {
      waits.push(holder.pid);
      rmSync(join(dir, LOCK));
    },
  });
  assert.deepEqual(waits, [live.pid]);
  assert.equal(await loadedBuild(url), 'NEW');
  assert.equal(existsSync(join(dir, LOCK)), false);
});

// The folder removed while a build waited for the lock in it: the build looked for the lock, found
// none, failed to make it (ENOENT) and looked again, for ever, at full speed.
test('a publish waiting for the lock fails, naming the lock, when the folder is removed meanwhile', { timeout: 30_000 }, async (t) => {
  const { dir } = await servedFolder(t);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, LOCK), `${JSON.stringify({ pid: process.pid, hostname: hostname() })}\n`);
  await assert.rejects(
    publish(dir, fakeBuild('NEW'), { onWait: () => rmSync(dir, { recursive: true, force: true }) }),
    (err: Error) => err.message === `dashboard: cannot make ${join(dir, LOCK)}` && (err.cause as NodeJS.ErrnoException).code === 'ENOENT',
  );
});
