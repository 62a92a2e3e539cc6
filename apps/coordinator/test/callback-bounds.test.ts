import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Job } from '@agentq/protocol';
import { busySession, start, startTest } from './helpers.js';

// issue 11, item 12: a delivery resume prompt never passes MAX_PROMPT_BYTES, and says what was cut

const MIB = 1024 * 1024;

test('five children with 2 MB results: one resume of at most MAX_PROMPT_BYTES, each result cut with a way to read it whole', async (t) => {
  const { client } = await startTest(t);
  const { l, own } = await busySession(client, 'parent'); // busy: the outcomes queue up
  const children: Job[] = [];
  for (let i = 0; i < 5; i++) {
    const child = await start(client, `child-${i}`, 'work', { parent_session_name: 'parent' });
    assert.equal((await l.take()).job_id, child.job_id);
    await l.completed(child.job_id, `${i}`.repeat(2_000_000));
    children.push(child);
  }
  assert.equal((await client.getSession('parent')).pending_callbacks.length, 5);
  await l.completed(own.job_id);

  const resume = await l.take(); // what the launcher is handed
  assert.deepEqual(resume.callback_of, children.map((c) => c.job_id));
  const bytes = Buffer.byteLength(resume.prompt, 'utf8');
  assert.ok(bytes <= MIB, `${bytes} bytes`);
  assert.ok(bytes > MIB / 2, 'the room is used for the results');
  for (const [i, child] of children.entries()) {
    assert.ok(resume.prompt.includes(`<session>child-${i}</session>`));
    assert.ok(resume.prompt.includes(`<job-id>${child.job_id}</job-id>`));
    assert.ok(resume.prompt.includes(`${i}`.repeat(100_000)), 'a good part of each result');
    assert.ok(resume.prompt.includes(`the result was cut to fit this message (2000000 bytes in all)`));
    assert.ok(resume.prompt.includes(`GET /jobs/${child.job_id} (field result)`));
    assert.ok(resume.prompt.includes(`GET /jobs/${child.job_id}/output`));
    assert.equal((await client.getJob(child.job_id)).result?.length, 2_000_000, 'the whole result is where the prompt says');
  }
  assert.equal(resume.prompt.match(/<\/background-task-completed>/g)?.length, 5, 'every outcome is whole, closing tag included');
});

test('more outcomes than fit: the first go now, the others in the next delivery; none is lost', async (t) => {
  const maxPromptBytes = 8 * 1024;
  const { client } = await startTest(t, { maxPromptBytes });
  const { l, own } = await busySession(client, 'boss', 'p');
  const children: string[] = [];
  for (let i = 0; i < 30; i++) {
    const child = await start(client, `worker-${i}`, 'p', { parent_session_name: 'boss' });
    await l.take();
    await l.completed(child.job_id, '<&>'.repeat(400)); // escaping makes it 5x longer
    children.push(child.job_id);
  }
  await l.completed(own.job_id);

  const delivered: string[] = [];
  for (let turn = 0; delivered.length < children.length; turn++) {
    assert.ok(turn < 30, 'deliveries keep making progress');
    const resume = await l.take();
    assert.ok(Buffer.byteLength(resume.prompt) <= maxPromptBytes);
    assert.ok(resume.callback_of!.length > 0);
    assert.equal(resume.prompt.match(/<\/background-task-completed>/g)?.length, resume.callback_of!.length, 'each one listed is in the prompt, whole');
    for (const id of resume.callback_of!) assert.ok(resume.prompt.includes(`<job-id>${id}</job-id>`));
    if (delivered.length + resume.callback_of!.length < children.length) assert.match(resume.prompt, /follow in your next turn/);
    delivered.push(...resume.callback_of!);
    await l.completed(resume.job_id);
  }
  assert.deepEqual(delivered, children, 'all of them, in order, once');
  assert.deepEqual((await client.getSession('boss')).pending_callbacks, []);
});
