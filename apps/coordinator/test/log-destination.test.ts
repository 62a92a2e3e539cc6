import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, constants, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { DroppingDestination } from '../src/log-destination.js';
import { tempDir } from './auth-helpers.js';

/*
 * The log destination's byte accounting (log-destination.ts): its cap counts UTF-8 bytes, and
 * what it writes (queued lines encoded together, the rest of a short write written next) is the
 * lines it took, byte for byte, with nothing left counted once they are written.
 */

/** A log line of `n` whose text is mostly characters of 2, 3 and 4 UTF-8 bytes. */
const line = (n: number) => `{"n":${n},"msg":"é€😀 ${'😀'.repeat(n % 7)}${'é'.repeat(n % 5)}"}\n`;

test('the log queue is capped in UTF-8 bytes, not characters: lines past the cap are dropped and counted, the rest written whole', async (t) => {
  const file = join(tempDir(t), 'log');
  const fd = openSync(file, 'w');
  t.after(() => closeSync(fd));
  const a = line(0);
  const bytes = Buffer.byteLength(a);
  assert.ok(bytes > a.length, 'the line has multibyte characters');
  // room for three such lines: the first goes to a write at once, the next two wait, the last two
  // find the queue full (no write can finish before this test yields)
  const d = new DroppingDestination(fd, 3 * bytes);
  for (let i = 0; i < 5; i++) d.write(a);
  assert.equal(d.dropped, 2);
  assert.equal(d.bufferedBytes, 3 * bytes);
  await d.flush(60_000);
  assert.equal(d.bufferedBytes, 0);
  assert.equal(readFileSync(file, 'utf8'), a.repeat(3));
});

const hasMkfifo = spawnSync('mkfifo', ['--version']).status === 0;

test('lines queued while a write is in flight are written byte for byte through short writes to a pipe (split multibyte characters), and nothing stays counted', { skip: !hasMkfifo, timeout: 60_000 }, async (t) => {
  const dir = tempDir(t);
  const fifo = join(dir, 'fifo');
  const out = join(dir, 'out');
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
  const outFd = openSync(out, 'w');
  const reader = spawn('cat', [fifo], { stdio: ['ignore', outFd, 'inherit'] });
  closeSync(outFd);
  t.after(() => {
    if (reader.exitCode === null && reader.signalCode === null) reader.kill('SIGKILL');
  });
  // a blocking open waits for the reader; then a non-blocking one, as stdout to a pipe is: a
  // write of more than the pipe holds writes part of it (or fails with EAGAIN, retried)
  const waited = openSync(fifo, 'w');
  const fd = openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
  closeSync(waited);

  const d = new DroppingDestination(fd, 4 << 20);
  let expected = '';
  // about 600 KB, written synchronously: the first line goes to a write, the rest is queued and
  // then handed to one write, many times what a pipe holds (64 KiB on Linux)
  for (let i = 0; i < 12_000; i++) {
    const l = line(i);
    d.write(l);
    expected += l;
  }
  assert.equal(d.dropped, 0);
  assert.equal(d.bufferedBytes, Buffer.byteLength(expected));
  await d.flush(60_000);
  assert.equal(d.bufferedBytes, 0, 'everything written, nothing counted twice or lost');
  closeSync(fd);
  await once(reader, 'exit');
  const got = readFileSync(out);
  assert.equal(got.length, Buffer.byteLength(expected));
  assert.ok(got.equals(Buffer.from(expected, 'utf8')), 'the bytes written are the lines taken, in order');
});
