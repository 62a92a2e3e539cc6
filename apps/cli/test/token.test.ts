import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { AgentqApiError, AgentqAuthError } from '@agentq/client';
import {
  CliCommandData,
  CliEnvelope,
  CliFailure,
  type CliFailure as Failure,
  type CliTokenCreated,
} from '@agentq/protocol';
import { toCliFailure } from '../src/index.js';
import { cli, coordinator, deadUrl, envelope } from './helpers.js';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

describe('agentq token create', () => {
  it('prints a new secret and the token-file line NAME ROLE SHA256HEX; needs no coordinator', async () => {
    const url = await deadUrl();
    const r = await cli(url, ['token', 'create', 'ci-bot', '--role', 'client', '--json']);
    assert.equal(r.code, 0, r.stdout);
    const data = envelope<{ ok: true; data: CliTokenCreated }>(r, CliEnvelope(CliCommandData.token_create)).data;
    assert.equal(data.name, 'ci-bot');
    assert.equal(data.role, 'client');
    assert.match(data.token, /^aq_[A-Za-z0-9_-]{43}$/);
    assert.equal(data.line, `ci-bot client ${sha256(data.token)}`);

    const again = envelope<{ ok: true; data: CliTokenCreated }>(
      await cli(url, ['token', 'create', 'ci-bot', '--role', 'client', '--json']),
      CliEnvelope(CliCommandData.token_create),
    ).data;
    assert.notEqual(again.token, data.token, 'a new secret every time');

    const text = await cli(url, ['token', 'create', 'dash', '--role', 'reader']);
    const secret = /^ {2}(aq_\S+)$/m.exec(text.stdout)?.[1] as string;
    assert.ok(text.stdout.includes(`  dash reader ${sha256(secret)}\n`), text.stdout);
    assert.equal(text.stdout.split(secret).length - 1, 1, 'the secret is printed once');
  });

  it('takes only the four roles and names the file can hold', async () => {
    const url = await deadUrl();
    const badRole = await cli(url, ['token', 'create', 'x', '--role', 'root', '--json']);
    assert.equal(badRole.code, 2);
    assert.match(
      envelope<Failure>(badRole, CliFailure).error.message,
      /Allowed choices are admin, client, reader, launcher/,
    );
    const noRole = await cli(url, ['token', 'create', 'x', '--json']);
    assert.equal(noRole.code, 2);
    assert.match(envelope<Failure>(noRole, CliFailure).error.message, /--role <role>' not specified/);
    const badName = await cli(url, ['token', 'create', 'two words', '--role', 'admin', '--json']);
    assert.equal(badName.code, 2);
    assert.match(envelope<Failure>(badName, CliFailure).error.message, /1-64 characters/);
    // names the token file refuses are refused here too, not printed as a line the coordinator rejects
    for (const name of ['ci/bot', '_x', 'é', 'n'.repeat(65)]) {
      const refused = await cli(url, ['token', 'create', name, '--role', 'reader', '--json']);
      assert.equal(refused.code, 2, name);
    }
    const longest = await cli(url, ['token', 'create', `a${'b'.repeat(63)}`, '--role', 'reader', '--json']);
    assert.equal(longest.code, 0, longest.stderr);
  });
});

describe('a token that cannot be sent (a typographic quote pasted in, a line break)', () => {
  it('is exit 2 at once, without the token in the message: not "coordinator unreachable" after retries', async (t: TestContext) => {
    const { url } = await coordinator(t);
    for (const token of ['aq_abc\u201d', 'aq_abc\ndef']) {
      for (const argv of [
        ['start', 'quoted', '-p', 'hi', '--json'],
        ['list', '--json'],
      ]) {
        const r = await cli(`${url},${url}`, argv, { env: { AGENTQ_TOKEN: token } });
        assert.equal(r.code, 2, `${argv[0]}: ${r.stdout}`);
        const error = envelope<Failure>(r, CliFailure).error;
        assert.equal(error.code, 'usage_error');
        assert.match(error.message, /token cannot be sent/);
        assert.ok(!r.stdout.includes('aq_abc') && !r.stderr.includes('aq_abc'), 'the token is not printed');
      }
    }
  });
});

describe('an empty token', () => {
  it('--token "" is a usage error (exit 2), not "no token" hiding AGENTQ_TOKEN; an empty AGENTQ_TOKEN is unset', async (t: TestContext) => {
    const dir = await mkdtemp(join(tmpdir(), 'agentq-cli-token-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = join(dir, 'tokens');
    const secret = 'aq_the-right-one';
    await writeFile(file, `admin admin ${sha256(secret)}\n`);
    const { url } = await coordinator(t, { authTokensFile: file });

    // `--token "$TOKEN"` with TOKEN unset: said as such, before anything is sent
    for (const flag of ['', ' ']) {
      const r = await cli(url, ['list', '--token', flag, '--json'], { env: { AGENTQ_TOKEN: secret } });
      assert.equal(r.code, 2, r.stdout);
      const error = envelope<Failure>(r, CliFailure).error;
      assert.equal(error.code, 'usage_error', error.message);
      assert.match(error.message, /--token .* is empty/);
    }
    const text = await cli(url, ['status', 'job_0123456789ab', '--token', ''], { env: { AGENTQ_TOKEN: secret } });
    assert.equal(text.code, 2);
    assert.match(text.stderr, /^agentq: option '--token <token>' argument '' is invalid\. it is empty/);

    // the variable empty: no token, as every empty AGENTQ_* variable counts as unset
    const unset = await cli(url, ['list', '--json'], { env: { AGENTQ_TOKEN: '' } });
    assert.equal(unset.code, 2);
    assert.equal(envelope<Failure>(unset, CliFailure).error.code, 'unauthorized');
    const flagWins = await cli(url, ['list', '--json', '--token', secret], { env: { AGENTQ_TOKEN: '' } });
    assert.equal(flagWins.code, 0, flagWins.stdout);
  });
});

describe('a coordinator that refuses the request (401/403)', () => {
  it('is exit 2 with a message that says what to do', () => {
    const missing = toCliFailure(new AgentqApiError(401, 'unauthorized', 'missing bearer token'));
    assert.equal(missing.exitCode, 2);
    assert.equal(missing.error.code, 'unauthorized');
    assert.match(
      missing.error.message,
      /^the coordinator refused the request: missing bearer token; .*--token or AGENTQ_TOKEN/,
    );

    const forbidden = toCliFailure(
      new AgentqApiError(403, 'forbidden', 'role reader may not POST /jobs', { role: 'reader' }),
    );
    assert.equal(forbidden.exitCode, 2);
    assert.equal(forbidden.error.code, 'forbidden');
    assert.match(forbidden.error.message, /refused the request: role reader may not POST \/jobs; this token's role/);
    assert.deepEqual(forbidden.error.details, { role: 'reader' });

    // an agent token inside a job is refused for its scope: no word of roles
    const agent = toCliFailure(
      new AgentqAuthError(403, 'forbidden', 'an agent token may not call GET /launchers', { agent_session_name: 'lead', session_name: 'lead' }),
    );
    assert.equal(agent.exitCode, 2);
    assert.doesNotMatch(agent.error.message, /role/, agent.error.message);
    assert.match(agent.error.message, /agent token acts only on its own session and the sessions below it/);

    // the client's own refusal error says once who refused
    const unknown = toCliFailure(new AgentqAuthError(401, 'unauthorized', 'the token is not valid'));
    assert.equal(
      unknown.error.message.match(/the coordinator refused the request/g)?.length,
      1,
      unknown.error.message,
    );
    assert.match(unknown.error.message, /^the coordinator refused the request: no valid token \(the token is not valid\); .*--token or AGENTQ_TOKEN/);
  });

  it('other refusals keep their exit codes: session_closed 2, job_not_found 5, 5xx 1', () => {
    assert.equal(toCliFailure(new AgentqApiError(409, 'session_closed', 'closed')).exitCode, 2);
    assert.equal(toCliFailure(new AgentqApiError(404, 'job_not_found', 'x')).exitCode, 5);
    assert.equal(toCliFailure(new AgentqApiError(503, 'overloaded', 'x')).exitCode, 1);
  });
});
