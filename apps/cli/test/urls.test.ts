import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CliCommandData, CliEnvelope, type Health } from '@agentq/protocol';
import { cli, coordinator, deadUrl, envelope } from './helpers.js';

describe('--url with several coordinators (a comma list)', () => {
  it('skips one that cannot be reached', async (t) => {
    const c = await coordinator(t);
    const r = await cli(undefined, ['--url', `${await deadUrl()},${c.url}`, 'health', '--json']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(envelope<{ ok: true; data: Health }>(r, CliEnvelope(CliCommandData.health)).data.status, 'ok');
  });

  it('watch: the event stream opens on the next one when the first cannot be reached', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'watched', prompt: 'p' });
    // --since 0: the events so far are replayed, so the first one arrives without waiting
    const r = await cli(undefined, ['--url', `${await deadUrl()},${c.url}`, 'watch', '--job', job.job_id, '--since', '0', '--count', '1', '--json']);
    assert.equal(r.code, 0, r.stderr);
    const event = JSON.parse(r.stdout.trim()) as { ok: true; data: { type: string; job?: { job_id: string } } };
    assert.equal(event.data.job?.job_id, job.job_id);
  });

  it('none of them answers: exit 1, and the error names every coordinator tried, not only the last', async () => {
    const [a, b] = [await deadUrl(), await deadUrl()];
    const r = await cli(undefined, ['--url', `${a},${b}`, 'list', '--json']);
    assert.equal(r.code, 1, r.stderr);
    const { error } = JSON.parse(r.stdout) as { ok: false; error: { code: string; message: string } };
    assert.equal(error.code, 'coordinator_unreachable');
    assert.match(error.message, /^no coordinator answered \(2 tried\): /);
    assert.ok(error.message.includes(`coordinator at ${a} unreachable`) && error.message.includes(`coordinator at ${b} unreachable`), error.message);
  });

  it('refuses a URL with a user name or password (never sent), without printing the password', async () => {
    const r = await cli(undefined, ['--url', 'http://ops:s3cret@127.0.0.1:1', 'health']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /carries a user name or password, which agentq does not send: give the token with --token or AGENTQ_TOKEN/);
    assert.doesNotMatch(r.stderr + r.stdout, /s3cret/);
  });

  it('refuses a list with an item that is not http(s)', async () => {
    const r = await cli(undefined, ['--url', 'http://127.0.0.1:1,ftp://x', 'list']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /must be http/);
  });
});
