#!/usr/bin/env node
// Builds the dashboard into dist/public: type-checks web/ (tsc, DOM types), bundles it with
// esbuild (Preact included: nothing is fetched from a CDN at run time) and writes index.html
// naming the hashed asset files. The coordinator serves dist/public at `/`, also while this
// runs: publish.mjs puts the new files in place without a moment with no complete dashboard, one
// build at a time (a second build into the same folder waits for the first to publish).
// `node build.mjs --no-check` skips the type check (used by nothing but impatient developers and
// tests); `--out <dir>` builds into another folder than dist/public (tests).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import * as esbuild from 'esbuild';
import { publish } from './publish.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const web = join(here, 'web');
let args;
try {
  ({ values: args } = parseArgs({
    options: { 'no-check': { type: 'boolean', default: false }, out: { type: 'string' } },
    strict: true,
  }));
} catch (err) {
  console.error(`dashboard: ${err.message} (node build.mjs [--no-check] [--out <dir>])`);
  process.exit(2);
}
const out = args.out === undefined ? join(here, 'dist', 'public') : resolve(args.out);

if (!args['no-check']) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const check = spawnSync(process.execPath, [tsc, '-p', join(web, 'tsconfig.json')], { stdio: 'inherit' });
  if (check.status !== 0) {
    console.error('dashboard: type check failed');
    process.exit(1);
  }
}

// in memory: nothing in `out` changes until the whole build is there to publish
const result = await esbuild.build({
  absWorkingDir: here, // the same output (and hashes) from any working directory
  entryPoints: { app: join(web, 'main.tsx') },
  bundle: true,
  format: 'esm',
  splitting: false,
  minify: true,
  sourcemap: 'linked',
  target: ['chrome111', 'firefox111', 'safari16.4'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: join(out, 'assets'),
  entryNames: '[name]-[hash]',
  write: false,
  legalComments: 'linked',
  logLevel: 'warning',
});

const assets = new Map(result.outputFiles.map((f) => [basename(f.path), f.contents]));
const names = [...assets.keys()];
const js = names.find((f) => f.endsWith('.js'));
const css = names.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`dashboard: esbuild produced no ${js ? 'css' : 'js'} file`);
const indexHtml = readFileSync(join(web, 'index.html'), 'utf8')
  .replace('%APP_JS%', `/assets/${js}`)
  .replace('%APP_CSS%', `/assets/${css}`);
await publish(
  out,
  { indexHtml, assets },
  {
    onWait: (holder) =>
      console.error(`dashboard: waiting for the build of process ${holder.pid} on ${holder.hostname} to publish into ${out}`),
  },
);
const kib = (f) => `${Math.round(assets.get(f).byteLength / 1024)} KiB`;
console.log(`dashboard: ${relative(process.cwd(), join(out, 'assets', js))} (${kib(js)}), ${css} (${kib(css)})`);
