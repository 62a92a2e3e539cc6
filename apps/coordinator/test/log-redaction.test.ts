import assert from 'node:assert/strict';
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import { test } from 'node:test';
import { request } from 'undici';
import { CENSOR, redactSecrets } from '../src/log-redaction.js';
import { recordingLogger, startTest } from './helpers.js';

test('secrets are censored at the top of a line and inside its objects and arrays', () => {
  const line = {
    job_id: 'job_1',
    token: 'T1',
    launcher_token: 'T2',
    authorization: 'Bearer T3',
    answer: { launcher_id: 'lnch_1', launcher_token: 'T4', agent_tokens: { job_1: 'T5' } },
    req: { method: 'GET', headers: { authorization: 'Bearer T6', host: 'h' } },
    list: [{ token: 'T7' }, 'plain'],
    count: 3,
  };
  const before = structuredClone(line);
  const clean = redactSecrets(line);
  assert.deepEqual(clean, {
    job_id: 'job_1',
    token: CENSOR,
    launcher_token: CENSOR,
    authorization: CENSOR,
    answer: { launcher_id: 'lnch_1', launcher_token: CENSOR, agent_tokens: CENSOR },
    req: { method: 'GET', headers: { authorization: CENSOR, host: 'h' } },
    list: [{ token: CENSOR }, 'plain'],
    count: 3,
  });
  assert.deepEqual(line, before, 'the logged object itself is not changed');
});

test('a line without secrets is passed on as it is, without a copy', () => {
  const line = { job_id: 'job_1', launcher_id: 'lnch_1', nested: { a: [1, 2, { b: 'c' }] } };
  assert.equal(redactSecrets(line), line);
  assert.equal(redactSecrets(line.nested), line.nested);
});

test('class instances are left to their serializers, and the walk stops at its depth', () => {
  class Holder {
    token = 'kept for the serializer';
  }
  const holder = new Holder();
  assert.equal(redactSecrets({ holder }).holder, holder);
  const deep = { a: { b: { c: { token: 'below the depth' } } } };
  assert.equal(redactSecrets(deep), deep);
});

test("the coordinator's logger writes no secret, in a line's fields or in a child's bindings", () => {
  const { log, lines } = recordingLogger();
  log.info({ launcher_id: 'lnch_1', answer: { launcher_token: 'secret-one' } }, 'registered');
  log.child({ token: 'secret-two' }).info({ req: { headers: { authorization: 'Bearer secret-three' } } }, 'child line');
  assert.equal(lines.length, 2);
  const first = JSON.parse(lines[0]!) as { launcher_id: string; answer: { launcher_token: string } };
  assert.equal(first.launcher_id, 'lnch_1');
  assert.equal(first.answer.launcher_token, CENSOR);
  const second = JSON.parse(lines[1]!) as { token: string; req: { headers: { authorization: string } } };
  assert.equal(second.token, CENSOR);
  assert.equal(second.req.headers.authorization, CENSOR);
  assert.doesNotMatch(lines.join('\n'), /secret-/);
});

test('an error carrying a secret, and a raw request logged as a line, are censored after their serializers', () => {
  const { log, lines } = recordingLogger();
  const err = Object.assign(new Error('refused'), { launcher_token: 'error-secret-1', agent_tokens: { job_1: 'error-secret-2' } });
  log.error({ err }, 'with an error');
  log.error(err);
  const req = new IncomingMessage(new Socket());
  req.method = 'GET';
  req.url = '/jobs';
  req.headers = { authorization: 'Bearer raw-request-secret', host: 'example' };
  log.info(req);
  assert.equal(lines.length, 3);
  const first = JSON.parse(lines[0]!) as { err: { message: string; launcher_token: string; agent_tokens: string } };
  assert.equal(first.err.message, 'refused', 'the error itself is still logged');
  assert.equal(first.err.launcher_token, CENSOR);
  assert.equal(first.err.agent_tokens, CENSOR);
  assert.match(lines[2]!, /"\/jobs"/, 'the request is logged');
  assert.doesNotMatch(lines.join('\n'), /error-secret|raw-request-secret/);
});

test("a request's Authorization header reaches no line, even at trace", async (t) => {
  const { log, lines } = recordingLogger();
  const { c } = await startTest(t, { logLevel: 'trace' }, { logger: log });
  const res = await request(`${c.url}/jobs`, { headers: { authorization: 'Bearer header-secret-xyz' } });
  await res.body.dump();
  assert.ok(lines.some((l) => l.includes('"url":"/jobs"')), 'the request was logged');
  assert.doesNotMatch(lines.join('\n'), /header-secret-xyz/);
});
