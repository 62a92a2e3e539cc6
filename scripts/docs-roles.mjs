#!/usr/bin/env node
// Writes the role table and the agent-token table of docs/operations.md from the code
// (ROUTE_ACCESS in apps/coordinator/src/http/auth/route-access.ts, AGENT_ACCESS in
// agent-scope.ts): `npm run docs:roles`. A test fails while the docs and the code disagree.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderAgentTable, renderRoleTable } from '../apps/coordinator/dist/src/index.js';

const file = fileURLToPath(new URL('../docs/operations.md', import.meta.url));
let text = readFileSync(file, 'utf8');
for (const [name, render] of [
  ['role-table', renderRoleTable],
  ['agent-table', renderAgentTable],
]) {
  const START = `<!-- ${name}:start (npm run docs:roles) -->`;
  const END = `<!-- ${name}:end -->`;
  const from = text.indexOf(START);
  const to = text.indexOf(END);
  if (from < 0 || to < from) {
    console.error(`docs/operations.md has no ${START} ... ${END} markers`);
    process.exit(1);
  }
  text = `${text.slice(0, from + START.length)}\n${render()}\n${text.slice(to)}`;
}
writeFileSync(file, text);
console.log('docs/operations.md: role table and agent-token table written');
