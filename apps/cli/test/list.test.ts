import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type JobList } from '@agentq/protocol';
import { cli, coordinator, envelope } from './helpers.js';

const ListSchema = CliEnvelope(CliCommandData.list);
const listed = (r: { stdout: string; stderr: string; code: number }) =>
  envelope<{ ok: true; data: JobList }>(r, ListSchema).data;

describe('agentq list', () => {
  it('shows only jobs that are not terminal by default, all of them with --all, newest first', async (t) => {
    const c = await coordinator(t);
    const first = await c.client.createJob({ type: 'start_session', session_name: 'a', prompt: 'x' });
    const second = await c.client.createJob({ type: 'start_session', session_name: 'b', prompt: 'x' });
    const third = await c.client.createJob({ type: 'start_session', session_name: 'c', prompt: 'x' });
    await c.client.stopJob(second.job_id);

    const active = await cli(c.url, ['list', '--json']);
    assert.equal(active.code, 0);
    assert.deepEqual(
      listed(active).jobs.map((j) => j.job_id),
      [third.job_id, first.job_id],
    );

    const all = await cli(c.url, ['list', '--all', '--json']);
    assert.deepEqual(
      listed(all).jobs.map((j) => j.job_id),
      [third.job_id, second.job_id, first.job_id],
    );

    const stopped = await cli(c.url, ['list', '--status', 'stopped', '--json']);
    assert.deepEqual(
      listed(stopped).jobs.map((j) => j.job_id),
      [second.job_id],
    );
  });

  it('filters by session and pages with --limit / --cursor', async (t) => {
    const c = await coordinator(t);
    for (const s of ['a', 'b', 'c']) await c.client.createJob({ type: 'start_session', session_name: s, prompt: 'x' });
    const onlyB = listed(await cli(c.url, ['list', '--session', 'b', '--json']));
    assert.deepEqual(
      onlyB.jobs.map((j) => j.session_name),
      ['b'],
    );

    const page1 = listed(await cli(c.url, ['list', '--limit', '2', '--json']));
    assert.equal(page1.jobs.length, 2);
    assert.ok(page1.next_cursor);
    const page2 = listed(await cli(c.url, ['list', '--limit', '2', '--cursor', page1.next_cursor, '--json']));
    assert.deepEqual(
      page2.jobs.map((j) => j.session_name),
      ['a'],
    );
  });

  it('prints a table, or says there is nothing active', async (t) => {
    const c = await coordinator(t);
    const empty = await cli(c.url, ['list']);
    assert.equal(empty.code, 0);
    assert.match(empty.stdout, /^no active jobs/);

    const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
    const r = await cli(c.url, ['list']);
    assert.match(r.stdout, /^JOB +STATUS +TYPE +SESSION/);
    assert.match(r.stdout, new RegExp(`${job.job_id}  pending +start +alpha`));
  });
});
