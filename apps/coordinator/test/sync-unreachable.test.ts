import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/config.js';

test('DATABASE_CONNECT_TIMEOUT_MS sets how long a connection to PostgreSQL may take (30 s by default)', () => {
  assert.equal(loadConfig({}).databaseConnectTimeoutMs, 30_000);
  assert.equal(loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '5000' }).databaseConnectTimeoutMs, 5000);
  assert.throws(() => loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '0' }), (e: Error) => e instanceof ConfigError && e.variable === 'DATABASE_CONNECT_TIMEOUT_MS');
});
