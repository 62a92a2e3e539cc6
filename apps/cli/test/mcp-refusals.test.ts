import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { coordinator } from './helpers.js';
import { callTool, mcpClient } from './mcp-helpers.js';

/*
 * What every tool of `agentq mcp` answers when the coordinator says no, or something in front of
 * it does: a proxy's 502 in front of a coordinator that is down is no answer of the coordinator.
 */

/** What the gateway does with a request: pass it on, answer 502 as a proxy whose upstream is down, or answer as the coordinator would. */
type Plan = 'forward' | 'bad_gateway' | { status: number; code: string; message: string; retryAfterSeconds?: number };

/**
 * An HTTP gateway in front of the coordinator (as nginx or a load balancer): each request is
 * passed on, or answered as `plan` says. Its 502 has no agentq error body, as a proxy's has not.
 * `requests`: every request it took, as `METHOD /path`.
 */
async function gateway(t: TestContext, target: string, plan: (req: IncomingMessage) => Plan): Promise<{ url: string; requests: string[] }> {
  const upstream = new URL(target);
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const p = plan(req);
    if (p === 'bad_gateway') {
      req.resume();
      res.writeHead(502, { 'content-type': 'text/html' }).end('<html><body><h1>502 Bad Gateway</h1></body></html>\n');
      return;
    }
    if (p !== 'forward') {
      req.resume();
      const headers = { 'content-type': 'application/json', ...(p.retryAfterSeconds === undefined ? {} : { 'retry-after': String(p.retryAfterSeconds) }) };
      res.writeHead(p.status, headers).end(JSON.stringify({ error: { code: p.code, message: p.message } }));
      return;
    }
    const forward = request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    forward.on('error', () => req.socket.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { url: `http://127.0.0.1:${address.port}`, requests };
}

describe('agentq mcp: a proxy\'s 502 is not the coordinator answering', () => {
  it('send_message refused for now, then answered 502 by a gateway: the outage is not over, the coordinator unreachable, the outcome unknown', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the coordinator refuses the message as it shuts down (before doing anything), then is down:
    // the gateway in front of it answers 502
    let tries = 0;
    const gw = await gateway(t, c.url, (req) => {
      if (!req.url?.startsWith('/sessions/a/messages')) return 'forward';
      return tries++ === 0 ? { status: 503, code: 'shutting_down', message: 'the coordinator is shutting down' } : 'bad_gateway';
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);
    const r = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello' });
    assert.equal(r.isError, true, r.text);
    assert.equal(tries, 2, 'sent again after the refusal for now');
    assert.equal(r.data.error.code, 'coordinator_unreachable', r.text);
    assert.equal(r.data.error.details?.status, 502);
    assert.match(r.data.error.message, /a proxy or gateway in front of it answered HTTP 502/);
    // a gateway's 502 may come after it passed the message on
    assert.equal(r.data.outcome, 'unknown', r.text);
    assert.equal(r.data.coordinator_outage?.back, false, `the coordinator did not answer again: ${JSON.stringify(r.data.coordinator_outage)}`);
  });

  it('a first call answered 502 by a gateway leaves the coordinator unreached: the next call is reported at once too, not waited on', async (t) => {
    const c = await coordinator(t);
    const gw = await gateway(t, c.url, () => 'bad_gateway');
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    for (const name of ['a', 'b']) {
      const r = await callTool(mcp, 'get_status', { session_name: name });
      assert.equal(r.isError, true, r.text);
      assert.equal(r.data.error.code, 'coordinator_unreachable', r.text);
      assert.equal(r.data.outcome, undefined, r.text);
      assert.equal(r.data.coordinator_outage, undefined, `${name}: not waited on: ${r.text}`);
    }
    assert.equal(gw.requests.length, 2, gw.requests.join('\n'));
  });
});
