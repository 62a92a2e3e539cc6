import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { request } from 'undici';
import { busySession, countTurns, rejectsWith, start, startTest } from './helpers.js';
import { metricValue, noRetryClient, rawStream, seen, untilMetric } from './limits-helpers.js';
import { createServer, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { copies, SseClients, TURN_WRITE_BYTES } from '../src/http/sse-clients.js';

// issue 11, items 2 and 5: event streams are bounded in number and in what they buffer

const MIB = 1024 * 1024;

test('past MAX_SSE_CLIENTS a new stream is 503 too_many_clients with Retry-After; a freed place is taken again', async (t) => {
  const { c } = await startTest(t, { maxSseClients: 2, overloadRetryAfterSeconds: 3 });
  const client = noRetryClient(t, c.url);
  const first = await rawStream(t, c.port);
  await rawStream(t, c.port);

  const res = await request(`${c.url}/events`);
  assert.equal(res.statusCode, 503);
  assert.equal(res.headers['retry-after'], '3');
  const body = (await res.body.json()) as { error: { code: string; details: Record<string, unknown> } };
  assert.equal(body.error.code, 'too_many_clients');
  assert.deepEqual(body.error.details, { max_sse_clients: 2, retry_after_seconds: 3 });
  await rejectsWith(client.events().next(), 503, 'too_many_clients');
  assert.equal(await metricValue(c.url, 'agentq_requests_refused_total', { reason: 'sse_clients' }), 2);

  // one stream ends: once the server has seen it go, its place is free again
  first.socket.destroy();
  await untilMetric(c.url, 'agentq_sse_clients', 1);
  const again = await rawStream(t, c.port);
  await start(client, 'again');
  await seen(again, 'event: session.created');
});

test('HEAD /events answers the stream headers at once and ends', async (t) => {
  const { c } = await startTest(t);
  for (let i = 0; i < 20; i++) {
    const res = await request(`${c.url}/events`, { method: 'HEAD' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    assert.equal(await res.body.text(), '');
  }
});

test('job events leave the prompt out unless ?include=prompt, and each event is serialised once for all clients', async (t) => {
  const { c, client } = await startTest(t);
  const lean = await Promise.all([1, 2, 3, 4].map(() => rawStream(t, c.port)));
  const full = await rawStream(t, c.port, '?include=prompt');

  const stringify = JSON.stringify;
  let serialised = 0;
  JSON.stringify = function (value: unknown, ...rest: unknown[]) {
    if (value && typeof value === 'object' && (value as { type?: unknown }).type === 'job.created') serialised++;
    return (stringify as (...a: unknown[]) => string)(value, ...rest);
  } as typeof JSON.stringify;
  let job;
  try {
    job = await start(client, 'secretive', 'the prompt text');
    await Promise.all([...lean, full].map((s) => seen(s, 'event: job.created')));
  } finally {
    JSON.stringify = stringify;
  }
  assert.equal(serialised, 2, 'one frame without the prompt and one with it, for five clients');

  const dataOf = (text: string) => {
    const block = text.split('\n\n').find((b) => b.includes('event: job.created'))!;
    return JSON.parse(block.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as { job: Record<string, unknown> };
  };
  for (const s of lean) {
    const { job: j } = dataOf(s.text());
    assert.equal(j.job_id, job.job_id);
    assert.equal(j.prompt, undefined);
    assert.equal(j.prompt_omitted, true);
  }
  const { job: withPrompt } = dataOf(full.text());
  assert.equal(withPrompt.prompt, 'the prompt text');
  assert.equal(withPrompt.prompt_omitted, undefined);
  assert.equal((await client.getJob(job.job_id)).prompt, 'the prompt text', 'the prompt is fetched by id');
});

test('session events leave out the texts a session has queued (messages, child outcomes) unless ?include=prompt', async (t) => {
  const { c, client } = await startTest(t);
  const { l } = await busySession(client, 'inbox');
  const child = await start(client, 'inbox-child', 'c', { parent_session_name: 'inbox' });
  await l.take();
  await l.completed(child.job_id, 'the child result');
  const lean = await rawStream(t, c.port);
  const full = await rawStream(t, c.port, '?include=prompt');
  const sent = await client.sendMessage('inbox', { text: 'the message text' });

  const lastSession = (text: string) => {
    const blocks = text.split('\n\n').filter((b) => b.includes('event: session.updated'));
    return JSON.parse(blocks.at(-1)!.split('\n').find((l) => l.startsWith('data: '))!.slice(6)) as { session: Record<string, unknown> };
  };
  await Promise.all([lean, full].map((s) => seen(s, 'event: session.updated')));
  const { session: leanSession } = lastSession(lean.text());
  assert.equal(leanSession.pending_texts_omitted, true);
  assert.deepEqual(
    leanSession.pending_messages,
    [{ message_id: sent.message_id, created_at: (leanSession.pending_messages as Array<{ created_at: string }>)[0]!.created_at, created_by: null }],
    'the message, without its text',
  );
  const [outcome] = leanSession.pending_callbacks as Array<Record<string, unknown>>;
  assert.equal(outcome!.job_id, child.job_id);
  assert.equal('result' in outcome!, false, 'the outcome, without its result');
  assert.doesNotMatch(lean.text(), /the message text|the child result/);

  const { session: fullSession } = lastSession(full.text());
  assert.equal(fullSession.pending_texts_omitted, undefined);
  assert.equal((fullSession.pending_messages as Array<{ text: string }>)[0]!.text, 'the message text');
  assert.equal((fullSession.pending_callbacks as Array<{ result: string }>)[0]!.result, 'the child result');
  assert.equal((await client.getSession('inbox')).pending_messages[0]!.text, 'the message text', 'the session has them');
});

test('a replay larger than half of what a stream may leave unread starts with stream.gap: the client is not cut for it again and again', { timeout: 120_000 }, async (t) => {
  const { c, client } = await startTest(t, { eventReplayBytes: 64 * MIB });
  const first = c.core.events.lastId;
  // 20 job.created events of 1 MiB prompts (with ?include=prompt): more than the 16 MiB a stream may leave unread
  const big = 'p'.repeat(MIB - 100);
  for (let i = 0; i < 20; i++) await start(client, `big-${i}`, big);
  const newest = c.core.events.lastId;
  const s = await rawStream(t, c.port, '?include=prompt', first);
  await seen(s, `id: ${newest}\n`);
  const text = s.text();
  const gap = /event: stream\.gap\ndata: (.*)\n/.exec(text);
  assert.ok(gap, 'the oldest part of the replay is a gap');
  const oldest = (JSON.parse(gap[1]!) as { oldest_available_id: number }).oldest_available_id;
  assert.ok(oldest > first + 1 && oldest <= newest, `gap up to ${oldest}`);
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  assert.deepEqual(ids, Array.from({ length: newest - oldest + 1 }, (_, i) => oldest + i), 'then every event from there on');
  // still open: a new event comes
  await start(client, 'after');
  await seen(s, 'session_name":"after"');
  assert.equal(await metricValue(c.url, 'agentq_sse_clients_cut_total', { reason: 'client_unread' }), 0);
});

test('past SSE_MAX_BUFFERED_BYTES across streams the slowest stream is cut first; the others keep going', { timeout: 120_000 }, async (t) => {
  const cap = 40 * MIB;
  // a per-stream cap (8 x MAX_PROMPT_BYTES = 64 MiB) above the total: only the total can cut here
  const { c } = await startTest(t, { sseMaxBufferedBytes: cap, maxPromptBytes: 8 * MIB, eventReplaySize: 10 });
  const reader = await rawStream(t, c.port); // reads everything, all along
  const slowest = await rawStream(t, c.port, '?include=prompt');
  slowest.socket.pause(); // stalled from the start

  const prompt = 'x'.repeat(256 * 1024);
  let n = 0;
  const flood = async (bytes: number) => {
    for (let sent = 0; sent < bytes; sent += prompt.length) {
      await c.core.createJob({ type: 'start_session', session_name: `flood-${n++}`, prompt });
    }
  };
  // the slowest falls 24 MB behind (far more than socket buffers hold), below the cap on its own
  await flood(24 * MIB);
  await seen(reader, '"session_name":"flood-95"');
  assert.equal(slowest.socket.destroyed, false);
  // a second stalled stream joins; together they pass the cap while it is 24 MB behind the first
  const slow = await rawStream(t, c.port, '?include=prompt');
  slow.socket.pause();
  await flood(24 * MIB);
  await untilMetric(c.url, 'agentq_sse_clients_cut_total', 1, { reason: 'total_buffered' });
  // the slowest finds its connection closed once it reads again (a paused socket sees no FIN)
  const cut = once(slowest.socket, 'close');
  slowest.socket.resume();
  await cut;

  // the second one was not cut: it reads on and gets every event up to the last one
  const lastJob = `flood-${n - 1}`;
  slow.socket.resume();
  await seen(slow, `"session_name":"${lastJob}"`);
  assert.equal(slow.socket.destroyed, false);
  await seen(reader, `"session_name":"${lastJob}"`);
  assert.equal(await metricValue(c.url, 'agentq_sse_clients_cut_total', { reason: 'total_buffered' }), 1, 'only the slowest');
  assert.equal(await metricValue(c.url, 'agentq_sse_clients_cut_total', { reason: 'client_unread' }), 0);
  assert.equal(await metricValue(c.url, 'agentq_sse_clients'), 2, 'the reader and the second stalled stream');
});

test('the replay window holds at most EVENT_REPLAY_BYTES of events; a client resuming from before it gets stream.gap', async (t) => {
  const { c, client } = await startTest(t, { eventReplayBytes: 4 * MIB, maxPromptBytes: 2 * MIB });
  const firstId = c.core.events.lastId + 1;
  for (let i = 0; i < 10; i++) await start(client, `large-${i}`, 'x'.repeat(MIB));
  const window = c.core.events.replayWindow;
  assert.ok(window.bytes <= 4 * MIB, `${window.bytes} bytes held`);
  assert.ok(window.events >= 3, 'the newest events are there');
  const stream = await rawStream(t, c.port, '', firstId);
  await seen(stream, 'event: stream.gap');
  await seen(stream, '"session_name":"large-9"');
});

test('one event to many streams is written over several turns of the event loop, a budget each, every stream in order', async () => {
  const loop = countTurns();
  const clients = new SseClients({ maxClients: 100, maxBufferedBytes: 1024 * MIB, maxUnreadPerClient: 64 * MIB, retryAfterSeconds: 1 });
  const log = { warn: () => undefined } as unknown as FastifyBaseLogger;
  const writes: { turn: number; stream: number; data: string | Buffer }[] = [];
  const streams = Array.from({ length: 10 }, (_, stream) => {
    // a stream whose client reads at once: every write is copied into the kernel, and counts
    const res = {
      destroyed: false,
      writableLength: 0,
      writableNeedDrain: false,
      write: (data: string | Buffer) => (writes.push({ turn: loop.turn, stream, data }), true),
    };
    return clients.add(res as unknown as ServerResponse, log, () => undefined);
  });
  const frame = (n: number) => Buffer.alloc(MIB, n);
  for (const n of [1, 2]) for (const s of streams) s.send(frame(n));
  for (const s of streams) s.send(': small\n\n');
  // every stream gets its 2 frames and the small one
  while (writes.length < 30) await new Promise((resolve) => setImmediate(resolve));
  loop.stop();
  const bytesByTurn = new Map<number, number>();
  for (const w of writes) bytesByTurn.set(w.turn, (bytesByTurn.get(w.turn) ?? 0) + w.data.length);
  assert.ok(bytesByTurn.size >= 5, `20 MiB over ${bytesByTurn.size} turns`);
  for (const [at, bytes] of bytesByTurn) assert.ok(bytes <= TURN_WRITE_BYTES + MIB, `turn ${at}: ${bytes} bytes`);
  for (let s = 0; s < 10; s++) {
    const own = writes.filter((w) => w.stream === s).map((w) => (typeof w.data === 'string' ? w.data : w.data[0]));
    assert.deepEqual(own, [1, 2, ': small\n\n'], `stream ${s} in order`);
  }
});

test('pacing holds on real sockets: a replay sent right after the stream opens (its socket corked) counts too', async (t) => {
  const clients = new SseClients({ maxClients: 100, maxBufferedBytes: 1024 * MIB, maxUnreadPerClient: 64 * MIB, retryAfterSeconds: 1 });
  const log = { warn: () => undefined } as unknown as FastifyBaseLogger;
  const loop = countTurns();
  // `copies`: Node writes what the response is given now or at the end of this tick
  const writes: { turn: number; bytes: number; copies: boolean }[] = [];
  const streams: { send(data: string | Buffer): void }[] = [];
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('retry: 2000\n\n'); // corks the socket until the end of the tick, as the route does
    const write = res.write.bind(res) as (data: string | Buffer) => boolean;
    (res as unknown as { write: (data: string | Buffer) => boolean }).write = (data) => {
      writes.push({ turn: loop.turn, bytes: data.length, copies: copies(res) });
      return write(data);
    };
    const stream = clients.add(res, log, () => res.end());
    streams.push(stream);
    // a replay, in the same tick as the preamble
    for (const n of [1, 2, 3, 4, 5, 6]) stream.send(Buffer.alloc(MIB, n));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    clients.endAll();
    server.closeAllConnections();
    server.close();
  });
  const { port } = server.address() as AddressInfo;
  let received = 0;
  Array.from({ length: 10 }, () => {
    const s = connect(port, '127.0.0.1', () => s.write('GET / HTTP/1.1\r\nHost: t\r\n\r\n'));
    s.on('data', (d: Buffer) => (received += d.length)); // a client that reads
    t.after(() => s.destroy());
    return s;
  });
  while (received < 60 * MIB) await new Promise((resolve) => setImmediate(resolve));
  loop.stop();
  const copied = new Map<number, number>();
  for (const w of writes) if (w.copies) copied.set(w.turn, (copied.get(w.turn) ?? 0) + w.bytes);
  assert.ok(copied.size >= 3, `copies into the kernel spread over ${copied.size} turns`);
  for (const [at, bytes] of copied) assert.ok(bytes <= TURN_WRITE_BYTES + MIB, `turn ${at}: ${bytes} bytes given to sockets with room`);
});
