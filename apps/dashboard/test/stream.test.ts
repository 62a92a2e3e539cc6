import assert from 'node:assert/strict';
import { connect, createServer, type Server as TcpServer, type Socket } from 'node:net';
import { test } from 'node:test';
import { fileBrowser, live, startServer } from './harness.js';

// The page's event stream when the network, not the coordinator, fails it.

const { skip, browser } = fileBrowser();

/**
 * A TCP proxy in front of the coordinator whose open connections can be made silent without
 * being closed: as a NAT or proxy that forgot them, or a network gone to sleep, leaves them.
 */
async function silencingProxy(port: number): Promise<{ url: string; silence(): void; close(): Promise<void> }> {
  const pairs = new Set<[Socket, Socket]>();
  const server: TcpServer = createServer((down) => {
    const up = connect(port, '127.0.0.1');
    const pair: [Socket, Socket] = [down, up];
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    for (const s of pair) s.on('error', drop).on('close', drop);
    down.pipe(up);
    up.pipe(down);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy did not bind a TCP port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    silence() {
      for (const [down, up] of pairs) {
        up.unpipe(down);
        down.unpipe(up);
        up.pause();
        down.pause();
      }
    },
    async close() {
      for (const [down, up] of pairs) {
        down.destroy();
        up.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

test('a stream that goes silent without closing is given up and reconnected: the page does not stay "live" on a dead connection', { skip }, async (t) => {
  // keepalives every second (a third of the idle timeout): the page hears one at least that often
  const server = await startServer({ config: { httpIdleTimeoutMs: 3000 } });
  t.after(() => server.close());
  const proxy = await silencingProxy(Number(new URL(server.url).port));
  t.after(() => proxy.close());
  const context = await browser().newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  await page.goto(`${proxy.url}/#/jobs`);
  await live(page);

  proxy.silence();
  const job = await server.client.createJob({ type: 'start_session', session_name: 'after-silence', prompt: 'p' });
  await page.locator('[data-stream-state="retrying"]').waitFor();
  await live(page);
  await page.locator(`tr[data-job-id="${job.job_id}"]`).waitFor();
});

test('a stream refused 503 with a Retry-After reconnects no sooner than it asked: an overloaded coordinator is not asked again at once', { skip }, async (t) => {
  const server = await startServer();
  t.after(() => server.close());
  const context = await browser().newContext();
  t.after(() => context.close());
  const page = await context.newPage();
  // the times (the page's clock) at which the page opens its stream
  await page.addInitScript(() => {
    const w = window as unknown as { streamOpenedAt: number[] };
    w.streamOpenedAt = [];
    const fetch = window.fetch.bind(window);
    window.fetch = (input, init) => {
      if (String(input).endsWith('/events')) w.streamOpenedAt.push(Date.now());
      return fetch(input, init);
    };
  });
  // the page's timers on a clock the test moves: a reconnect comes when the test lets it
  await page.clock.install();
  await page.clock.pauseAt(Date.now() + 60_000);
  let refused = false;
  await page.route(/\/events$/, async (route) => {
    if (refused) return route.continue();
    refused = true;
    await route.fulfill({ status: 503, headers: { 'retry-after': '5' }, json: { error: { code: 'overloaded', message: 'busy' } } });
  });
  await page.goto(`${server.url}/#/jobs`);
  await page.clock.runFor(6_000);
  await page.clock.resume();
  await live(page);
  const at = await page.evaluate(() => (window as unknown as { streamOpenedAt: number[] }).streamOpenedAt);
  assert.equal(at.length, 2, `opened once refused, then once more: ${JSON.stringify(at)}`);
  assert.ok(at[1]! - at[0]! >= 5_000, `reconnected ${at[1]! - at[0]!} ms after the refusal asked for 5 s`);
});
