import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { CommitFeed, encodeHints, type LogRow } from '../src/core/store/pg-feed.js';
import type { Commit } from '../src/core/store/store.js';

/*
 * The PostgreSQL store's commit feed (pg-feed.ts) on its own, with a commit log the test answers
 * read by read: what the feed asks for, and when, is the test's to decide.
 */

const noHints = { readyKeys: new Map<string, number>(), launchersToWake: new Set<string>(), ended: new Set<string>(), launchersChanged: false };
const row = (id: number): LogRow => ({ id, first_event_id: id, events: '[]', hints: encodeHints(noHints) });
const commit = (): Commit => ({ events: [], ...noHints });

/** A read of the log that the test answers: `calls` resolves with each read as it is made. */
function heldReads() {
  const reads: Array<{ afterId: number; answer: (rows: LogRow[]) => void }> = [];
  let next: ((n: number) => void) | undefined;
  const read = (afterId: number) =>
    new Promise<LogRow[]>((answer) => {
      reads.push({ afterId, answer });
      next?.(reads.length);
    });
  /** resolves once read number `n` (from 1) has been made */
  const made = (n: number) => (reads.length >= n ? Promise.resolve(n) : new Promise<number>((resolve) => (next = (k) => void (k >= n && resolve(k)))));
  return { reads, read, made };
}

test("another coordinator's commit announced while a read of the log that predates it is under way is read again, not forgotten: an own commit after it is delivered", async () => {
  const log = heldReads();
  const delivered: Commit[] = [];
  const feed = new CommitFeed(log.read, async () => new Map(), (c) => delivered.push(c), pino({ level: 'silent' }));
  feed.start(0);

  // a reconnection of the LISTEN connection: the log is read for what was missed meanwhile
  feed.announce();
  await log.made(1);
  // meanwhile another coordinator commits entry 1 (its NOTIFY comes while the read is still under
  // way, whose snapshot was taken before it), then this one commits entry 2
  feed.announce(1);
  let done = false;
  const own = feed.committed(2, commit()).then(() => (done = true));
  // the read answers as its snapshot saw the log: nothing new
  log.reads[0]!.answer([]);
  // entry 1 is announced and not delivered: the log is read again (at once: the feed has nothing
  // else to wait for, so one turn of the event loop is enough for it to ask)
  await new Promise(setImmediate);
  assert.equal(log.reads.length, 2, 'the log is read again for the entry announced during the first read');
  assert.equal(log.reads[1]!.afterId, 0);
  log.reads[1]!.answer([row(1), row(2)]);
  await own;
  assert.equal(done, true);
  assert.equal(feed.delivered, 2);
  assert.equal(delivered.length, 2);
  feed.close();
});

test('an own commit made while a read of the log that predates it is under way is delivered, though the entry before it was not announced yet', async () => {
  const log = heldReads();
  const delivered: Commit[] = [];
  const feed = new CommitFeed(log.read, async () => new Map(), (c) => delivered.push(c), pino({ level: 'silent' }));
  feed.start(0);
  feed.announce(); // a reconnection
  await log.made(1);
  // another coordinator commits entry 1 (its NOTIFY not here yet), then this one commits entry 2
  const own = feed.committed(2, commit());
  log.reads[0]!.answer([]);
  await new Promise(setImmediate);
  assert.equal(log.reads.length, 2, 'the log is read again for the entry before the own commit');
  log.reads[1]!.answer([row(1), row(2)]);
  await own;
  assert.equal(feed.delivered, 2);
  feed.close();
});

test('a read that finds nothing, with nothing announced while it was under way, is not repeated', async () => {
  const log = heldReads();
  const feed = new CommitFeed(log.read, async () => new Map(), () => undefined, pino({ level: 'silent' }));
  feed.start(3);
  feed.announce(); // a reconnection: nothing was committed meanwhile
  await log.made(1);
  log.reads[0]!.answer([]);
  await new Promise(setImmediate);
  assert.equal(log.reads.length, 1);
  // each announcement during a read that finds nothing is one more read, no more
  feed.announce();
  await log.made(2);
  feed.announce(5);
  log.reads[1]!.answer([]);
  await new Promise(setImmediate);
  assert.equal(log.reads.length, 3);
  log.reads[2]!.answer([]);
  await new Promise(setImmediate);
  assert.equal(log.reads.length, 3);
  assert.equal(feed.delivered, 3);
  feed.close();
});
