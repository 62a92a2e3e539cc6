import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { toError } from '@agentq/client';
import { ManualClock } from '@agentq/coordinator';
import { coordinator, deadUrl, testGatewayServer } from './helpers.js';
import { callTool, mcpClient } from './mcp-helpers.js';

/*
 * Every tool of `agentq mcp` through a coordinator restart (not only wait_for_jobs): a model that
 * is told "coordinator unreachable" by start_session or get_status may give up its plan, though
 * the coordinator is back a second later. What may be sent again is; what cannot (a message) says
 * whether it was queued.
 */

describe('agentq mcp: tool calls during a coordinator restart', () => {
  it('start_session, resume_session, get_status, list_children, get_output and stop go on once the coordinator is back; a start makes one job', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    // this server has reached the coordinator: one that is away now is restarting, not a wrong URL
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    let down!: () => void;
    const isDown = new Promise<void>((resolve) => (down = resolve));
    const back = c.restart({ whileDown: down });
    await isDown;
    const calls = {
      start: callTool(mcp, 'start_session', { session_name: 'b', prompt: 'y' }),
      resume: callTool(mcp, 'resume_session', { session_name: 'a', prompt: 'z' }),
      status: callTool(mcp, 'get_status', { session_name: 'a' }),
      children: callTool(mcp, 'list_children', { session_name: 'a' }),
      output: callTool(mcp, 'get_output', { job_id: job.job_id }),
    };
    await back;
    for (const [name, call] of Object.entries(calls)) {
      const r = await call;
      assert.equal(r.isError, false, `${name}: ${r.text}`);
    }
    const stop = await callTool(mcp, 'stop', { session_name: 'a' });
    assert.equal(stop.isError, false, stop.text);
    // however many times the create was sent, the coordinator made one job
    assert.equal((await c.client.getSession('b')).job_ids.length, 1);
    assert.equal((await c.client.getSession('a')).job_ids.length, 2);
  });

  it('send_message is sent again when the coordinator refused the connection (it surely did nothing), and queues the message once', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the port stays closed until the server says it tries again (or, were it not to, has answered)
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url }, { onStderr: (line) => /trying again/.test(line) && release() });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    let down!: () => void;
    const isDown = new Promise<void>((resolve) => (down = resolve));
    // nothing listens on the port until then: the connection is refused, the message surely not read
    const back = c.restart({ whileDown: down, refuseUntil: released });
    await isDown;
    const sending = callTool(mcp, 'send_message', { session_name: 'a', text: 'hello' });
    void sending.finally(release);
    await back;
    const r = await sending;
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.outcome, 'queued');
    assert.equal((await c.client.getSession('a')).pending_messages.length, 1);
  });
});

describe('agentq mcp: a tool call that waited through an outage says so', () => {
  it('get_status answers coordinator_outage and a note, and says each pause and the return on stderr with its name', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // stderr and the answer (stdout) are two pipes: the line saying the coordinator is back may
    // be read after the answer, so it is awaited rather than looked for once the answer is in
    let returned!: () => void;
    const sawReturn = new Promise<void>((resolve) => (returned = resolve));
    const lines: string[] = [];
    const mcp = await mcpClient(
      t,
      { AGENTQ_URL: c.url },
      {
        onStderr: (line) => {
          lines.push(line);
          if (/^agentq mcp: get_status: .*; trying again in \d+ ms$/.test(line)) release();
          if (/^agentq mcp: get_status: the coordinator answered again after [\d.]+ s; the call goes on$/.test(line)) returned();
        },
      },
    );
    const calm = await callTool(mcp, 'get_status', { session_name: 'a' });
    assert.equal(calm.data.coordinator_outage, undefined, calm.text);
    let down!: () => void;
    const isDown = new Promise<void>((resolve) => (down = resolve));
    // nothing listens until the server says it tries again: the call surely meets the outage
    const back = c.restart({ whileDown: down, refuseUntil: released });
    await isDown;
    const reading = callTool(mcp, 'get_status', { session_name: 'a' });
    void reading.finally(release);
    await back;
    const r = await reading;
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.session.session_name, 'a');
    assert.equal(r.data.coordinator_outage?.back, true, r.text);
    assert.ok(r.data.coordinator_outage.retries >= 1);
    assert.match(r.text, /Note: the coordinator could not be reached for [\d.]+ s(?: and refused calls for now for [\d.]+ s)? during this call/);
    await sawReturn;
    assert.ok(lines.some((line) => /^agentq mcp: get_status: coordinator at .* unreachable.*; trying again in \d+ ms$/.test(line)), lines.join('\n'));
  });
});

/**
 * A reverse proxy in front of the coordinator that can lose one answer: `lose(path)` makes the
 * next request to that path go through to the coordinator (which carries it out), and cuts the
 * client's connection instead of passing the answer back. Resolves once it has done so.
 * `meanwhile` runs once the coordinator has answered and before the cut: what happens before
 * the client can send its request again.
 */
async function answerLosingProxy(
  t: TestContext,
  target: string,
): Promise<{ url: string; lose: (path: RegExp, meanwhile?: () => Promise<void>) => Promise<void>; refuse: () => void }> {
  let armed: { path: RegExp; meanwhile: () => Promise<void>; done: (err?: unknown) => void } | undefined;
  const { url, server } = await testGatewayServer(t, target, (req, _res, forward) =>
    forward((answer) => {
      const lost = armed && armed.path.test(req.url ?? '') ? armed : undefined;
      if (!lost) return false;
      armed = undefined;
      // the coordinator has answered (the stop is made): its answer is dropped with the connection
      answer.resume();
      answer.once('end', () => {
        lost.meanwhile().then(
          () => {
            req.socket.destroy();
            lost.done();
          },
          (err: unknown) => {
            req.socket.destroy();
            lost.done(err);
          },
        );
      });
      return true;
    }),
  );
  return {
    url,
    lose: (path, meanwhile = async () => {}) =>
      new Promise<void>((resolve, reject) => (armed = { path, meanwhile, done: (err) => (err === undefined ? resolve() : reject(toError(err))) })),
    // from now on no connection is taken: the client's next attempts are refused (surely not sent)
    refuse: () => {
      server.close();
      server.closeIdleConnections();
    },
  };
}

/**
 * A coordinator on the store under test (AGENTQ_TEST_STORE=sqlite or postgres, as the
 * coordinator's own tests; memory by default): each keeps what a stop's Idempotency-Key answered.
 */
async function storeCoordinator(t: TestContext): ReturnType<typeof coordinator> {
  const store = process.env['AGENTQ_TEST_STORE'];
  if (store === 'postgres') {
    const databaseUrl = await freshDatabaseUrl(t);
    if (databaseUrl === null) throw new Error('PostgreSQL is not available (AGENTQ_TEST_STORE=postgres)');
    return coordinator(t, { databaseUrl });
  }
  if (store !== 'sqlite') return coordinator(t);
  const dir = mkdtempSync(join(tmpdir(), 'agentq-mcp-test-'));
  const c = await coordinator(t, { databaseUrl: `sqlite:${join(dir, 'agentq.db')}` });
  // added after the coordinator's own hook, so it runs once the coordinator has closed the file
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return c;
}

describe('agentq mcp: a stop whose answer was lost', () => {
  it('sent again, a session stop does not stop a job started in between: it answers what the first attempt stopped', async (t) => {
    const c = await storeCoordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const running = await c.launcher.claimAndStart();
    const queued = await c.client.createJob({ type: 'resume_session', session_name: 'a', prompt: 'y' });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    // this server has reached the coordinator: a lost answer is an outage, and the stop is sent again
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    let started: string | null = null;
    // before the stop is sent again, its running job ends and a message starts a new turn
    const lost = proxy.lose(/^\/sessions\/a\/stop/, async () => {
      await c.launcher.stopped(running.job_id);
      started = (await c.client.sendMessage('a', { text: 'go on' })).job_id;
    });
    const r = await callTool(mcp, 'stop', { session_name: 'a' });
    await lost;
    assert.equal(r.isError, false, r.text);
    assert.ok(started);
    assert.equal(r.data.resent, true, r.text);
    assert.deepEqual(
      r.data.stopped.map((s: { job_id: string; outcome: string }) => [s.job_id, s.outcome]),
      [
        [queued.job_id, 'stopped'],
        [running.job_id, 'stopping'],
      ],
      'the first attempt\'s answer',
    );
    assert.match(r.text, /^Stopping session "a": .*\. This stop was sent again after its answer was lost .*this is what its first attempt did/);
    assert.equal((await c.client.getJob(started)).status, 'pending', 'the job started in between was not stopped');
  });

  it('sent again, a session stop that found nothing to stop is still refused, and stops nothing started since', async (t) => {
    const c = await storeCoordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.launcher.complete((await c.launcher.claimAndStart()).job_id);
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    let started: string | null = null;
    const lost = proxy.lose(/^\/sessions\/a\/stop/, async () => {
      started = (await c.client.sendMessage('a', { text: 'wake up' })).job_id;
    });
    const r = await callTool(mcp, 'stop', { session_name: 'a' });
    await lost;
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome], ['session_idle', 'refused'], r.text);
    assert.ok(started);
    assert.equal((await c.client.getJob(started)).status, 'pending', 'not stopped');
  });

  it('sent again, a job the first attempt stopped is said stopped, as the first attempt was answered', async (t) => {
    const c = await storeCoordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const lost = proxy.lose(/\/stop$/);
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    await lost;
    assert.equal(r.isError, false, r.text);
    assert.deepEqual([r.data.outcome, r.data.status, r.data.resent], ['stopped', 'stopped', true]);
    assert.match(r.text, /^Job \S+: stopped\. This stop was sent again after its answer was lost .*this is what its first attempt did/);
    assert.doesNotMatch(r.text, /already over/);
  });

  it('sent again after history retention deleted the job: the cut copy the key kept, said so (job_truncated) in its data and its message', async (t) => {
    const RETENTION = 60_000;
    const clock = new ManualClock();
    const c = await coordinator(t, { jobRetentionMs: RETENTION }, { clock });
    const proxy = await answerLosingProxy(t, c.url);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'p'.repeat(2000) });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    // the first attempt stops the job; before it is sent again, retention deletes it
    const lost = proxy.lose(/\/stop$/, async () => {
      clock.advance(RETENTION + 1);
      await c.core.sweep();
    });
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    await lost;
    await assert.rejects(c.client.getJob(job.job_id), { code: 'job_not_found' });
    assert.equal(r.isError, false, r.text);
    assert.deepEqual([r.data.outcome, r.data.status, r.data.resent, r.data.job_truncated], ['stopped', 'stopped', true, true], r.text);
    assert.equal(r.data.job.job_id, job.job_id);
    assert.match(r.text, /^Job \S+: stopped\. This stop was sent again after its answer was lost .*this is what its first attempt did/);
    assert.match(
      r.text,
      /The job has been deleted since \(history retention\): `job` is the copy the coordinator kept with the stop, its prompt, result and error cut to their first 512 characters .*\(job_truncated\)\. No more of it can be read: the job is gone\./,
    );
  });

  it('lost on a first call (the server never reached the coordinator): the client sends it again with its key, and it is answered what the first attempt did', async (t) => {
    const c = await coordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    const lost = proxy.lose(/\/stop$/);
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    await lost;
    assert.equal(r.isError, false, r.text);
    assert.deepEqual([r.data.outcome, r.data.status, r.data.resent], ['stopped', 'stopped', true]);
    assert.match(r.text, /^Job \S+: stopped\. This stop was sent again after its answer was lost .*this is what its first attempt did/);
  });

  it('lost on every try of a first call: outcome unknown, the stop may have been made and may be sent again', async (t) => {
    const c = await coordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    // the client's first attempt and its 4 retries (stopRetries), each answer lost
    let tries = 0;
    const loseEvery = (): Promise<void> => proxy.lose(/\/stop$/, async () => void (++tries < 5 && loseEvery()));
    const lost = loseEvery();
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    await lost;
    assert.equal(tries, 5);
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome], ['coordinator_unreachable', 'unknown']);
    assert.match(r.text, /Outcome unknown: an answer was lost, so the stop may or may not have been made\. get_status tells; look before calling stop again: a new stop call stops whatever the session runs by then/);
    assert.equal((await c.client.getJob(job.job_id)).status, 'stopped', 'it was made');
  });

  it("lost on a first call, then refused on the client's retries: outcome unknown, not not_sent (the first attempt stopped it)", async (t) => {
    const c = await coordinator(t);
    const proxy = await answerLosingProxy(t, c.url);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: proxy.url });
    const lost = proxy.lose(/\/stop$/, async () => proxy.refuse());
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    await lost;
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome], ['coordinator_unreachable', 'unknown'], r.text);
    assert.match(r.text, /Outcome unknown: an answer was lost/);
    assert.equal((await c.client.getJob(job.job_id)).status, 'stopped', 'it was made');
  });

  it('outcome not_sent when the coordinator cannot be reached, refused when it says no: nothing was stopped', async (t) => {
    const dead = await mcpClient(t, { AGENTQ_URL: await deadUrl() });
    const unsent = await callTool(dead, 'stop', { job_id: 'job_0123456789ab' });
    assert.deepEqual([unsent.data.error.code, unsent.data.outcome], ['coordinator_unreachable', 'not_sent']);
    const c = await coordinator(t);
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const unknown = await callTool(mcp, 'stop', { job_id: 'job_0123456789ab' });
    assert.deepEqual([unknown.data.error.code, unknown.data.outcome], ['job_not_found', 'refused']);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    await c.client.stopSession('a');
    const idle = await callTool(mcp, 'stop', { session_name: 'a' });
    assert.deepEqual([idle.data.error.code, idle.data.outcome], ['session_idle', 'refused'], 'sent once, an idle session is still a refusal');
  });
});

describe('agentq mcp: send_message says what became of the message on every error', () => {
  it('not_sent when the coordinator cannot be reached (the server never reached it: reported at once)', async (t) => {
    const mcp = await mcpClient(t, { AGENTQ_URL: await deadUrl() });
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello' });
    assert.equal(r.isError, true);
    assert.equal(r.data.error.code, 'coordinator_unreachable');
    assert.equal(r.data.outcome, 'not_sent');
    assert.match(r.text, /Outcome not_sent: the message was not queued/);
  });

  it('unknown when the connection broke after the message was sent (it may have been queued)', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    let down!: () => void;
    const isDown = new Promise<void>((resolve) => (down = resolve));
    // the port takes the connection and cuts it: the message may have been read, so it is not sent again
    const back = c.restart({ whileDown: down });
    await isDown;
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello' });
    await back;
    assert.equal(r.isError, true, r.text);
    assert.equal(r.data.error.code, 'coordinator_unreachable');
    assert.equal(r.data.outcome, 'unknown');
    assert.match(r.text, /may or may not have been queued/);
  });

  it('refused for a refusal other than not_found and terminal (here: a message over the size limit)', async (t) => {
    const c = await coordinator(t, { maxPromptBytes: 4096 });
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'x'.repeat(5000) });
    assert.equal(r.isError, true, r.text);
    assert.equal(r.data.error.code, 'validation_failed');
    assert.equal(r.data.outcome, 'refused');
    assert.match(r.text, /Outcome refused: the message was not queued/);
  });
});

/** A port that takes every connection and cuts it at once: each call may have been read, none is answered. */
async function cuttingCoordinator(t: TestContext): Promise<string> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return `http://127.0.0.1:${address.port}`;
}

describe('agentq mcp: start_session whose answer was lost', () => {
  it('names the session it may have started (perhaps a name it made up), and how to look for it', async (t) => {
    const mcp = await mcpClient(t, { AGENTQ_URL: await cuttingCoordinator(t) });
    for (const args of [{ session_name: 'w', prompt: 'x' }, { prompt: 'x' }]) {
      const r = await callTool(mcp, 'start_session', args);
      assert.equal(r.isError, true);
      assert.equal(r.data.error.code, 'coordinator_unreachable');
      assert.match(r.text, /Session "([^"]+)" may have been started: get_status with session_name "\1" tells/);
      if (args.session_name) assert.match(r.text, /Session "w"/);
    }
  });
});

/**
 * The coordinator's PostgreSQL test helpers (apps/coordinator/test/pg-server.ts): its throwaway
 * server (null after skipping), and a proxy in front of it that lets the COMMIT of the transaction
 * that sent an armed text through, then cuts the connection before the answer (the commit is made,
 * and the coordinator answers 503 storage_unavailable).
 */
interface PgHelpers {
  freshDatabaseUrl(t: TestContext): Promise<string | null>;
  commitCuttingProxy(t: TestContext, databaseUrl: string): Promise<{ url: string; arm: (text: string) => Promise<void> }>;
  hangingProxy(t: TestContext, databaseUrl: string): Promise<{ url: string; hang(): number; restore(): void }>;
}
const pgHelpers = (): Promise<PgHelpers> =>
  import(new URL('../../../coordinator/dist/test/pg-server.js', import.meta.url).href) as Promise<PgHelpers>;
const freshDatabaseUrl = async (t: TestContext) => (await pgHelpers()).freshDatabaseUrl(t);
const commitCuttingProxy = async (t: TestContext, url: string) => (await pgHelpers()).commitCuttingProxy(t, url);
const hangingProxy = async (t: TestContext, url: string) => (await pgHelpers()).hangingProxy(t, url);

describe('agentq mcp: send_message answered 503 storage_unavailable by a coordinator on PostgreSQL', () => {
  it('a 503 storage_unavailable whose commit was made is not sent again: the message is queued once and the outcome is unknown', async (t) => {
    const databaseUrl = await freshDatabaseUrl(t);
    if (databaseUrl === null) return;
    const proxy = await commitCuttingProxy(t, databaseUrl);
    const c = await coordinator(t, { databaseUrl: proxy.url, sweepIntervalMs: 600_000 });
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    const cut = proxy.arm('hello-through-a-lost-commit');
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello-through-a-lost-commit' });
    await cut;
    assert.equal(r.isError, true, r.text);
    assert.equal(r.data.error.code, 'storage_unavailable');
    assert.equal(r.data.outcome, 'unknown');
    assert.match(r.text, /may or may not have been queued/);
    assert.deepEqual(
      (await c.client.getSession('a')).pending_messages.map((m) => m.text),
      ['hello-through-a-lost-commit'],
      'queued once (the commit the coordinator could not confirm), not again',
    );
  });

  it('a 503 storage_unavailable that says nothing was applied (no connection to the database) is sent again: the message is queued once, once the database is back', async (t) => {
    const databaseUrl = await freshDatabaseUrl(t);
    if (databaseUrl === null) return;
    const proxy = await hangingProxy(t, databaseUrl);
    const c = await coordinator(t, { databaseUrl: proxy.url, databaseConnectTimeoutMs: 200, sweepIntervalMs: 600_000 });
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the database comes back once the server says it tries again (after a 503 it did not take as final)
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url }, { onStderr: (line) => /send_message: .*trying again/.test(line) && proxy.restore() });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    // the pool's connections are cut, and new ones hang until the connect timeout
    proxy.hang();
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello-after-no-connection' });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.outcome, 'queued');
    assert.deepEqual((await c.client.getSession('a')).pending_messages.map((m) => m.text), ['hello-after-no-connection']);
  });
});
