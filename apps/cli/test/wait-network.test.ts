import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { waitForJob, waitForJobs } from '../src/waiting.js';
import { coordinator } from './helpers.js';
import { tcpProxy } from '@agentq/client/test/tcp-proxy';

/*
 * A wait whose connection dies without closing (a NAT or proxy that forgot it): nothing tells the
 * client, and its long-poll would be waited on until the hold it asked for (an hour) and the
 * client's slack had passed. Each call holds one round at most, so the wait notices within a
 * round and goes on, on a new connection. The tests use short rounds; the CLI's are 30 s.
 */
describe('a wait on a connection that goes silent', () => {
  for (const which of ['waitForJobs', 'waitForJob'] as const) {
    it(`${which}: a job that ends while the long-poll's connection is frozen ends the wait within a round`, { timeout: 20_000 }, async (t) => {
      const c = await coordinator(t);
      const proxy = await tcpProxy(t, c.url);
      const client = new AgentqClient({ url: proxy.url });
      t.after(() => client.destroy());
      const job = await c.client.createJob({ type: 'start_session', session_name: 'alpha', prompt: 'x' });
      const o = { timeoutMs: undefined, now: Date.now, roundMs: 200, answerGraceMs: 200 };
      const waiting =
        which === 'waitForJobs'
          ? waitForJobs(client, [job.job_id], 'any', o).then((r) => r.jobs[0])
          : waitForJob(client, job.job_id, job, o);
      // the long-poll (a hold above 0) has left: the network forgets every connection now
      await proxy.sentUp(/"timeout_ms":[1-9]|timeout_ms=[1-9]/);
      proxy.freeze('drop');
      await c.client.stopJob(job.job_id);
      const last = await waiting;
      assert.equal(last?.status, 'stopped');
    });
  }
});
