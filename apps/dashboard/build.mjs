#!/usr/bin/env node
// Builds the dashboard into dist/public: type-checks web/ (tsc, DOM types), bundles it with
// esbuild (Preact included: nothing is fetched from a CDN at run time) and writes index.html
// naming the hashed asset files. The coordinator serves dist/public at `/`.
// `node build.mjs --no-check` skips the type check (used by nothing but impatient developers).
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = fileURLToPath(new URL('.', import.meta.url));
const web = join(here, 'web');
const out = join(here, 'dist', 'public');

if (!process.argv.includes('--no-check')) {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const check = spawnSync(process.execPath, [tsc, '-p', join(web, 'tsconfig.json')], { stdio: 'inherit' });
  if (check.status !== 0) {
    console.error('dashboard: type check failed');
    process.exit(1);
  }
}

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
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
  metafile: true,
  legalComments: 'linked',
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((f) => basename(f));
const js = outputs.find((f) => f.endsWith('.js'));
const css = outputs.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`dashboard: esbuild produced no ${js ? 'css' : 'js'} file`);
const html = readFileSync(join(web, 'index.html'), 'utf8')
  .replace('%APP_JS%', `/assets/${js}`)
  .replace('%APP_CSS%', `/assets/${css}`);
writeFileSync(join(out, 'index.html'), html);
const size = (f) => result.metafile.outputs[Object.keys(result.metafile.outputs).find((k) => k.endsWith(f))].bytes;
console.log(`dashboard: dist/public/assets/${js} (${Math.round(size(js) / 1024)} KiB), ${css} (${Math.round(size(css) / 1024)} KiB)`);
