import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fakeLauncher, rejectsWith, startTest } from './helpers.js';

/*
 * A session tree's budget (docs/sessions.md): `budget_usd` on a root's `start_session`; once the
 * tree's summed cost reaches it, new jobs of its child sessions are refused with 422
 * `budget_exceeded`. The root itself may still be resumed (its callbacks and the user's turns).
 */

test('a tree that has spent its budget_usd refuses new child jobs (422 budget_exceeded); the root still takes turns', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const root = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan', budget_usd: 1 });
  assert.equal((await l.take()).job_id, root.job_id);
  await l.started(root.job_id);

  const spend = async (name: string, cost: number) => {
    const job = await client.createJob({ type: 'start_session', session_name: name, prompt: 'work', parent_session_name: 'lead' });
    assert.equal((await l.take()).job_id, job.job_id);
    await l.started(job.job_id);
    await client.reportCompleted(job.job_id, { launcher_id: l.id, status: 'success', result: 'done', cost_usd: cost });
  };
  await spend('c1', 0.6);
  assert.equal((await client.getSession('lead')).budget_usd, 1);
  await spend('c2', 0.5); // under budget when it started; the tree has now spent 1.1

  const details = await rejectsWith(
    client.createJob({ type: 'start_session', session_name: 'c3', prompt: 'more', parent_session_name: 'lead' }),
    422,
    'budget_exceeded',
  );
  assert.equal(details['root_session_name'], 'lead');
  assert.equal(details['budget_usd'], 1);
  assert.ok(Math.abs((details['tree_cost_usd'] as number) - 1.1) < 1e-9, String(details['tree_cost_usd']));
  // a resume of a child is new work of the tree too
  await rejectsWith(client.createJob({ type: 'resume_session', session_name: 'c1', prompt: 'again' }), 422, 'budget_exceeded');
  await rejectsWith(client.getSession('c3'), 404, 'session_not_found'); // nothing was created

  // the root is not refused: its own turns go on
  const resume = await client.createJob({ type: 'resume_session', session_name: 'lead', prompt: 'wrap up' });
  assert.equal(resume.type, 'resume_session');
});

test('a budget spent exactly in amounts that do not add up exactly in floating point is spent (0.7 + 0.2 + 0.1 of 1)', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const root = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan', budget_usd: 1 });
  assert.equal((await l.take()).job_id, root.job_id);
  await l.started(root.job_id);
  for (const [i, cost] of [0.7, 0.2, 0.1].entries()) {
    const job = await client.createJob({ type: 'start_session', session_name: `c${i}`, prompt: 'work', parent_session_name: 'lead' });
    assert.equal((await l.take()).job_id, job.job_id);
    await l.started(job.job_id);
    await client.reportCompleted(job.job_id, { launcher_id: l.id, status: 'success', result: 'done', cost_usd: cost });
  }
  await rejectsWith(client.createJob({ type: 'start_session', session_name: 'c3', prompt: 'more', parent_session_name: 'lead' }), 422, 'budget_exceeded');
});

test('budget_usd belongs to a root start: on a child or a resume it is a 400 naming the field', async (t) => {
  const { client } = await startTest(t);
  await client.createJob({ type: 'start_session', session_name: 'top', prompt: 'p' });
  const child = await rejectsWith(
    client.createJob({ type: 'start_session', session_name: 'kid', prompt: 'p', parent_session_name: 'top', budget_usd: 1 }),
    400,
    'validation_failed',
  );
  assert.equal(child['field'], 'budget_usd');
  const resume = await rejectsWith(
    client.createJob({ type: 'resume_session', session_name: 'top', prompt: 'p', budget_usd: 1 }),
    400,
    'validation_failed',
  );
  assert.equal(resume['field'], 'budget_usd');
});

test('a spent tree takes no new child work by message, nor deliveries of outcomes to its children: they stay queued', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const root = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan', budget_usd: 1 });
  await l.take();
  await l.started(root.job_id);
  const c1 = await client.createJob({ type: 'start_session', session_name: 'c1', prompt: 'work', parent_session_name: 'lead' });
  await l.take();
  await l.started(c1.job_id);
  // c1's own child, still running when the tree's money runs out
  const g = await client.createJob({ type: 'start_session', session_name: 'g', prompt: 'sub', parent_session_name: 'c1' });
  await l.take();
  await l.started(g.job_id);
  await client.reportCompleted(c1.job_id, { launcher_id: l.id, status: 'success', result: 'done', cost_usd: 5 });
  await rejectsWith(client.sendMessage('c1', { text: 'keep going' }), 422, 'budget_exceeded');
  // g's outcome is queued on c1, not delivered as a new job of the spent tree
  await l.completed(g.job_id, 'sub done');
  const c1Now = await client.getSession('c1');
  assert.equal(c1Now.callback_job_id, null);
  assert.deepEqual(
    c1Now.pending_callbacks.map((n) => n.job_id),
    [g.job_id],
  );
  // the root itself still takes input (queued: it is busy)
  const sent = await client.sendMessage('lead', { text: 'wrap up' });
  assert.match(sent.message_id, /^msg_/);
});

test('child jobs queued before their tree spent its budget do not run: a launcher taking them ends them failed (budget_exceeded), and takes the next job instead', async (t) => {
  const { client } = await startTest(t);
  const l = await fakeLauncher(client);
  const root = await client.createJob({ type: 'start_session', session_name: 'lead', prompt: 'plan', budget_usd: 1 });
  assert.equal((await l.take()).job_id, root.job_id);
  await l.started(root.job_id);
  const child = (name: string) => client.createJob({ type: 'start_session', session_name: name, prompt: 'work', parent_session_name: 'lead' });
  const spender = await child('spender');
  assert.equal((await l.take()).job_id, spender.job_id);
  await l.started(spender.job_id);
  // queued while the tree was under budget (the launchers are busy, say)
  const waiting = await child('waiting');
  const other = await client.createJob({ type: 'start_session', session_name: 'elsewhere', prompt: 'unrelated' });
  await client.reportCompleted(spender.job_id, { launcher_id: l.id, status: 'success', result: 'done', cost_usd: 1.5 });
  // until a launcher would take it, it says why it will not run
  assert.match((await client.getJob(waiting.job_id)).pending_reason ?? '', /^session tree lead has spent its budget: this job will not run/);

  // one slot: the spent tree's child does not take it, the next ready job does
  assert.equal((await l.take()).job_id, other.job_id);
  const ended = await client.getJob(waiting.job_id);
  assert.equal(ended.status, 'failed');
  assert.equal(ended.error_code, 'budget_exceeded');
  assert.equal(ended.launcher_id, null, 'never handed to a launcher');
  assert.match(ended.error ?? '', /session tree lead has spent/);
  // the root (busy with its own turn) hears of it, as of any child that ended
  const lead = await client.getSession('lead');
  assert.deepEqual(lead.pending_callbacks.map((c) => c.child_session_name).sort(), ['spender', 'waiting']);
});
