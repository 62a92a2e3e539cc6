import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { CreateJobRequest } from '@agentq/protocol';
import { beforeEachCall, coordinator } from './helpers.js';
import { callTool, mcpClient } from './mcp-helpers.js';

/*
 * The MCP tools' answers stay bounded (docs/mcp.md, "Answers"), however large the sessions and
 * jobs they are about: a model reads every byte of them.
 */

describe('agentq mcp: bounded answers', () => {
  it('get_status and stop of a session name its newest 50 children and count them all', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'big', prompt: 'p' });
    const children: CreateJobRequest[] = Array.from({ length: 60 }, (_, i) => ({
      type: 'start_session',
      session_name: `big-child-${String(i).padStart(2, '0')}-${'x'.repeat(150)}`,
      parent_session_name: 'big',
      prompt: 'p',
    }));
    await c.client.createJobs(children);
    const newest = children.slice(10).map((j) => j.session_name);
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });

    const status = await callTool(mcp, 'get_status', { session_name: 'big' });
    assert.equal(status.isError, false, status.text);
    assert.deepEqual(status.data.session.children, newest);
    assert.equal(status.data.session.children_count, 60);
    assert.match(status.text, /Children: 60; the newest 50: big-child-10-x+, .*\. list_children pages through them all\./);
    assert.doesNotMatch(status.text, /big-child-09/);

    const stopped = await callTool(mcp, 'stop', { session_name: 'big' });
    assert.equal(stopped.isError, false, stopped.text);
    assert.deepEqual(stopped.data.session.children, newest);
    assert.doesNotMatch(stopped.text, /big-child-09/);
  });

  it('stop with tree: true stops the sessions under it and names their sessions; tree without session_name is refused', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'top', prompt: 'p' });
    const kid = await c.client.createJob({ type: 'start_session', session_name: 'kid', prompt: 'p', parent_session_name: 'top' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const stopped = await callTool(mcp, 'stop', { session_name: 'top', tree: true });
    assert.equal(stopped.isError, false, stopped.text);
    assert.match(stopped.text, new RegExp(`job ${kid.job_id} \\(session "kid"\\) stopped`));
    assert.equal(stopped.data.stopped_count, 2);
    const refused = await callTool(mcp, 'stop', { job_id: kid.job_id, tree: true });
    assert.equal(refused.isError, true);
    assert.match(refused.text, /tree goes with session_name/);
  });

  it('stop of a session whose state cannot be read afterwards still says it stopped (it did)', async (t) => {
    const c = await coordinator(t);
    const job = await c.client.createJob({ type: 'start_session', session_name: 'gone-quiet', prompt: 'p' });
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    beforeEachCall(c.core, 'getSession', async () => {
      throw Object.assign(new Error('the store is unavailable'), { statusCode: 503 });
    });
    const stopped = await callTool(mcp, 'stop', { session_name: 'gone-quiet' });
    assert.equal(stopped.isError, false, stopped.text);
    assert.match(stopped.text, /Stopping session "gone-quiet": job \w+ stopped\. \(Its state could not be read just now/);
    assert.equal(stopped.data.session, null);
    assert.equal((await c.client.getJob(job.job_id)).status, 'stopped');
  });

  it('stop of a session with many jobs queued names the first 50 and counts them all', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'busy', prompt: 'p' });
    await c.client.createJobs(Array.from({ length: 59 }, () => ({ type: 'resume_session' as const, session_name: 'busy', prompt: 'more' })));
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const stopped = await callTool(mcp, 'stop', { session_name: 'busy' });
    assert.equal(stopped.isError, false, stopped.text);
    assert.equal(stopped.data.stopped.length, 50);
    assert.equal(stopped.data.stopped_count, 60);
    assert.match(stopped.data.message, /^Stopping session "busy": (job job_\w+ stopped, ){49}job job_\w+ stopped and 10 more job\(s\)\.$/);
  });

  it("a session's last error is shown whole beside a long last result (the result is cut, not the error)", async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'long-then-failed', prompt: 'p' });
    await c.launcher.complete((await c.launcher.claimAndStart()).job_id, 'r'.repeat(20_000));
    await c.client.createJob({ type: 'resume_session', session_name: 'long-then-failed', prompt: 'again' });
    await c.launcher.fail((await c.launcher.claimAndStart()).job_id, 'executor exited with code 1: API key revoked');
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const status = await callTool(mcp, 'get_status', { session_name: 'long-then-failed' });
    assert.equal(status.isError, false, status.text);
    assert.equal(status.data.session.last_error, 'executor exited with code 1: API key revoked');
    assert.equal(status.data.session.last_result_full_bytes, 20_000);
    assert.match(status.text, /Last error: executor exited with code 1: API key revoked/);
  });

  it("list_children cuts each child's last result on a character, never inside one (no lone surrogate for the model's API)", async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'parent', prompt: 'p' });
    await c.launcher.complete((await c.launcher.claimAndStart()).job_id);
    await c.client.createJob({ type: 'start_session', session_name: 'kid', parent_session_name: 'parent', prompt: 'p' });
    const kid = await c.launcher.claimAndStart();
    assert.equal(kid.session_name, 'kid');
    // the emoji (two UTF-16 code units) straddles the 200th code unit, where the line is cut
    await c.launcher.complete(kid.job_id, `${'a'.repeat(199)}😀 and more after it`);
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const list = await callTool(mcp, 'list_children', { session_name: 'parent' });
    assert.equal(list.isError, false, list.text);
    // a lone surrogate does not survive UTF-8 (it becomes U+FFFD)
    assert.equal(Buffer.from(list.text, 'utf8').toString('utf8'), list.text, `the text has a lone surrogate: ${JSON.stringify(list.text.slice(-40))}`);
    assert.match(list.text, new RegExp(`- "kid": idle, last job completed: a{199}…`));
  });

  it('wait_for_jobs: the results of all the jobs share 64 KiB, however many jobs there are', async (t) => {
    const c = await coordinator(t);
    const created = await c.client.createJobs(Array.from({ length: 100 }, (_, i) => ({ type: 'start_session' as const, session_name: `w${i}`, prompt: 'p' })));
    for (let i = 0; i < created.length; i++) {
      const job = await c.launcher.claimAndStart();
      await c.launcher.complete(job.job_id, 'r'.repeat(2048));
    }
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const waited = await callTool(mcp, 'wait_for_jobs', { job_ids: created.map((j) => j.job_id), mode: 'all', timeout_ms: 0 });
    assert.equal(waited.isError, false, waited.text);
    assert.equal(waited.data.done, true);
    const jobs = waited.data.jobs as { result: string; result_full_bytes?: number }[];
    assert.equal(jobs.length, 100);
    const bytes = jobs.reduce((n, j) => n + Buffer.byteLength(j.result, 'utf8'), 0);
    assert.ok(bytes <= 64 * 1024, `${bytes} bytes of results`);
    for (const j of jobs) assert.equal(j.result_full_bytes, 2048);
  });

  it('get_status reads a long result in pieces with result_offset: each cut on a character, saying where it lies, together the whole', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'long', prompt: 'p' });
    // two-byte and four-byte characters: no 16 KiB boundary falls between two of them by chance
    const result = `${'é'.repeat(10_001)}${'😀'.repeat(5_000)}.`;
    const job = await c.launcher.claimAndStart();
    await c.launcher.complete(job.job_id, result);
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    for (const whose of [{ job_id: job.job_id }, { session_name: 'long' }]) {
      const field = 'job_id' in whose ? 'result' : 'last_result';
      const pieces: string[] = [];
      let offset: number | undefined;
      for (;;) {
        const r = await callTool(mcp, 'get_status', { ...whose, ...(offset === undefined ? {} : { result_offset: offset }) });
        assert.equal(r.isError, false, r.text);
        const view = 'job_id' in whose ? r.data.job : r.data.session;
        const piece = view[field] as string;
        assert.equal(Buffer.from(piece, 'utf8').toString('utf8'), piece, 'no half character');
        assert.ok(Buffer.byteLength(piece, 'utf8') <= 16 * 1024);
        assert.equal(view[`${field}_full_bytes`], Buffer.byteLength(result, 'utf8'));
        const start = offset ?? 0;
        const end = start + Buffer.byteLength(piece, 'utf8');
        pieces.push(piece);
        const next = view[`${field}_next_offset`] as number | undefined;
        if (next === undefined) {
          assert.match(r.text, new RegExp(`\\[bytes ${start}-${end} of the (last )?result's ${view[`${field}_full_bytes`]}: its end\\]`));
          break;
        }
        assert.equal(next, end);
        const arg = 'job_id' in whose ? `job_id "${job.job_id}"` : 'session_name "long"';
        assert.ok(r.text.includes(`[bytes ${start}-${end} of the ${field === 'result' ? 'result' : 'last result'}'s `), r.text.slice(-300));
        assert.ok(r.text.includes(`the rest: get_status with ${arg} and result_offset ${next}]`), r.text.slice(-300));
        offset = next;
      }
      assert.ok(pieces.length >= 3);
      assert.equal(pieces.join(''), result);
    }
  });

  it("an error too long to show whole says it was cut; a last result it leaves no room for is read with result_offset", async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 's', prompt: 'p' });
    await c.launcher.complete((await c.launcher.claimAndStart()).job_id, 'r'.repeat(20_000));
    await c.client.createJob({ type: 'resume_session', session_name: 's', prompt: 'again' });
    const failed = await c.launcher.claimAndStart();
    await c.launcher.fail(failed.job_id, 'e'.repeat(17_000));
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url });
    const job = await callTool(mcp, 'get_status', { job_id: failed.job_id });
    assert.match(job.text, new RegExp(`\\[the error was cut to 16384 of 17000 bytes; the whole of it: \`agentq status ${failed.job_id} --json\`\\]`));
    const session = await callTool(mcp, 'get_status', { session_name: 's' });
    assert.match(session.text, /\[the error was cut to 16384 of 17000 bytes; the whole of it: `agentq sessions s --json`\]/);
    assert.equal(session.data.session.last_result, '');
    assert.match(session.text, /\[bytes 0-0 of the last result's 20000; the rest: get_status with session_name "s" and result_offset 0\]/);
    const read = await callTool(mcp, 'get_status', { session_name: 's', result_offset: 0 });
    assert.equal(read.data.session.last_result, 'r'.repeat(16 * 1024));
    assert.equal(read.data.session.last_result_next_offset, 16 * 1024);
  });

  it('start_session under a closed parent says no result resumes it (not that the parent is resumed)', async (t) => {
    const c = await coordinator(t);
    await c.client.createJob({ type: 'start_session', session_name: 'boss', prompt: 'p' });
    const boss = await c.launcher.claimAndStart();
    const mcp = await mcpClient(t, { AGENTQ_URL: c.url, AGENTQ_SESSION_NAME: 'boss', AGENTQ_JOB_ID: boss.job_id });
    assert.equal((await callTool(mcp, 'start_session', { session_name: 'open', prompt: 'x' })).isError, false);
    assert.equal((await callTool(mcp, 'start_session', { session_name: 'closed', prompt: 'x' })).isError, false);
    // stopped while pending: its start never ran, so it can take no more input
    assert.equal((await callTool(mcp, 'stop', { session_name: 'closed' })).isError, false);
    assert.equal((await c.client.getSession('closed')).accepts_input, false);
    const under = await callTool(mcp, 'start_session', { session_name: 'orphan', parent_session_name: 'closed', prompt: 'x' });
    assert.equal(under.isError, false, under.text);
    assert.match(under.text, /Its parent "closed" can take no more input \(its start never ran\): its result waits there, resuming nobody/);
    const fine = await callTool(mcp, 'start_session', { session_name: 'grandchild', parent_session_name: 'open', prompt: 'x' });
    assert.match(fine.text, /Its parent "open" is resumed with its result when it ends\.$/);
  });
});
