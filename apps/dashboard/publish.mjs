// Puts a dashboard build into the folder the coordinator serves (dist/public) while a coordinator
// may be serving it: at every moment a reader gets a complete dashboard, the old build's or the
// new one's. The coordinator reads index.html and assets/<file> at each request, so:
//
//   1. the new assets go in next to the old ones (their names carry a content hash, so they
//      never replace a file of the old build but the same file),
//   2. then index.html, which names them, is replaced in one rename,
//   3. then build.json records this build's asset names,
//   4. then assets/ loses what is neither this build's nor the previous one's.
//
// Each file is written under a temporary name (a leading dot: the coordinator never serves it)
// and renamed into place, so no reader sees one half written. The previous build's assets stay
// one build longer: a page loaded just before the swap still gets the files it names.
// Removing the folder first and writing it again, as this used to do, left the coordinator
// answering 503 and 404 for the time of the bundling, and nothing at all if it failed.
//
// All of it runs under a lock on the folder (publish-lock.mjs): two builds publishing at once
// would otherwise remove each other's temporary files, and each keep only the assets of the page
// it found, not those of the page the other one just put in place.
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { lockFolder } from './publish-lock.mjs';

export { LOCK } from './publish-lock.mjs';

/** What publish() writes beside index.html: the asset names of the build there is now. */
export const MANIFEST = 'build.json';

/**
 * @param {string} out the folder served (made if missing)
 * @param {{ indexHtml: string, assets: ReadonlyMap<string, string | Uint8Array> }} build
 * @param {{
 *   onStep?: (step: string) => Promise<void> | void,
 *   onWait?: (holder: { pid: number, hostname: string }) => void,
 *   lockTimeoutMs?: number,
 * }} [options] `onStep` is awaited after each change to the folder (tests look at what a reader
 *   gets at each one); `onWait` is called if another build is publishing into `out`, which this
 *   one then waits for, up to `lockTimeoutMs` (default 60 s)
 */
export async function publish(out, build, options = {}) {
  const assetsDir = join(out, 'assets');
  await mkdir(assetsDir, { recursive: true });
  const release = await lockFolder(out, { timeoutMs: options.lockTimeoutMs, onWait: options.onWait });
  try {
    await publishLocked(out, assetsDir, build, options.onStep ?? (() => {}));
  } finally {
    await release();
  }
}

async function publishLocked(out, assetsDir, build, step) {
  // the assets of the page served now, kept one build longer. build.json names them, unless it is
  // missing (a folder built before it) or of an older build than index.html (a build stopped
  // between its rename of index.html and its build.json): then every asset there counts as the
  // previous build's, and the next build removes them
  const manifest = await readManifest(out);
  const served = await namedAssets(out);
  const previous =
    manifest && served.every((name) => manifest.includes(name))
      ? manifest
      : (await readdir(assetsDir)).filter((name) => !name.startsWith('.'));

  for (const [name, contents] of build.assets) {
    await replaceFile(assetsDir, name, contents);
    await step(`assets/${name}`);
  }
  await replaceFile(out, 'index.html', build.indexHtml);
  await step('index.html');
  await replaceFile(out, MANIFEST, `${JSON.stringify({ assets: [...build.assets.keys()] }, null, 2)}\n`);
  await step(MANIFEST);

  const keep = new Set([...build.assets.keys(), ...previous]);
  for (const name of (await readdir(assetsDir)).sort()) {
    if (keep.has(name)) continue;
    await rm(join(assetsDir, name), { recursive: true, force: true });
    await step(`removed assets/${name}`);
  }
  // what an interrupted build left (the temporary files of step 1 and 2)
  for (const name of await readdir(out)) {
    if (!isTemporary(name)) continue;
    await rm(join(out, name), { force: true });
    await step(`removed ${name}`);
  }
}

/** @returns {Promise<string[] | undefined>} */
async function readManifest(out) {
  let text;
  try {
    text = await readFile(join(out, MANIFEST), 'utf8');
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return undefined;
    throw new Error(`dashboard: cannot read ${join(out, MANIFEST)}`, { cause: err });
  }
  // written by publish() in one rename, so only a hand can have spoilt it: then, as with none,
  // every asset there is kept one more build
  let assets;
  try {
    assets = JSON.parse(text).assets;
  } catch {
    return undefined;
  }
  return Array.isArray(assets) && assets.every((a) => typeof a === 'string') ? assets : undefined;
}

/** @returns {Promise<string[]>} the asset files the index.html in place names (none if there is none) */
async function namedAssets(out) {
  let html;
  try {
    html = await readFile(join(out, 'index.html'), 'utf8');
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code === 'ENOENT') return [];
    throw new Error(`dashboard: cannot read ${join(out, 'index.html')}`, { cause: err });
  }
  return [...html.matchAll(/"\/assets\/([^"]+)"/g)].map((m) => m[1]);
}

function isTemporary(name) {
  return name.startsWith('.') && name.endsWith('.tmp');
}

/** Writes `dir/name` under a temporary name, then renames it over `dir/name` (one atomic step). */
async function replaceFile(dir, name, contents) {
  const tmp = join(dir, `.${name}.${process.pid}.tmp`);
  try {
    await writeFile(tmp, contents);
    await rename(tmp, join(dir, name));
  } catch (err) {
    await rm(tmp, { force: true });
    throw new Error(`dashboard: cannot write ${join(dir, name)}`, { cause: err });
  }
}
