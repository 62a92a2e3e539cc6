import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { request } from 'undici';
import { AgentqClient } from '@agentq/client';
import type { PollResponse, SyncResponse } from '@agentq/protocol';
import type { CoordinatorConfig } from '../src/config.js';
import { agentRuleOf } from '../src/http/auth/agent-scope.js';
import { startCoordinator } from '../src/start.js';
import { credentialedLauncher, startAuthTest, type AuthTest } from './auth-helpers.js';
import { closeAfter, fakeLauncher, recordingLogger, rejectsWith, start, startTest, tempDir } from './helpers.js';

/*
 * Per-job agent tokens (issue 12): minted per claimed job when auth is on, handed to the launcher
 * beside the job (`agent_tokens`), acting only on the job's session subtree, dead once the job ends.
 */

const TOKEN = /^agt_job_[0-9a-f]{12}\.[A-Za-z0-9_-]{43}$/;

/** Auth on, a launcher with its credential, and a root session `boss` whose job it holds (with the token). */
async function setup(t: TestContext, overrides: Partial<CoordinatorConfig> = {}) {
  const logs = recordingLogger();
  const a = await startAuthTest(t, { logLevel: 'trace', ...overrides }, { logger: logs.log });
  const launcher = await credentialedLauncher(a);
  const root = await a.as.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'delegate' });
  const answer = (await launcher.poll()) as PollResponse;
  assert.equal(answer.job?.job_id, root.job_id);
  const token = answer.agent_tokens?.[root.job_id];
  assert.ok(token, `the poll answer carries the job's agent token: ${JSON.stringify(Object.keys(answer))}`);
  return { a, launcher, logs, root, answer, token, agent: a.withToken(token) };
}

const forbidden = (p: Promise<unknown>) => rejectsWith(p, 403, 'forbidden');

/** A request with `token` (for routes the client has no method for); answers status and parsed body. */
async function call(url: string, token: string, method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown) {
  const res = await request(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // an event stream that was allowed would never end: its status is the answer
  const text = path === '/events' && res.statusCode === 200 ? (res.body.destroy(), '{}') : await res.body.text();
  return { status: res.statusCode, body: JSON.parse(text) as Record<string, any> };
}

test('auth on: a job handed out comes with its own agent token beside it, never on the job, in GET /jobs or in a log line', async (t) => {
  const { a, root, answer, token, logs, launcher } = await setup(t);
  assert.match(token, TOKEN);
  assert.ok(token.startsWith(`agt_${root.job_id}.`));
  const secret = token.split('.')[1]!;
  // the Job objects of the answer hold no token
  assert.ok(!JSON.stringify(answer.jobs).includes(secret));
  assert.ok(!JSON.stringify(answer.jobs).includes('agent_token'));
  await launcher.client.reportStarted(root.job_id, { launcher_id: launcher.id });
  // what others read about the job: nothing of the token (nor of its hash)
  for (const path of ['/jobs', `/jobs/${root.job_id}`, '/sessions/boss', '/sessions']) {
    const res = await request(`${a.c.url}${path}`, { headers: { authorization: `Bearer ${a.secrets.admin}` } });
    const text = await res.body.text();
    assert.equal(res.statusCode, 200, text);
    assert.ok(!text.includes(secret) && !/agent_?token/i.test(text), `${path} shows no agent token: ${text.slice(0, 300)}`);
  }
  // the token works (read its own session), and is not logged by that either
  assert.equal((await a.withToken(token).getSession('boss')).session_name, 'boss');
  await launcher.client.reportCompleted(root.job_id, { launcher_id: launcher.id, result: 'done' });
  assert.ok(logs.lines.length > 10, 'the coordinator logged at trace');
  for (const line of logs.lines) assert.ok(!line.includes(secret), `a log line holds the agent token: ${line}`);
});

test('an agent token may start children (and grandchildren) of its session, and read, wait on, message and stop its subtree', async (t) => {
  const { a, root, agent, token } = await setup(t);
  const child = await agent.createJob({ type: 'start_session', session_name: 'worker', parent_session_name: 'boss', prompt: 'work' });
  assert.equal(child.parent_session_name, 'boss');
  assert.equal(child.created_by, `agent:${root.job_id}`, 'the audit field names the job whose agent acted');
  const grandchild = await agent.createJob({ type: 'start_session', session_name: 'helper', parent_session_name: 'worker', prompt: 'help' });
  const batch = await call(a.c.url, token, 'POST', '/jobs/batch', {
    jobs: [{ type: 'start_session', session_name: 'worker-2', parent_session_name: 'boss', prompt: 'too' }],
  });
  assert.equal(batch.status, 201, JSON.stringify(batch.body));
  assert.equal(batch.body.jobs[0].parent_session_name, 'boss');

  // reads: its own job and session, its children, lists filtered to its subtree
  assert.equal((await agent.getJob(root.job_id)).session_name, 'boss');
  assert.equal((await agent.getJob(grandchild.job_id)).session_name, 'helper');
  assert.equal((await agent.waitJob(child.job_id, 0)).terminal, false);
  assert.equal((await agent.getOutput(child.job_id)).job_id, child.job_id);
  assert.deepEqual((await agent.waitJobs({ job_ids: [child.job_id, grandchild.job_id], timeout_ms: 0 })).not_found, []);
  assert.deepEqual((await agent.getSession('boss')).children.sort(), ['worker', 'worker-2']);
  assert.deepEqual((await agent.listSessions({ parent: 'boss' })).sessions.map((s) => s.session_name).sort(), ['worker', 'worker-2']);
  assert.deepEqual((await agent.listSessions({ parent: 'worker' })).sessions.map((s) => s.session_name), ['helper']);
  assert.deepEqual((await agent.listJobs({ session_name: 'helper' })).jobs.map((j) => j.job_id), [grandchild.job_id]);

  // writes below it: a resume of a child (queued behind its start), a message, stops
  const resumed = await agent.createJob({ type: 'resume_session', session_name: 'worker', prompt: 'and more' });
  assert.equal(resumed.status, 'pending');
  const message = await agent.sendMessage('worker-2', { text: 'hurry' });
  assert.equal(message.outcome, 'queued');
  assert.equal((await agent.stopJob(resumed.job_id)).outcome, 'stopped');
  assert.equal((await agent.stopSession('helper')).stopped[0]?.job_id, grandchild.job_id);
  assert.equal((await a.as.admin.getJob(grandchild.job_id)).stopped_by, `agent:${root.job_id}`);

  // unknown ids are 404 as for anyone, not 403
  await rejectsWith(agent.getJob('job_000000000000'), 404, 'job_not_found');
  await rejectsWith(agent.getSession('nobody'), 404, 'session_not_found');
  await rejectsWith(
    agent.createJob({ type: 'start_session', session_name: 'x', parent_session_name: 'nobody', prompt: 'p' }),
    404,
    'parent_session_not_found',
  );
});

test('an agent token may not act outside its subtree, nor call anything but the jobs and sessions routes', async (t) => {
  const { a, agent, token } = await setup(t);
  const other = await a.as.client.createJob({ type: 'start_session', session_name: 'stranger', prompt: 'mine' });
  await agent.createJob({ type: 'start_session', session_name: 'worker', parent_session_name: 'boss', prompt: 'work' });

  // create: no root sessions, no children of others, no resume of others or of itself
  let d = await forbidden(agent.createJob({ type: 'start_session', session_name: 'rogue', prompt: 'p' }));
  assert.equal(d.field, 'parent_session_name');
  d = await forbidden(agent.createJob({ type: 'start_session', session_name: 'rogue', parent_session_name: 'stranger', prompt: 'p' }));
  assert.equal(d.session_name, 'stranger');
  await forbidden(agent.createJob({ type: 'resume_session', session_name: 'stranger', prompt: 'p' }));
  await forbidden(agent.createJob({ type: 'resume_session', session_name: 'boss', prompt: 'p' }));
  // a batch with one job out of scope is refused whole: nothing was created
  const batch = await call(a.c.url, token, 'POST', '/jobs/batch', {
    jobs: [
      { type: 'start_session', session_name: 'fine', parent_session_name: 'boss', prompt: 'p' },
      { type: 'start_session', session_name: 'rogue', parent_session_name: 'stranger', prompt: 'p' },
    ],
  });
  assert.equal(batch.status, 403);
  assert.equal(batch.body.error.details.field, 'jobs[1].parent_session_name');
  await rejectsWith(a.as.admin.getSession('fine'), 404, 'session_not_found');

  // a name taken outside its subtree: refused without saying the session's status
  d = await forbidden(agent.createJob({ type: 'start_session', session_name: 'stranger', parent_session_name: 'boss', prompt: 'p' }));
  assert.deepEqual([d.field, d.current_status], ['session_name', undefined]);

  // jobs and sessions of others: nor whose they are
  d = await forbidden(agent.getJob(other.job_id));
  assert.equal(d.session_name, undefined);
  assert.doesNotMatch(await agent.getJob(other.job_id).then(String, (e: Error) => e.message), /stranger/);
  await forbidden(agent.waitJob(other.job_id, 0));
  await forbidden(agent.getOutput(other.job_id));
  await forbidden(agent.stopJob(other.job_id));
  await forbidden(agent.waitJobs({ job_ids: [other.job_id], timeout_ms: 0 }));
  await forbidden(agent.getSession('stranger'));
  await forbidden(agent.stopSession('stranger'));
  await forbidden(agent.sendMessage('stranger', { text: 'hi' }));
  // lists only filtered to its subtree
  assert.equal((await forbidden(agent.listJobs())).field, 'session_name');
  await forbidden(agent.listJobs({ session_name: 'stranger' }));
  assert.equal((await forbidden(agent.listSessions())).field, 'parent');
  await forbidden(agent.listSessions({ parent: 'stranger' }));
  // nothing else: launchers, events, metrics, the launcher protocol
  await forbidden(agent.listLaunchers());
  await forbidden(agent.register({ hostname: 'evil' }));
  await forbidden(agent.heartbeat({ launcher_id: 'lnch_000000000000' }));
  for (const path of ['/events', '/metrics']) {
    const res = await call(a.c.url, token, 'GET', path);
    assert.equal(res.status, 403, path);
    assert.equal(res.body.error.code, 'forbidden');
  }
  // the other session was not touched by any of it
  assert.equal((await a.as.admin.getJob(other.job_id)).status, 'pending');
});

test('every route the app registers that agent tokens may not call answers an agent token 403 (public routes aside)', async (t) => {
  const { a, token } = await setup(t);
  const refused = a.c.app.auth.routes.filter((r) => r.method !== 'HEAD' && !r.access.public && !agentRuleOf(r.method, r.url));
  assert.ok(refused.length >= 10, `the launcher protocol, launchers, events, metrics: ${refused.length}`);
  for (const route of refused) {
    const path = route.url.replace(/:[A-Za-z_]+/g, 'x').replace('*', 'x');
    const res = await call(a.c.url, token, route.method as 'GET' | 'POST' | 'DELETE', path, route.method === 'GET' || route.method === 'DELETE' ? undefined : {});
    assert.equal(res.status, 403, `${route.method} ${route.url}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error.code, 'forbidden');
    assert.equal(res.body.error.details?.agent_session_name, 'boss', 'it says an agent token was refused, as a scope refusal does');
  }
});

test('an agent token stops working when its job ends, and when its claim is undone (a new claim mints a new one)', async (t) => {
  const { a, launcher, root, agent } = await setup(t);
  await launcher.client.reportStarted(root.job_id, { launcher_id: launcher.id });
  assert.equal((await agent.getSession('boss')).status, 'busy');
  // stopping: the job is still active, its agent may still act
  await a.as.admin.stopJob(root.job_id);
  assert.equal((await agent.getJob(root.job_id)).status, 'stopping');
  await launcher.client.reportStopped(root.job_id, { launcher_id: launcher.id, signal: 'SIGTERM' });
  const d = await rejectsWith(agent.getSession('boss'), 401, 'unauthorized');
  assert.equal(d.job_id, root.job_id, 'the refusal says whose token it was');
  await rejectsWith(
    agent.createJob({ type: 'start_session', session_name: 'late', parent_session_name: 'boss', prompt: 'p' }),
    401,
    'unauthorized',
  );

  // a poll answer that never reached the launcher: its job goes back to the queue, its token dies
  const next = await a.as.client.createJob({ type: 'resume_session', session_name: 'boss', prompt: 'again' });
  const lost = (await launcher.poll()) as PollResponse;
  const first = lost.agent_tokens![next.job_id]!;
  assert.equal((await a.withToken(first).getJob(next.job_id)).status, 'claimed');
  await a.c.core.pollAnswerLost(launcher.id, lost);
  assert.equal((await a.as.admin.getJob(next.job_id)).status, 'pending');
  await rejectsWith(a.withToken(first).getJob(next.job_id), 401, 'unauthorized');
  const again = (await launcher.poll()) as PollResponse;
  const second = again.agent_tokens![next.job_id]!;
  assert.notEqual(second, first);
  assert.equal((await a.withToken(second).getJob(next.job_id)).attempts, 2);
  await rejectsWith(a.withToken(first).getJob(next.job_id), 401, 'unauthorized');
  // a token of the right shape for the job, but made up
  await rejectsWith(a.withToken(`agt_${next.job_id}.${'A'.repeat(43)}`).getJob(next.job_id), 401, 'unauthorized');
});

test("a child's turn may not start a sibling nor message its parent: what a turn locks stays in its subtree, below the session it locks first (lock order)", async (t) => {
  const { a, agent, launcher } = await setup(t);
  const child = await agent.createJob({ type: 'start_session', session_name: 'worker', parent_session_name: 'boss', prompt: 'work' });
  const answer = (await launcher.poll()) as PollResponse;
  assert.equal(answer.job?.job_id, child.job_id);
  const childAgent = a.withToken(answer.agent_tokens![child.job_id]!);
  // checkTurnGoesOn locks the turn's session ('worker') before the create's: a sibling under
  // 'boss' would lock the child before its parent, against the parents-first order
  const d = await forbidden(childAgent.createJob({ type: 'start_session', session_name: 'sibling', parent_session_name: 'boss', prompt: 'p' }));
  assert.deepEqual([d.field, d.session_name], ['parent_session_name', 'boss']);
  await forbidden(childAgent.sendMessage('boss', { text: 'up' }));
  await rejectsWith(a.as.admin.getSession('sibling'), 404, 'session_not_found');
  // below itself it may
  assert.equal((await childAgent.createJob({ type: 'start_session', session_name: 'helper', parent_session_name: 'worker', prompt: 'p' })).parent_session_name, 'worker');
});

test("a turn being stopped starts nothing through its agent token: no resume of a child, no grandchild, no message, so a tree stop holds", async (t) => {
  const { a, root, agent, launcher } = await setup(t);
  await launcher.client.reportStarted(root.job_id, { launcher_id: launcher.id });
  // a child that ran and is idle now
  const child = await agent.createJob({ type: 'start_session', session_name: 'worker', parent_session_name: 'boss', prompt: 'work' });
  await launcher.claim(child.job_id);
  await launcher.client.reportCompleted(child.job_id, { launcher_id: launcher.id, result: 'done' });

  await a.as.client.stopSession('boss', { tree: true });
  assert.equal((await a.as.reader.getJob(root.job_id)).status, 'stopping');
  // the dying turn, until its executor is gone, still holds a valid token: it may read, not start
  assert.equal((await agent.getSession('worker')).session_name, 'worker');
  const details = await rejectsWith(agent.createJob({ type: 'resume_session', session_name: 'worker', prompt: 'again' }), 409, 'parent_stopping');
  assert.deepEqual(details, { parent_session_name: 'boss', job_id: root.job_id, current_status: 'stopping' });
  await rejectsWith(agent.createJob({ type: 'start_session', session_name: 'late', parent_session_name: 'worker', prompt: 'x' }), 409, 'parent_stopping');
  await rejectsWith(agent.createJobs([{ type: 'resume_session', session_name: 'worker', prompt: 'again' }]), 409, 'parent_stopping');
  await rejectsWith(agent.sendMessage('worker', { text: 'again' }), 409, 'parent_stopping');
  await launcher.client.reportStopped(root.job_id, { launcher_id: launcher.id });
  assert.deepEqual(
    (await a.as.reader.listJobs({ session_name: 'worker' })).jobs.map((j) => j.job_id),
    [child.job_id],
    'the stopped tree stays stopped',
  );
  // a client's new input still wakes it
  assert.equal((await a.as.client.sendMessage('worker', { text: 'go on' })).outcome, 'queued');
});

test('a token checked just before its job was handed out again starts nothing: the new claim is a new turn with a new token', async (t) => {
  const { a, root, token, agent, launcher, answer } = await setup(t);
  // the token is checked (the auth reads the job), and then, before the create's own transaction,
  // the claim is undone and the job handed out again: the interleaving forced at the one read
  const store = a.c.core.store;
  const getJob = store.getJob.bind(store);
  let interleave = false;
  store.getJob = async (id) => {
    const row = await getJob(id);
    if (interleave && id === root.job_id) {
      interleave = false;
      await a.c.core.pollAnswerLost(launcher.id, answer);
      const again = (await launcher.poll()) as PollResponse;
      assert.notEqual(again.agent_tokens?.[root.job_id], token);
    }
    return row;
  };
  interleave = true;
  const details = await rejectsWith(
    agent.createJob({ type: 'start_session', session_name: 'late', parent_session_name: 'boss', prompt: 'x' }),
    409,
    'parent_stopping',
  );
  assert.equal(interleave, false, 'the claim was undone between the check of the token and the create');
  assert.deepEqual(details, { parent_session_name: 'boss', job_id: root.job_id, current_status: 'claimed' });
  await rejectsWith(a.as.reader.getSession('late'), 404, 'session_not_found');
});

test('the sync answer carries agent tokens too; on SQLite a token survives a coordinator restart (its hash is in the jobs table)', async (t) => {
  const databaseUrl = `sqlite:${join(tempDir(t, 'agentq-agent-db-'), 'agentq.db')}`;
  const a: AuthTest = await startAuthTest(t, { databaseUrl });
  const launcher = await credentialedLauncher(a);
  const job = await start(a.as.client, 'synced');
  const res = await request(`${a.c.url}/launcher/sync`, {
    method: 'POST',
    headers: { authorization: `Bearer ${launcher.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ launcher_id: launcher.id, capacity: 1, reports: [] }),
  });
  const body = (await res.body.json()) as SyncResponse;
  assert.equal(res.statusCode, 200, JSON.stringify(body));
  assert.deepEqual(body.jobs.map((j) => j.job_id), [job.job_id]);
  const token = body.agent_tokens?.[job.job_id];
  assert.match(token ?? '', TOKEN);
  const agent: AgentqClient = a.withToken(token);
  assert.equal((await agent.getSession('synced')).session_name, 'synced');

  // a running job goes on running on its launcher while the coordinator restarts: its agent keeps
  // acting (a claimed one would be requeued by the restart, and its token die with the claim)
  await launcher.client.reportStarted(job.job_id, { launcher_id: launcher.id });
  await a.c.close();
  const again = closeAfter(t, await startCoordinator({ databaseUrl, authTokensFile: a.file, logLevel: 'silent' }));
  const after = new AgentqClient({ url: again.url, token });
  t.after(() => after.close());
  const child = await after.createJob({ type: 'start_session', session_name: 'synced-child', parent_session_name: 'synced', prompt: 'p' });
  assert.equal(child.created_by, `agent:${job.job_id}`);
});

test('auth off: no agent token is minted, and none is needed', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const job = await start(client, 'open');
  const answer = (await l.poll()) as PollResponse;
  assert.equal(answer.job?.job_id, job.job_id);
  assert.equal(answer.agent_tokens, undefined);
  // an agent of an open coordinator uses no token at all
  const child = await client.createJob({ type: 'start_session', session_name: 'open-child', parent_session_name: 'open', prompt: 'p' });
  assert.equal(child.created_by, null);
});
