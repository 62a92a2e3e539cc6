import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LineSplitter, MAX_EVENT_LINE_BYTES } from '../src/executor-process.js';

/** Feed `text` in chunks of `size` bytes; what came out. */
function split(text: string | Buffer, size: number): { lines: string[]; oversized: number } {
  const out = { lines: [] as string[], oversized: 0 };
  const splitter = new LineSplitter(
    (line) => out.lines.push(line),
    () => out.oversized++,
  );
  const bytes = typeof text === 'string' ? Buffer.from(text) : text;
  for (let i = 0; i < bytes.length; i += size) splitter.push(bytes.subarray(i, i + size));
  splitter.end();
  return out;
}

test('lines come out whole, without their newline or CR, a character split across chunks included', () => {
  assert.deepEqual(split('one\r\ntwo\n\nthé end', 3), { lines: ['one', 'two', '', 'thé end'], oversized: 0 });
});

test('a text line over 1 MiB goes on in pieces, even where a piece starts with {', () => {
  // a line of text (its first chunk) then 40 MB of JSON objects, a chunk boundary on each `{`
  const item = '{"k":"' + 'v'.repeat(65_520 - 8) + '"},';
  const line = `${'['.repeat(item.length)}${item.repeat(600)}]`;
  const { lines, oversized } = split(`${line}\nafter\n`, item.length);
  assert.equal(oversized, 0);
  assert.equal(lines.at(-1), 'after');
  assert.equal(lines.slice(0, -1).join(''), line, 'every byte of it, in order');
  assert.ok(lines.length > 2, 'in pieces');
});

test('with onPiece, a long text line is passed on exactly as it came: one newline, at its end, and never read as an event', () => {
  const lines: string[] = [];
  const pieces: string[] = [];
  const splitter = new LineSplitter(
    (line) => lines.push(line),
    () => assert.fail('not an oversized event'),
    (text) => pieces.push(text),
  );
  const long = `${'A'.repeat(1_100_000)}{"type":"result","text":"not an event"}END`;
  const bytes = Buffer.from(`${long}\r\nnext\n${'B'.repeat(1_100_000)}`);
  for (let i = 0; i < bytes.length; i += 65_536) splitter.push(bytes.subarray(i, i + 65_536));
  splitter.end();
  const text = pieces.join('');
  assert.ok(text === `${long}\r\n${'B'.repeat(1_100_000)}`, 'every byte in order, the long line ending once, the last without a newline it never had');
  assert.ok(pieces.length > 2, 'in pieces');
  assert.deepEqual(lines, ['next']);
});

test('an event line over MAX_EVENT_LINE_BYTES is skipped, once, and the next line is read', () => {
  const big = `{"type":"result","text":"${'r'.repeat(MAX_EVENT_LINE_BYTES)}"}`;
  const { lines, oversized } = split(`${big}\n{"type":"output","text":"next"}\n`, 64 * 1024);
  assert.equal(oversized, 1);
  assert.deepEqual(lines, ['{"type":"output","text":"next"}']);
  // and when it comes whole, in one chunk
  assert.deepEqual(split(`${big}\nafter\n`, 64 * 1024 * 1024), { lines: ['after'], oversized: 1 });
});
