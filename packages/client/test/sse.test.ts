import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSse, type SseMessage } from '../src/index.js';

async function parse(chunks: Array<string | Buffer>): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const m of parseSse(
    (async function* () {
      yield* chunks;
    })(),
  )) {
    out.push(m);
  }
  return out;
}

test('messages split anywhere across chunks, with any line ending, multi-byte characters too', async () => {
  const text =
    'id: 1\r\nevent: job.created\r\ndata: {"a":"日本"}\r\n\r\nid: 2\revent: job.claimed\rdata: x\r\rid: 3\nevent: job.started\ndata: y\n\n';
  const bytes = Buffer.from(text);
  // one byte at a time: splits CRLF pairs and UTF-8 sequences
  const chunks = [...bytes].map((b) => Buffer.from([b]));
  assert.deepEqual(await parse(chunks), [
    { id: '1', event: 'job.created', data: '{"a":"日本"}' },
    { id: '2', event: 'job.claimed', data: 'x' },
    { id: '3', event: 'job.started', data: 'y' },
  ]);
});

test('comments and retry are skipped, data lines join, the type defaults to message, the id sticks', async () => {
  const msgs = await parse([
    ': connected, last event id 7\n\nretry: 2000\n\n',
    'id: 8\ndata: a\ndata: b\n\n',
    'data: c\n\n',
  ]);
  assert.deepEqual(msgs, [
    { id: '8', event: 'message', data: 'a\nb' },
    { id: '8', event: 'message', data: 'c' },
  ]);
});

test('comments go to onComment, in order with the messages', async () => {
  const seen: string[] = [];
  const chunks = [': connected, last event id 7, coordinator p1\n\n', 'id: 8\ndata: a\n\n', ': keepalive\n\n'];
  for await (const m of parseSse(
    (async function* () {
      yield* chunks;
    })(),
    (comment) => seen.push(`comment ${comment}`),
  )) {
    seen.push(`event ${m.id}`);
  }
  assert.deepEqual(seen, ['comment connected, last event id 7, coordinator p1', 'event 8', 'comment keepalive']);
});

test('an event the stream never finished is not delivered', async () => {
  assert.deepEqual(await parse(['event: job.created\ndata: partial']), []);
});
