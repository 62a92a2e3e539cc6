import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { renderAgentTable } from '../src/http/auth/agent-scope.js';
import { accessOf, PUBLIC_PREFIXES, renderRoleTable } from '../src/http/auth/route-access.js';

const OPERATIONS = fileURLToPath(new URL('../../../../docs/operations.md', import.meta.url));

test('the role table in docs/operations.md is the one the code enforces (npm run docs:roles rewrites it)', () => {
  const text = readFileSync(OPERATIONS, 'utf8');
  const start = text.indexOf('<!-- role-table:start (npm run docs:roles) -->');
  const end = text.indexOf('<!-- role-table:end -->');
  assert.ok(start >= 0 && end > start, 'docs/operations.md has the role table markers');
  const inDocs = text.slice(text.indexOf('\n', start) + 1, end).trim();
  assert.equal(inDocs, renderRoleTable(), 'docs/operations.md disagrees with ROUTE_ACCESS: run `npm run docs:roles`');
});

test('the agent-token table in docs/operations.md is the one the code enforces (npm run docs:roles rewrites it)', () => {
  const text = readFileSync(OPERATIONS, 'utf8');
  const start = text.indexOf('<!-- agent-table:start (npm run docs:roles) -->');
  const end = text.indexOf('<!-- agent-table:end -->');
  assert.ok(start >= 0 && end > start, 'docs/operations.md has the agent table markers');
  const inDocs = text.slice(text.indexOf('\n', start) + 1, end).trim();
  assert.equal(inDocs, renderAgentTable(), 'docs/operations.md disagrees with AGENT_ACCESS: run `npm run docs:roles`');
});

test('the role table says what each public prefix serves: /assets is the dashboard, /docs the API reference', () => {
  const rows = renderRoleTable().split('\n');
  for (const prefix of PUBLIC_PREFIXES) {
    const row = rows.find((r) => r.startsWith(`| GET | \`${prefix}\`, `));
    assert.ok(row, `a row for ${prefix}`);
    const summary = accessOf('GET', `${prefix}/x`)?.summary;
    assert.ok(summary, `${prefix}/x has an access entry`);
    assert.ok(row.endsWith(`| ${summary} |`), `${row} ends with ${summary}`);
  }
  assert.equal(accessOf('GET', '/assets/app.js')?.summary, 'dashboard (static files)');
});
