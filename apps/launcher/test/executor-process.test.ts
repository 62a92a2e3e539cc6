import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { fixture } from './helpers.js';

test('an executor that cannot be spawned for want of file descriptors (EMFILE) ends with a spawn error, not a launcher crash', async () => {
  // node makes no pipes then and emits 'error' on the next tick; the fixture takes every
  // descriptor of its own process (a low limit keeps that quick) before it spawns
  const { stdout } = await promisify(execFile)('/bin/sh', ['-c', 'ulimit -n 1024 && exec "$0" "$1"', process.execPath, fixture('no-fds.js')], {
    timeout: 30_000,
  });
  const exit = JSON.parse(stdout) as { code: number | null; spawn_error: string | null };
  assert.equal(exit.code, null);
  assert.match(exit.spawn_error ?? '', /EMFILE/);
});
