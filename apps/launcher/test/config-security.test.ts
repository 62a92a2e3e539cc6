import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { buildExecutorEnv } from '../src/executor-env.js';
import { ConfigError, helpText, loadConfig } from '../src/index.js';
import { tempDir } from './helpers.js';
import { makeCertificate } from './security-helpers.js';

const load = (argv: string[], env: Record<string, string> = {}) => {
  const r = loadConfig(argv, env);
  if (r.help) throw new Error('unexpected help');
  return r.config;
};

test('the registration token comes from --token-file, else AGENTQ_TOKEN, else AGENTQ_TOKEN_FILE; none is fine (open coordinator)', (t) => {
  const dir = tempDir(t);
  const flagFile = join(dir, 'a.token');
  const envFile = join(dir, 'b.token');
  writeFileSync(flagFile, 'from-flag-file\n');
  writeFileSync(envFile, '  from-env-file  \n');
  assert.equal(load([]).token, undefined);
  assert.equal(load([], { AGENTQ_TOKEN: 'direct' }).token, 'direct');
  assert.equal(load([], { AGENTQ_TOKEN_FILE: envFile }).token, 'from-env-file');
  assert.equal(load([], { AGENTQ_TOKEN: 'direct', AGENTQ_TOKEN_FILE: envFile }).token, 'direct');
  assert.equal(load(['--token-file', flagFile], { AGENTQ_TOKEN: 'direct' }).token, 'from-flag-file');
});

test('a token file that cannot be read, or holds more than a token, is a config error naming the option', (t) => {
  const dir = tempDir(t);
  assert.throws(() => load(['--token-file', join(dir, 'missing')]), (e: Error) => e instanceof ConfigError && e.option === '--token-file' && /cannot read the token file/.test(e.message));
  const two = join(dir, 'two');
  writeFileSync(two, 'alice admin 1234\n');
  assert.throws(() => load([], { AGENTQ_TOKEN_FILE: two }), (e: Error) => e instanceof ConfigError && e.option === 'AGENTQ_TOKEN_FILE' && /the token alone/.test(e.message));
});

test('--ca-file / AGENTQ_CA_FILE must be readable and hold a certificate', async (t) => {
  const dir = tempDir(t);
  const { certFile: ca, keyFile } = await makeCertificate(dir);
  assert.equal(load(['--ca-file', ca]).caFile, ca);
  assert.equal(load([], { AGENTQ_CA_FILE: ca }).caFile, ca);
  assert.throws(() => load(['--ca-file', join(dir, 'nope.pem')]), /--ca-file: cannot read/);
  // the key given by mistake: TLS would skip it, and the launcher retry a "self-signed" coordinator for ever
  assert.throws(
    () => load(['--ca-file', keyFile]),
    (e: Error) => e instanceof ConfigError && e.option === '--ca-file' && e.message.includes(`the CA file ${keyFile} holds no PEM certificate`),
  );
  const cut = join(dir, 'cut.pem');
  writeFileSync(cut, '-----BEGIN CERTIFICATE-----\n');
  assert.throws(() => load([], { AGENTQ_CA_FILE: cut }), (e: Error) => e instanceof ConfigError && e.option === 'AGENTQ_CA_FILE' && /holds no PEM certificate/.test(e.message));
  assert.match(helpText(), /--token-file FILE/);
  assert.match(helpText(), /--ca-file FILE/);
  assert.match(helpText(), /AGENTQ_TOKEN/);
});

test('the coordinator credentials are never passed to executors, whatever --pass-env says', () => {
  assert.throws(() => load(['--pass-env', 'AGENTQ_TOKEN']), /AGENTQ_TOKEN holds the coordinator credential and is never passed to executors/);
  assert.throws(() => load([], { AGENTQ_PASS_ENV: 'HOME,AGENTQ_TOKEN_FILE' }), /AGENTQ_TOKEN_FILE holds the coordinator credential/);
  const env = buildExecutorEnv(
    { PATH: '/bin', AGENTQ_TOKEN: 'secret', AGENTQ_TOKEN_FILE: '/etc/agentq/launcher.token', MY_VAR: 'x' },
    ['AGENTQ_TOKEN', 'AGENTQ_TOKEN_FILE', 'MY_VAR'],
    {
      AGENTQ_JOB_ID: 'job_000000000000',
      AGENTQ_JOB_TYPE: 'start_session',
      AGENTQ_SESSION_NAME: 's',
      AGENTQ_PROJECT_DIR: '/tmp',
      AGENTQ_COORDINATOR_URL: 'https://coordinator:8765',
      AGENTQ_LAUNCHER_ID: 'lnch_000000000000',
      AGENTQ_EXECUTOR_SCHEMA_VERSION: '1',
    },
  );
  assert.equal(env.AGENTQ_TOKEN, undefined);
  assert.equal(env.AGENTQ_TOKEN_FILE, undefined);
  assert.equal(env.MY_VAR, 'x');
});
