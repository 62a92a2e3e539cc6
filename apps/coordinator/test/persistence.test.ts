import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { AgentqClient } from '@agentq/client';
import { fakeLauncher, rejectsWith, resume, start, startTest } from './helpers.js';

function stateDir(t: TestContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'agentq-state-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'state.jsonl');
}

test('with STATE_FILE, jobs, sessions and launchers survive a coordinator restart', async (t) => {
  const stateFile = stateDir(t);
  const first = await startTest(t, { stateFile });
  const l = await fakeLauncher(first.client, 'survivor');
  const done = await start(first.client, 'done');
  const running = await start(first.client, 'running');
  const waiting = await start(first.client, 'waiting');
  const d = await l.take();
  await l.started(d.job_id, 'exec-1');
  await l.completed(d.job_id, 'the answer');
  const r = await l.take();
  await l.started(r.job_id);
  const lastEventBefore = first.c.core.events.lastId;
  await first.client.close();
  await first.c.close();

  const second = await startTest(t, { stateFile });
  const c2 = second.client;
  const doneAfter = await c2.getJob(done.job_id);
  assert.equal(doneAfter.status, 'completed');
  assert.equal(doneAfter.result, 'the answer');
  assert.equal((await c2.getSession('done')).executor_session_id, 'exec-1');
  assert.equal((await c2.getJob(waiting.job_id)).status, 'pending');
  assert.equal((await c2.getJob(running.job_id)).status, 'running');
  assert.ok(second.c.core.events.lastId >= lastEventBefore, 'event ids keep growing');

  // the launcher carries on with the same id: heartbeat, report, poll
  const same = { ...l, ...(await fakeLauncherWithId(c2, l.id)) };
  assert.equal((await c2.heartbeat({ launcher_id: l.id })).ok, true);
  await same.completed(running.job_id, 'finished across the restart');
  assert.equal((await c2.getJob(running.job_id)).status, 'completed');
  const next = await same.take();
  assert.equal(next.job_id, waiting.job_id);
  // the sessions are still known
  await rejectsWith(start(c2, 'done'), 409, 'session_exists');
  const again = await resume(c2, 'done');
  assert.equal(again.status, 'pending');
});

async function fakeLauncherWithId(client: AgentqClient, id: string) {
  return {
    take: async () => {
      const answer = await client.poll(id, { holdSeconds: 5 });
      if (!answer?.job) throw new Error(`expected a job, got ${JSON.stringify(answer)}`);
      return answer.job;
    },
    completed: (jobId: string, result: string) => client.reportCompleted(jobId, { launcher_id: id, result }),
  };
}

test('a torn last journal line (a crash mid-write) is skipped', async (t) => {
  const stateFile = stateDir(t);
  const first = await startTest(t, { stateFile });
  const job = await start(first.client, 'before-the-tear');
  await first.client.close();
  await first.c.close();
  appendFileSync(stateFile, '{"id": 99, "job": {"job_id": "job_');
  const second = await startTest(t, { stateFile });
  assert.equal((await second.client.getJob(job.job_id)).status, 'pending');
  // and the journal was compacted: one line per entity, no torn tail
  const lines = readFileSync(stateFile, 'utf8').trim().split('\n');
  assert.ok(lines.every((line) => JSON.parse(line)), 'every line parses');
});

test('a coordinator process killed with SIGKILL loses no acknowledged job', async (t) => {
  const stateFile = stateDir(t);
  const main = fileURLToPath(new URL('../src/main.js', import.meta.url));
  const launch = async () => {
    const child = spawn(process.execPath, [main], {
      env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', STATE_FILE: stateFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    t.after(() => child.kill('SIGKILL'));
    for await (const line of createInterface({ input: child.stdout! })) {
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      if (entry.msg === 'coordinator ready') {
        child.stdout!.resume();
        return { child, url: `http://127.0.0.1:${entry.port}` };
      }
    }
    throw new Error('coordinator exited before it was ready');
  };

  const one = await launch();
  const client1 = new AgentqClient({ url: one.url });
  const ids = [];
  for (let i = 0; i < 20; i++) ids.push((await start(client1, `crash-${i}`)).job_id);
  await client1.close();
  one.child.kill('SIGKILL');
  await once(one.child, 'exit');

  const two = await launch();
  const client2 = new AgentqClient({ url: two.url });
  t.after(() => client2.close());
  const { jobs } = await client2.listJobs({ limit: 100 });
  assert.deepEqual(new Set(jobs.map((j) => j.job_id)), new Set(ids));
  assert.ok(jobs.every((j) => j.status === 'pending'));
});

test('what a restore changes (the jobs of a launcher that is gone) is journaled too', async (t) => {
  const stateFile = stateDir(t);
  const first = await startTest(t, { stateFile });
  const l = await fakeLauncher(first.client);
  await start(first.client, 'parent');
  const parentJob = await l.take();
  await l.completed(parentJob.job_id, 'idle now');
  const child = await start(first.client, 'child', 'x', { parent_session_name: 'parent' });
  await l.take();
  await l.started(child.job_id);
  await first.client.close();
  await first.c.close();
  // the launcher vanishes from the journal: its running job is an orphan at the next start
  const lines = readFileSync(stateFile, 'utf8').split('\n').filter((line) => !line.includes('"launcher":{'));
  writeFileSync(stateFile, lines.join('\n'));

  const second = await startTest(t, { stateFile });
  assert.equal((await second.client.getJob(child.job_id)).status, 'interrupted');
  const callbackJobId = (await second.client.getSession('parent')).callback_job_id;
  assert.ok(callbackJobId, 'the parent was told through a callback resume');
  await second.client.close();
  await second.c.close();

  const third = await startTest(t, { stateFile });
  const again = await third.client.getJob(callbackJobId);
  assert.deepEqual(again.callback_of, [child.job_id]);
  assert.equal((await third.client.getSession('parent')).callback_job_id, callbackJobId, 'no second callback job');
});
