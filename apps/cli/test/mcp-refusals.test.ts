import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import { coordinator, testGateway } from './helpers.js';
import { callTool, mcpClient } from './mcp-helpers.js';

/*
 * What every tool of `agentq mcp` answers when the coordinator says no: outcome "refused" with
 * its code and message (a 404 with a hint where to look), and "refused for now" with the
 * Retry-After when it is overloaded; a proxy's 502 in front of a coordinator that is down is no
 * answer of the coordinator.
 */

/** What the gateway does with a request: pass it on, answer 502 as a proxy whose upstream is down, or answer as the coordinator would. */
type Plan = 'forward' | 'bad_gateway' | { status: number; code: string; message: string; retryAfterSeconds?: number };

/**
 * An HTTP gateway in front of the coordinator (as nginx or a load balancer): each request is
 * passed on, or answered as `plan` says. Its 502 has no agentq error body, as a proxy's has not.
 * `requests`: every request it took, as `METHOD /path`.
 */
async function gateway(t: TestContext, target: string, plan: (req: IncomingMessage) => Plan): Promise<{ url: string; requests: string[] }> {
  const requests: string[] = [];
  const url = await testGateway(t, target, (req, res, forward) => {
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
    forward();
  });
  return { url, requests };
}

describe('agentq mcp: a refusal of the coordinator is outcome refused on every tool', () => {
  it('404s, a 409 and a 400: outcome refused, the coordinator\'s code and message, and for a 404 where to look; successes unchanged', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const cases: Array<[string, Record<string, unknown>, string, RegExp | null]> = [
      ['get_status', { job_id: 'job_0123456789ab' }, 'job_not_found', /Check the job_id/],
      ['get_status', { session_name: 'nobody' }, 'session_not_found', /Check the session_name: list_children lists/],
      ['get_output', { job_id: 'job_0123456789ab' }, 'job_not_found', /Check the job_id/],
      ['resume_session', { session_name: 'nobody', prompt: 'y' }, 'session_not_found', /Check the session_name/],
      ['start_session', { session_name: 'b', prompt: 'y', parent_session_name: 'nobody' }, 'parent_session_not_found', /Check parent_session_name/],
      ['start_session', { session_name: 'a', prompt: 'y' }, 'session_exists', /Pick another session_name/],
      ['stop', { job_id: 'job_0123456789ab' }, 'job_not_found', /Check the job_id/],
      ['start_session', { session_name: 'c', prompt: 'y', parent_session_name: 'a', budget_usd: 1 }, 'validation_failed', null],
    ];
    for (const [tool, args, code, hint] of cases) {
      const r = await callTool(mcp, tool, args);
      const what = `${tool} ${JSON.stringify(args)}: ${r.text}`;
      assert.equal(r.isError, true, what);
      assert.equal(r.data.error.code, code, what);
      assert.equal(typeof r.data.error.message, 'string', what);
      assert.ok(r.text.startsWith(`${r.data.error.message} (${code})`), what);
      assert.equal(r.data.outcome, 'refused', what);
      assert.match(r.text, /\nOutcome refused: nothing was (done|stopped) \(the (coordinator refused the call|call was refused as given)/, what);
      if (hint) assert.match(r.text, hint, what);
      assert.equal(r.data.retry_after_ms, undefined, `${what}: not a refusal for now`);
    }
    // send_message names its own refusals (not_found, terminal), with the same hint
    const message = await callTool(mcp, 'send_message', { session_name: 'nobody', text: 'hi' });
    assert.deepEqual([message.data.error.code, message.data.outcome], ['session_not_found', 'not_found'], message.text);
    assert.match(message.text, /Check the session_name/);
    // nothing was made by the refused calls
    assert.deepEqual((await c.client.getSession('a')).job_ids, [job.job_id]);
    // an answer that is no refusal has no outcome
    const ok = await callTool(mcp, 'get_status', { job_id: job.job_id });
    assert.equal(ok.isError, false, ok.text);
    assert.equal(ok.data.outcome, undefined);
    assert.doesNotMatch(ok.text, /Outcome/);
  });
});

describe('agentq mcp: a refusal for now says so, with the Retry-After', () => {
  it('stop refused 503 overloaded by the coordinator: refused for now, nothing stopped, try again after its Retry-After (not sent again past the time a call has)', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the coordinator's own overload refusal, in its shape, for stops only
    const gw = await gateway(t, c.url, (req) =>
      req.url?.endsWith('/stop')
        ? { status: 503, code: 'overloaded', message: 'the coordinator is overloaded (eventLoopDelay); retry after 120 s', retryAfterSeconds: 120 }
        : 'forward',
    );
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    // reached: an outage from here on is waited out, a refusal for now sent again while the call has time
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const r = await callTool(mcp, 'stop', { job_id: job.job_id });
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome, r.data.retry_after_ms], ['overloaded', 'refused', 120_000], r.text);
    assert.match(r.text, /\nOutcome refused for now: nothing was stopped: the coordinator is overloaded, limiting calls or restarting, and refuses calls for now \(overloaded\)\. Try again in 120 s \(its Retry-After\)\./);
    // asked to wait longer than the call has, it answers at once rather than trying once more at the end
    assert.equal(gw.requests.filter((x) => x.endsWith('/stop')).length, 1, gw.requests.join('\n'));
    assert.equal((await c.client.getJob(job.job_id)).status, 'pending', 'not stopped');
  });

  it('start_session over the rate limit: refused for now with the coordinator\'s Retry-After (not "did not answer" after the client waited it out)', async (t) => {
    const c = await coordinator(t, { jobsRateLimitPerMinute: 1 });
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const r = await callTool(mcp, 'start_session', { session_name: 'b', prompt: 'y' });
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome], ['rate_limited', 'refused'], r.text);
    assert.ok(r.data.retry_after_ms > 0, r.text);
    assert.match(r.text, /\nOutcome refused for now: nothing was done: .*\(rate_limited\)\..* Try again in \d+ s \(its Retry-After\)\./);
    await assert.rejects(c.client.getSession('b'), { code: 'session_not_found' });
  });
});

describe('agentq mcp: a refusal for now after a try that may have been carried out', () => {
  it('start_session whose first try created the session but lost its answer, then refused for now (429): not "nothing was done" but where to look, the session exists', async (t) => {
    const c = await coordinator(t);
    let creates = 0;
    const url = await testGateway(t, c.url, (req, res, forward) => {
      if (req.method !== 'POST' || req.url !== '/jobs') return forward();
      // the first create goes through, its answer is lost; the client sends it again (same key), refused for now
      if (creates++ === 0) return forward(() => (req.socket.destroy(), true));
      req.resume();
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '120' }).end(JSON.stringify({ error: { code: 'rate_limited', message: 'too many creates' } }));
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: url });
    const r = await callTool(mcp, 'start_session', { session_name: 'made', prompt: 'x', parent_session_name: null });
    assert.equal(r.isError, true, r.text);
    assert.equal(creates, 2, 'sent again once by the client, after the lost answer');
    assert.notEqual(r.data.outcome, 'refused', r.text);
    assert.doesNotMatch(r.text, /nothing was done/);
    assert.match(r.text, /too many creates.*Session "made" may have been started: get_status with session_name "made" tells/s);
    assert.equal((await c.client.getSession('made')).session_name, 'made', 'the first try started it');
  });
});

describe('agentq mcp: how long the coordinator refused is told apart from how long it could not be reached', () => {
  it('a call that met a proxy\'s 502 (no answer), then refusals for now: the refusal says how long each lasted, not "refused every try"', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // after the first read: unreachable (a proxy's 502), then the coordinator's own refusal for
    // now with a 1 s Retry-After, then one with a Retry-After longer than the call has
    let reads = 0;
    const gw = await gateway(t, c.url, (req) => {
      if (!req.url?.startsWith(`/jobs/${job.job_id}`)) return 'forward';
      reads++;
      if (reads === 1) return 'forward';
      if (reads === 2) return 'bad_gateway';
      return { status: 503, code: 'overloaded', message: 'the coordinator is overloaded', retryAfterSeconds: reads === 3 ? 1 : 120 };
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const r = await callTool(mcp, 'get_status', { job_id: job.job_id });
    assert.equal(reads, 4, gw.requests.join('\n'));
    assert.equal(r.isError, true, r.text);
    assert.deepEqual([r.data.error.code, r.data.outcome, r.data.retry_after_ms], ['overloaded', 'refused', 120_000], r.text);
    const outage = r.data.coordinator_outage;
    assert.equal(outage?.back, false, r.text);
    // the pause after the 502 (a backoff of at least 125 ms) was spent unreachable, the 1 s after the first refusal refused
    assert.ok(outage.unreachable_ms >= 125, JSON.stringify(outage));
    assert.ok(outage.refused_ms >= 1000, JSON.stringify(outage));
    assert.match(r.text, /\(overloaded\)\. It could not be reached for [\d.]+ s and refused calls for now for [\d.]+ s\. Try again in 120 s \(its Retry-After\)\./);
    assert.doesNotMatch(r.text, /refused every try/);
  });

  it('a try sent after a refusal for now that a proxy answers 504 only after 1.5 s (its upstream timed out): that time was the coordinator not reached, not refusing', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // after the first read: the coordinator's own refusal for now (Retry-After 1 s), then a try the
    // proxy gives up on after 1.5 s, then the coordinator answers
    let reads = 0;
    const url = await testGateway(t, c.url, (req, res, forward) => {
      if (!req.url?.startsWith(`/jobs/${job.job_id}`)) return forward();
      reads++;
      req.resume();
      if (reads === 2) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' }).end(JSON.stringify({ error: { code: 'overloaded', message: 'the coordinator is overloaded' } }));
      } else if (reads === 3) {
        const timer = setTimeout(() => res.writeHead(504, { 'content-type': 'text/html' }).end('<html><h1>504 Gateway Time-out</h1></html>\n'), 1500);
        res.on('close', () => clearTimeout(timer));
      } else forward();
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const r = await callTool(mcp, 'get_status', { job_id: job.job_id });
    assert.equal(reads, 4);
    assert.equal(r.isError, false, r.text);
    const outage = r.data.coordinator_outage;
    assert.equal(outage?.back, true, r.text);
    // refused: the 1 s its Retry-After asked for, no more; not reached: the 1.5 s the proxy held the try, and the pause after it
    assert.ok(outage.refused_ms >= 1000 && outage.refused_ms < 1500, JSON.stringify(outage));
    assert.ok(outage.unreachable_ms >= 1500, JSON.stringify(outage));
    assert.match(r.text, /Note: the coordinator could not be reached for [\d.]+ s and refused calls for now for 1\.0 s during this call/);
  });

  it('wait_for_jobs that met a proxy\'s 502, then held its wait once the coordinator answered: the hold is no outage time', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the snapshot is answered, the first long-poll meets a proxy's 502, the one sent again holds until the wait's time is up
    let waits = 0;
    const gw = await gateway(t, c.url, (req) => {
      if (req.url !== '/jobs/wait') return 'forward';
      waits++;
      return waits === 2 ? 'bad_gateway' : 'forward';
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const r = await callTool(mcp, 'wait_for_jobs', { job_ids: [job.job_id], timeout_ms: 3000 });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.done, false, r.text);
    assert.equal(waits, 3, gw.requests.join('\n'));
    const outage = r.data.coordinator_outage;
    assert.equal(outage?.back, true, r.text);
    // the pause after the 502 (at most 250 ms), not the 2.7 s the coordinator then held the wait
    assert.ok(outage.unreachable_ms < 1000, JSON.stringify(outage));
    assert.equal(outage.refused_ms, 0, JSON.stringify(outage));
  });

  it('an outage of refusals for now alone that ended: its note says the coordinator refused calls, not that it could not be reached', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    let reads = 0;
    const gw = await gateway(t, c.url, (req) => {
      if (!req.url?.startsWith(`/jobs/${job.job_id}`)) return 'forward';
      reads++;
      return reads === 2 ? { status: 503, code: 'shutting_down', message: 'the coordinator is shutting down', retryAfterSeconds: 1 } : 'forward';
    });
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    assert.equal((await callTool(mcp, 'get_status', { job_id: job.job_id })).isError, false);
    const r = await callTool(mcp, 'get_status', { job_id: job.job_id });
    assert.equal(r.isError, false, r.text);
    const outage = r.data.coordinator_outage;
    assert.deepEqual([outage?.back, outage?.unreachable_ms], [true, 0], r.text);
    assert.ok(outage.refused_ms >= 1000, JSON.stringify(outage));
    assert.match(r.text, /Note: the coordinator refused calls for now for [\d.]+ s during this call \(the coordinator is shutting down; tried again 1 time\(s\)\)/);
    assert.doesNotMatch(r.text, /could not be reached/);
  });
});

describe('agentq mcp: a 500 of the coordinator is no refusal', () => {
  it('send_message and stop answered 500 internal_error: outcome unknown (it may have been done), check get_status; not sent again', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    // the coordinator's answer to a bug, in its shape: it may have struck after the change was made
    const gw = await gateway(t, c.url, (req) =>
      req.url?.startsWith('/sessions/a/messages') || req.url?.endsWith('/stop') || (req.method === 'POST' && req.url === '/jobs')
        ? { status: 500, code: 'internal_error', message: 'Cannot read properties of undefined' }
        : 'forward',
    );
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    assert.equal((await callTool(mcp, 'get_status', { session_name: 'a' })).isError, false);

    const message = await callTool(mcp, 'send_message', { session_name: 'a', text: 'hello' });
    assert.equal(message.isError, true, message.text);
    assert.deepEqual([message.data.error.code, message.data.outcome, message.data.retry_after_ms], ['internal_error', 'unknown', undefined], message.text);
    assert.match(message.text, /\nOutcome unknown: the coordinator failed while handling it, so the message may or may not have been queued\. get_status of the session/);
    assert.doesNotMatch(message.text, /refused|not queued \(/);

    for (const args of [{ job_id: job.job_id }, { session_name: 'a' }]) {
      const stop = await callTool(mcp, 'stop', args);
      const what = `${JSON.stringify(args)}: ${stop.text}`;
      assert.equal(stop.isError, true, what);
      assert.deepEqual([stop.data.error.code, stop.data.outcome], ['internal_error', 'unknown'], what);
      assert.match(stop.text, /\nOutcome unknown: the coordinator failed while handling it, so the stop may or may not have been made\. get_status tells/, what);
    }
    // each was tried once: a call whose effect is unknown is not sent again
    assert.equal(gw.requests.filter((x) => x.startsWith('POST /sessions/a/messages')).length, 1, gw.requests.join('\n'));
    assert.equal(gw.requests.filter((x) => x.endsWith('/stop')).length, 2, gw.requests.join('\n'));

    // a tool without an outcome of its own does not call it a refusal either
    const resume = await callTool(mcp, 'resume_session', { session_name: 'a', prompt: 'y' });
    assert.deepEqual([resume.isError, resume.data.error?.code, resume.data.outcome], [true, 'internal_error', undefined], resume.text);
    assert.doesNotMatch(resume.text, /Outcome/);
  });
});

describe('agentq mcp: a stop whose answer cannot be read may have been made', () => {
  it('stop answered 200 with a body that is not JSON, or not a stop\'s answer: outcome unknown, look with get_status before stopping again (not "refused", not "sent again safely")', async (t) => {
    const c = await coordinator(t);
    // the coordinator makes each stop; what comes back is garbled on the way: not JSON for job a's, `{}` for job b's
    const url = await testGateway(t, c.url, (req, res, forward) => {
      if (!req.url?.endsWith('/stop')) return forward();
      forward((answer) => {
        answer.resume();
        res.writeHead(200, { 'content-type': 'application/json' }).end(req.url!.includes(a.job_id) ? '<html>ok</html>' : '{}');
        return true;
      });
    });
    const a = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const b = await c.client.createJob({ type: 'start_session', session_name: 'b', prompt: 'x' });
    const mcp = await mcpClient(t, { AGENTQ_URL: url });
    for (const [job, why] of [
      [a, /Outcome unknown: the coordinator's answer could not be read, so the stop may or may not have been made\./],
      [b, /Outcome unknown: the tool failed after sending it \(.+\), so the stop may or may not have been made\./],
    ] as const) {
      const r = await callTool(mcp, 'stop', { job_id: job.job_id });
      assert.equal(r.isError, true, r.text);
      assert.equal(r.data.outcome, 'unknown', r.text);
      assert.match(r.text, why);
      assert.match(r.text, /get_status tells; look before calling stop again: a new stop call stops whatever the session runs by then/);
      assert.doesNotMatch(r.text, /refused|sent again safely/);
      // it was made
      assert.equal((await c.client.getJob(job.job_id)).status, 'stopped');
    }
  });
});

describe('agentq mcp: the coordinator\'s own 503 is its answer, a proxy\'s 502 is not', () => {
  it('a first call refused for now by the coordinator itself (503 shutting_down) is sent again: it is there, not a wrong URL', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    let tries = 0;
    const gw = await gateway(t, c.url, () => (tries++ === 0 ? { status: 503, code: 'shutting_down', message: 'the coordinator is shutting down' } : 'forward'));
    const mcp = await mcpClient(t, { AGENTQ_URL: gw.url });
    const r = await callTool(mcp, 'get_status', { session_name: 'a' });
    assert.equal(r.isError, false, r.text);
    assert.equal(r.data.session.session_name, 'a');
    assert.equal(r.data.coordinator_outage?.back, true, r.text);
    assert.equal(gw.requests.length, 2, gw.requests.join('\n'));
  });


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
