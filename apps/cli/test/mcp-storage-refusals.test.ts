import assert from 'node:assert/strict';
import { it } from 'node:test';
import { AgentqApiError } from '@agentq/client';
import { refusalNote } from '../src/mcp/answers.js';

/*
 * A 503 storage_unavailable that is a refusal for now says why in the agent's words: PostgreSQL's
 * that says nothing was applied, that the coordinator cannot reach its database; SQLite's (a
 * change the database refused: disk full) does not claim that.
 */

it('a refusal for now of storage_unavailable says the database cannot be reached only for PostgreSQL (details.sql_state), not for SQLite (details.sqlite_code)', () => {
  const pg = refusalNote(new AgentqApiError(503, 'storage_unavailable', 'the database is unavailable: timeout', { sql_state: null, applied: false }));
  assert.match(pg?.line ?? '', /the coordinator cannot reach its database/);
  const sqlite = refusalNote(new AgentqApiError(503, 'storage_unavailable', 'the database refused the change', { sqlite_code: 'SQLITE_FULL' }));
  assert.equal(sqlite?.data?.['outcome'], 'refused');
  assert.doesNotMatch(sqlite?.line ?? '', /cannot reach its database/);
});
