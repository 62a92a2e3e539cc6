import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { fakeLauncher, start, startTest } from './helpers.js';

interface Line {
  level: number;
  msg: string;
  reqId?: string;
  req?: { method: string; url: string };
  res?: { statusCode: number };
}
const DEBUG = 20;
const INFO = 30;

/** A pino logger at `debug` that keeps every line, and a way to await one. */
function capture() {
  const lines: Line[] = [];
  const waiters: Array<{ match: (l: Line) => boolean; resolve: (l: Line) => void }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString().split('\n').filter(Boolean)) {
        const line = JSON.parse(text) as Line;
        lines.push(line);
        for (const w of [...waiters]) {
          if (!w.match(line)) continue;
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(line);
        }
      }
      done();
    },
  });
  return {
    logger: pino({ level: 'debug' }, stream),
    lines,
    /** the first line, past or future, that `match` accepts */
    next(match: (l: Line) => boolean): Promise<Line> {
      const seen = lines.find(match);
      return seen ? Promise.resolve(seen) : new Promise((resolve) => waiters.push({ match, resolve }));
    },
  };
}

type Log = ReturnType<typeof capture>;

/**
 * The completion line of the request `method path`, found through its request id: the
 * "incoming request" line (whatever its level) names the URL.
 */
async function completionOf(log: Log, method: string, path: string): Promise<Line> {
  const incoming = await log.next(
    (l) => l.msg === 'incoming request' && l.req?.method === method && l.req.url.split('?')[0] === path,
  );
  return log.next((l) => l.msg === 'request completed' && l.reqId === incoming.reqId);
}

test('long-poll and wait requests log at debug; other requests log one completion line at info', async (t) => {
  const log = capture();
  const { client } = await startTest(t, { pollTimeoutSeconds: 0.05 }, { logger: log.logger });
  const l = await fakeLauncher(client);
  const job = await start(client, 'logged');

  // an ordinary request: one line at info, with method, URL, status and time
  const created = await completionOf(log, 'POST', '/jobs');
  assert.equal(created.level, INFO);
  assert.equal(created.req?.url, '/jobs', 'the completion line says which request it was');
  assert.equal(created.res?.statusCode, 201);
  assert.equal(typeof (created as unknown as { responseTime: unknown }).responseTime, 'number');
  const incoming = log.lines.filter((x) => x.msg === 'incoming request' && x.req?.url === '/jobs');
  assert.ok(incoming.every((x) => x.level === DEBUG), 'the incoming line is debug only');

  // the long-poll (answered with the job, then an empty 204 after the hold) and the waits
  await l.take();
  assert.equal(await l.poll(), null);
  await client.waitJob(job.job_id, 0);
  await client.waitJobs({ job_ids: [job.job_id], timeout_ms: 0 });
  await client.getOutput(job.job_id, { offset: 0, wait_ms: 0 }); // a step of `output --follow`
  for (const [method, path] of [
    ['GET', '/launcher/jobs'],
    ['GET', `/jobs/${job.job_id}/wait`],
    ['POST', '/jobs/wait'],
    ['GET', `/jobs/${job.job_id}/output`],
  ] as const) {
    const line = await completionOf(log, method, path);
    assert.equal(line.level, DEBUG, `${method} ${path} logs at debug`);
  }
  const polls = log.lines.filter((x) => x.msg === 'request completed' && x.req?.url.startsWith('/launcher/jobs?'));
  assert.equal(polls.length, 2, 'both polls, the one that took the job and the empty one');
  assert.ok(polls.every((x) => x.level === DEBUG));
  // reading the output without waiting is an ordinary request
  await client.getOutput(job.job_id);
  const read = log.lines.filter((x) => x.msg === 'incoming request' && x.req?.url === `/jobs/${job.job_id}/output`);
  assert.equal(read.length, 1);
  const preview = await log.next((x) => x.msg === 'request completed' && x.reqId === read[0]!.reqId);
  assert.equal(preview.level, INFO);
  // what the poll did is still told at info: the job handed over
  const handed = await log.next((x) => x.msg === 'job handed to launcher');
  assert.equal(handed.level, INFO);
});

test('a URL the router refuses (broken percent-encoding) still gets its completion line at info', { timeout: 120_000 }, async (t) => {
  const log = capture();
  const { c } = await startTest(t, {}, { logger: log.logger });
  const res = await fetch(`${c.url}/jobs/%zz`);
  assert.equal(res.status, 400);
  const line = await log.next((l) => l.msg === 'request completed' && l.req?.url === '/jobs/%zz');
  assert.equal(line.level, INFO);
  assert.equal(line.res?.statusCode, 400);
  assert.ok(Number.isFinite((line as unknown as { responseTime: number }).responseTime));
});
