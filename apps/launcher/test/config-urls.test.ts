import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/index.js';

const load = (argv: string[], env: Record<string, string> = {}) => {
  const r = loadConfig(argv, env);
  if (r.help) throw new Error('unexpected help');
  return r.config;
};

test('--url and AGENTQ_URL take a comma list of coordinators (one database, several coordinators)', () => {
  assert.equal(load(['--url', ' http://a:8765/, https://b:8765 ']).url, 'http://a:8765,https://b:8765');
  assert.equal(load([], { AGENTQ_URL: 'http://a:1,http://b:2' }).url, 'http://a:1,http://b:2');
  assert.equal(load(['--url', 'http://a:1/']).url, 'http://a:1');
});

test('every URL of the list must be http(s): the error names the option', () => {
  assert.throws(() => load(['--url', 'http://a:1,ftp://b']), (e: unknown) => e instanceof ConfigError && /--url/.test(e.message) && /ftp:\/\/b/.test(e.message));
  assert.throws(() => load([], { AGENTQ_URL: 'http://a:1,not a url' }), (e: unknown) => e instanceof ConfigError && /AGENTQ_URL/.test(e.message));
  assert.throws(() => load(['--url', ' , ']), ConfigError);
});

test('a coordinator URL with a user name or password is a configuration error naming the option, without the password', () => {
  assert.throws(
    () => load(['--url', 'http://ops:s3cret@a:8765']),
    (e: unknown) => e instanceof ConfigError && /--url/.test(e.message) && /without a user name or password/.test(e.message) && !/s3cret/.test(e.message),
  );
});

test('a coordinator URL with a path or query is a configuration error naming the option, not a crash at registration', () => {
  const names = (from: string) => (e: unknown) => e instanceof ConfigError && e.message.includes(from) && /no path or query/.test(e.message);
  assert.throws(() => load(['--url', 'http://a:8765/agentq']), names('--url'));
  assert.throws(() => load(['--url', 'http://a:1,http://b:2/api']), names('--url'));
  assert.throws(() => load([], { AGENTQ_URL: 'http://a:8765?x=1' }), names('AGENTQ_URL'));
  assert.throws(() => load([], { AGENTQ_URL: 'http://a:8765#top' }), names('AGENTQ_URL'));
});
