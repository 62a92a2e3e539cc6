#!/usr/bin/env node
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Roles, type Role } from '@agentq/protocol';
import { hashSecret } from './http/auth/tokens.js';

/**
 * First-run token provisioning for containers (docker-compose.yml runs it before the
 * coordinator): makes a random secret per `NAME:ROLE`, writes each secret to its own file
 * (mode 0600; `NAME:ROLE=PATH` chooses the path, default DIR/NAME.token) and the token file
 * DIR/tokens with their hashes. Does nothing when DIR/tokens exists: the tokens of a deployment
 * are made once, then managed by editing the file (and SIGHUP).
 *
 *   node apps/coordinator/dist/src/bootstrap-tokens.js /var/lib/agentq-auth admin:admin launcher:launcher=/x/launcher.token
 */
function main(argv: string[]): number {
  const [dir, ...specs] = argv;
  if (!dir || specs.length === 0) {
    process.stderr.write('usage: bootstrap-tokens DIR NAME:ROLE[=SECRET_FILE] ...\n');
    return 2;
  }
  const file = join(dir, 'tokens');
  if (existsSync(file)) {
    process.stdout.write(`${file} exists: tokens already made, nothing to do\n`);
    return 0;
  }
  const tokens: Array<{ name: string; role: Role; path: string }> = [];
  for (const spec of specs) {
    const m = /^([A-Za-z0-9][A-Za-z0-9_.@:-]{0,63}):([a-z]+)(?:=(.+))?$/.exec(spec);
    if (!m || !(Roles as readonly string[]).includes(m[2]!)) {
      process.stderr.write(`bad token spec ${JSON.stringify(spec)}: expected NAME:ROLE[=PATH], ROLE one of ${Roles.join(', ')}\n`);
      return 2;
    }
    tokens.push({ name: m[1]!, role: m[2] as Role, path: m[3] ?? join(dir, `${m[1]}.token`) });
  }
  const lines = ['# NAME ROLE SHA256HEX (made by bootstrap-tokens; edit, then send the coordinator SIGHUP)'];
  for (const t of tokens) {
    const secret = randomBytes(32).toString('base64url');
    mkdirSync(dirname(t.path), { recursive: true });
    writeFileSync(t.path, `${secret}\n`, { mode: 0o600 });
    lines.push(`${t.name} ${t.role} ${hashSecret(secret)}`);
    process.stdout.write(`token ${t.name} (${t.role}): secret in ${t.path}\n`);
  }
  mkdirSync(dir, { recursive: true });
  // written last: its existence means every secret file is in place
  writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o644 });
  process.stdout.write(`token file ${file} written\n`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
