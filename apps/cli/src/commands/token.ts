import { createHash, randomBytes } from 'node:crypto';
import { Roles, TOKEN_NAME_PATTERN, type CliTokenCreated, type Role } from '@agentq/protocol';
import { Option, type Command } from 'commander';
import { UsageError } from '../errors.js';
import type { Act } from '../program.js';

/** Random bytes in a token: 256 bits, so guessing is hopeless and a fast hash is enough. */
const TOKEN_BYTES = 32;
/** A recognisable prefix, so a leaked token is easy to spot (and for secret scanners). */
const TOKEN_PREFIX = 'aq_';

/** A new secret and the coordinator's token-file line for it: `NAME ROLE SHA256HEX`. */
export function createToken(name: string, role: Role): CliTokenCreated {
  const token = `${TOKEN_PREFIX}${randomBytes(TOKEN_BYTES).toString('base64url')}`;
  const hash = createHash('sha256').update(token, 'utf8').digest('hex');
  return { name, role, token, line: `${name} ${role} ${hash}` };
}

/**
 * `agentq token create <name> --role <role>`: made here, never sent anywhere. The coordinator
 * keeps only the hash (in AUTH_TOKENS_FILE), so the secret is printed once and cannot be shown
 * again: a lost token is replaced, not recovered.
 */
export function registerToken(program: Command, act: Act): void {
  const token = act.group(program, 'token', 'make tokens for a coordinator with auth on');
  token
    .command('create')
    .summary("print a new secret token and the line to add to the coordinator's token file")
    .argument('<name>', 'who or what uses it (recorded as created_by on what it creates)')
    .addOption(new Option('--role <role>', 'what it may do').choices(Roles).makeOptionMandatory())
    .addHelpText(
      'after',
      `
Roles: admin (everything), client (create, read, wait, stop jobs and sessions), reader
(read only, for dashboards), launcher (register and run jobs). The secret is shown once;
the coordinator stores only its SHA-256. Add the line to AUTH_TOKENS_FILE and send the
coordinator SIGHUP (or restart it); give the secret to its user as AGENTQ_TOKEN.`,
    )
    .action(
      act(async (_ctx, cmd) => {
        const [name] = cmd.processedArgs as [string];
        const { role } = cmd.opts<{ role: Role }>();
        // the coordinator's rule for names in the token file: a line it would refuse is no use
        if (!TOKEN_NAME_PATTERN.test(name)) {
          throw new UsageError(
            `token name '${name}' must be 1-64 characters: letters, digits and _ . @ : - (starting with a letter or digit)`,
          );
        }
        const data = createToken(name, role);
        const text = () =>
          [
            `token for ${data.name} (role ${data.role}); it is shown only now:`,
            `  ${data.token}`,
            '',
            "add this line to the coordinator's AUTH_TOKENS_FILE, then send it SIGHUP:",
            `  ${data.line}`,
            '',
            'its user passes it as AGENTQ_TOKEN or --token.',
          ].join('\n');
        return { data, exitCode: 0, text };
      }),
    );
}
