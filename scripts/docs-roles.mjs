#!/usr/bin/env node
// Writes the role table of docs/operations.md from the code (ROUTE_ACCESS in
// apps/coordinator/src/http/auth/route-access.ts): `npm run docs:roles`. A test fails while the
// docs and the code disagree.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { renderRoleTable } from '../apps/coordinator/dist/src/index.js';

const file = fileURLToPath(new URL('../docs/operations.md', import.meta.url));
const START = '<!-- role-table:start (npm run docs:roles) -->';
const END = '<!-- role-table:end -->';
const text = readFileSync(file, 'utf8');
const from = text.indexOf(START);
const to = text.indexOf(END);
if (from < 0 || to < from) {
  console.error(`docs/operations.md has no ${START} ... ${END} markers`);
  process.exit(1);
}
writeFileSync(file, `${text.slice(0, from + START.length)}\n${renderRoleTable()}\n${text.slice(to)}`);
console.log('docs/operations.md: role table written');
