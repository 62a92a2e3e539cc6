#!/usr/bin/env node
// Runs every compiled test file (`<workspace>/dist/test/**/*.test.js`) with node's test runner.
// `npm test` builds first. Extra arguments filter by path: `npm test -- apps/launcher`.
import { spawn } from 'node:child_process';
import { readdirSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const workspaces = ['packages', 'apps'].flatMap((dir) =>
  readdirSync(join(root, dir), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => join(root, dir, d.name)),
);

function walk(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? walk(join(dir, d.name)) : d.name.endsWith('.test.js') ? [join(dir, d.name)] : [],
  );
}

const filters = process.argv.slice(2);
const files = workspaces
  .flatMap((ws) => walk(join(ws, 'dist', 'test')))
  .map((f) => relative(root, f))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();

if (files.length === 0) {
  console.error(`no test files found${filters.length ? ` matching ${filters.join(', ')}` : ''}`);
  process.exit(1);
}

// --test-timeout bounds each test FILE as a whole, not each test in it (Node 20: the file's test
// inherits it, and the tests in the file's process get no timeout from it). At 120 s, files of a
// dozen tests that take 20 s on an idle machine were cut off ("cancelled") on a loaded CI machine
// that was still running them fine. The bound is there to end a file that hangs, so it is sized
// for the slowest file on a loaded machine; a test that must end sooner says so itself
// (`test(name, { timeout }, fn)`).
const FILE_TIMEOUT_MS = 10 * 60_000;
const child = spawn(process.execPath, ['--test', '--test-concurrency=2', `--test-timeout=${FILE_TIMEOUT_MS}`, ...files], {
  cwd: root,
  stdio: 'inherit',
});
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
