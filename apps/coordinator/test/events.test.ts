import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect } from 'node:net';
import { test } from 'node:test';
import type { SseMessage } from '@agentq/client';
import { called, eventJob, fakeLauncher, openEvents, start, startTest } from './helpers.js';

// the test's own bound, for a wake-up that never comes: well over what a test takes on a loaded
// CI machine (with both cores busy, events.test's flood took 22 s of its 30; tests of a second
// took 5 to 10)
const opts = { timeout: 120_000 };
const idOf = (m: SseMessage) => Number(m.id);
const isJobEvent = (type: string, jobId: string) => (m: SseMessage) => m.event === type && eventJob(m).job_id === jobId;

test('a connected client gets each change as it happens, starting with the first one after it connected', opts, async (t) => {
  const { client, c } = await startTest(t);
  await start(client, 'before'); // not to be sent: it happened before the client connected
  const ev = openEvents(t, c.url);
  const subscribed = called(c.core.events, 'subscribe');
  const first = ev.next();
  await subscribed;
  const job = await start(client, 'after');
  // a start emits session.created, then job.created (and session updates)
  const opening = await first;
  assert.equal(opening.event, 'session.created');
  assert.equal((JSON.parse(opening.data) as { session: { session_name: string } }).session.session_name, 'after');
  const rest = await ev.until(isJobEvent('job.created', job.job_id));
  const m = rest.at(-1)!;
  assert.ok(rest.every((x) => !x.data.includes('"before"')), 'nothing from before the connection');
  const data = JSON.parse(m.data) as { id: number; type: string; at: string };
  assert.equal(data.id, idOf(m), 'the SSE id is the event id');
  assert.equal(data.type, 'job.created');
  assert.ok(!Number.isNaN(Date.parse(data.at)));
});

test('a job\'s events arrive in lifecycle order: created, claimed, started, completed', opts, async (t) => {
  const { client, c } = await startTest(t);
  // resume from "now": whatever happens after this point arrives, however fast the connect is
  const ev = openEvents(t, c.url, c.core.events.lastId);
  const l = await fakeLauncher(client);
  const job = await start(client, 'observed');
  await l.take();
  await l.started(job.job_id);
  await l.completed(job.job_id, 'fine');

  const seen = await ev.until(isJobEvent('job.completed', job.job_id));
  const ids = seen.map(idOf);
  assert.deepEqual(ids, [...ids].sort((a, b) => a - b), 'ids increase');
  assert.equal(new Set(ids).size, ids.length, 'no event twice');
  const mine = seen.filter((m) => m.event.startsWith('job.') && eventJob(m).job_id === job.job_id);
  assert.deepEqual(
    mine.map((m) => [m.event, eventJob(m).status]),
    [
      ['job.created', 'pending'],
      ['job.claimed', 'claimed'],
      ['job.started', 'running'],
      ['job.completed', 'completed'],
    ],
  );
  assert.equal(eventJob(mine[3]!).result, 'fine');
  assert.ok(seen.some((m) => m.event === 'launcher.registered'));
  assert.ok(seen.some((m) => m.event === 'session.created'));
});

test('Last-Event-ID resume replays exactly the events missed while disconnected', opts, async (t) => {
  const { client, c } = await startTest(t);
  const first = openEvents(t, c.url, c.core.events.lastId);
  const one = await start(client, 'one');
  const seen = await first.until(isJobEvent('job.created', one.job_id));
  const lastSeen = idOf(seen.at(-1)!);
  await first.close();

  // while disconnected
  const two = await start(client, 'two');
  await client.stopJob(two.job_id);
  const newest = c.core.events.lastId;
  assert.ok(newest > lastSeen);

  const again = openEvents(t, c.url, lastSeen);
  const replayed = await again.until((m) => idOf(m) === newest);
  assert.deepEqual(
    replayed.map(idOf),
    Array.from({ length: newest - lastSeen }, (_, i) => lastSeen + 1 + i),
    'every missed event once, in order, and none already seen',
  );
  assert.ok(replayed.every((m) => m.event !== 'stream.gap'));
  assert.ok(replayed.some(isJobEvent('job.created', two.job_id)));
  assert.ok(replayed.some(isJobEvent('job.stopped', two.job_id)));

  // and the stream goes on live after the replay
  const three = await start(client, 'three');
  const live = await again.until(isJobEvent('job.created', three.job_id));
  assert.equal(idOf(live[0]!), newest + 1);
});

test('a Last-Event-ID older than the replay window gets stream.gap first, then the window', opts, async (t) => {
  const { client, c } = await startTest(t, { eventReplaySize: 5 });
  for (let i = 0; i < 5; i++) await start(client, `filler-${i}`);
  const newest = c.core.events.lastId;
  assert.ok(newest > 6, 'more events than the window holds');

  const ev = openEvents(t, c.url, 1);
  if (c.core.store.eventsSince) {
    // a shared store replays what the window lost from its commit log: every event, no gap
    const all = await ev.until((m) => idOf(m) === newest);
    assert.deepEqual(all.map(idOf), Array.from({ length: newest - 1 }, (_, i) => i + 2));
    return;
  }
  const gap = await ev.next();
  assert.equal(gap.event, 'stream.gap');
  const body = JSON.parse(gap.data) as { type: string; oldest_available_id: number };
  assert.equal(body.type, 'stream.gap');
  assert.equal(body.oldest_available_id, newest - 4);
  const replayed = await ev.until((m) => idOf(m) === newest);
  assert.deepEqual(
    replayed.map(idOf),
    [newest - 4, newest - 3, newest - 2, newest - 1, newest],
  );
});

test('a Last-Event-ID inside the replay window gets no stream.gap', opts, async (t) => {
  const { client, c } = await startTest(t, { eventReplaySize: 5 });
  for (let i = 0; i < 5; i++) await start(client, `filler-${i}`);
  const newest = c.core.events.lastId;
  // the window holds newest-4 .. newest: a client that saw newest-5 missed nothing lost
  const ev = openEvents(t, c.url, newest - 5);
  const first = await ev.next();
  assert.equal(first.event === 'stream.gap' ? 'gap' : idOf(first), newest - 4);
});

// a shared store's event ids are the database's: never numbered afresh
const localStore = { ...opts, skip: process.env.AGENTQ_TEST_STORE === 'postgres' && 'event ids of a shared store are never numbered afresh' };
test('a Last-Event-ID past the newest event (ids numbered afresh after a restart of an in-memory store) gets stream.gap, then every new event', localStore, async (t) => {
  const { client, c } = await startTest(t);
  await start(client, 'first');
  const newest = c.core.events.lastId;
  const ev = openEvents(t, c.url, newest + 5000);
  const subscribed = called(c.core.events, 'subscribe');
  const gapOrFirst = ev.next();
  await subscribed;
  const gap = await gapOrFirst;
  assert.equal(gap.event, 'stream.gap');
  const job = await start(client, 'after');
  const seen = await ev.until(isJobEvent('job.created', job.job_id));
  assert.ok(seen.every((m) => idOf(m) > newest), 'only the new events, none dropped as already seen');
});

// ~100 MB of prompts: a test of the SSE layer, which no store changes; too slow to write to PostgreSQL
const flood = { timeout: 120_000, skip: process.env.AGENTQ_TEST_STORE === 'postgres' && 'the store does not matter here (AGENTQ_TEST_STORE=postgres)' };
test('a client that stops reading is disconnected instead of buffering events without bound', flood, async (t) => {
  const { c } = await startTest(t, { eventReplaySize: 10 });
  const socket = connect(c.port, '127.0.0.1');
  t.after(() => socket.destroy());
  // prompts are in events only when asked for: ask, so that the flood is big
  socket.write('GET /events?include=prompt HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n');
  await once(socket, 'data'); // headers: the stream is subscribed
  socket.pause(); // a dashboard that hangs: the TCP connection stays open, nobody reads

  // ~100 MB of events, far beyond what socket buffers and the server's unread cap hold
  const prompt = 'x'.repeat(16 * 1024);
  for (let i = 0; i < 6000; i += 100) {
    await c.core.createJobs(Array.from({ length: 100 }, (_, k) => ({ type: 'start_session' as const, session_name: `flood-${i + k}`, prompt })));
  }
  const lastId = c.core.events.lastId;

  let received = 0;
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  socket.on('error', () => undefined); // a reset is one way to be cut off
  socket.resume();
  await once(socket, 'close');
  assert.ok(received < 6000 * prompt.length, 'the server dropped the stream rather than keep all of it');
  assert.ok(lastId > 10);
});

test('a Last-Event-ID that is not an event id is refused with 400 naming the header, not taken as "no replay"', opts, async (t) => {
  const { client, c } = await startTest(t);
  await start(client, 'first');
  for (const bad of ['evt-3', '-1', '1.5', '0x10', '1, 2', '9'.repeat(16)]) {
    const res = await fetch(`${c.url}/events`, { headers: { 'last-event-id': bad } });
    assert.equal(res.status, 400, bad);
    const body = (await res.json()) as { error: { code: string; details: { field: string; in: string } } };
    assert.equal(body.error.code, 'validation_failed', bad);
    assert.deepEqual([body.error.details.field, body.error.details.in], ['last-event-id', 'headers'], bad);
  }
  // empty, as a client with no id yet may send it: a stream from now on, like no header
  const newest = c.core.events.lastId;
  const ev = openEvents(t, c.url, '');
  const subscribed = called(c.core.events, 'subscribe');
  const first = ev.next();
  await subscribed;
  const job = await start(client, 'after');
  const m = await first;
  assert.ok(m.event !== 'stream.gap' && idOf(m) > newest, `no replay and no gap: ${m.event} ${m.id}`);
  await ev.until(isJobEvent('job.created', job.job_id));
});

test('a consumer that takes its time over the events of the first read is not cut off as a silent stream', opts, async (t) => {
  // a keepalive every 100 ms: a stream silent for 300 ms is dead to the client
  const { client, c } = await startTest(t, { httpIdleTimeoutMs: 300 });
  const first = await start(client, 'one');
  const stop = new AbortController();
  t.after(() => stop.abort());
  // the replay comes with the opening comment (`keepalive 100`), in the same read
  const replayed = c.core.events.lastId;
  let later: string | undefined;
  for await (const m of client.events({ lastEventId: 0, signal: stop.signal })) {
    // the consumer's own work on an event (here a 1 s long-poll): the stream was not silent, it
    // was not being read; the watchdog, started by the opening comment, ran meanwhile
    if (idOf(m) === 1) assert.equal((await client.waitJob(first.job_id, 1000)).status, 'pending');
    if (idOf(m) === replayed) later = (await start(client, 'two')).job_id;
    if (m.event === 'job.created' && eventJob(m).job_id === later) break;
  }
});
