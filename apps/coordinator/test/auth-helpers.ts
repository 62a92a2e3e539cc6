import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { AgentqClient } from '@agentq/client';
import { Roles, type Job, type Role } from '@agentq/protocol';
import type { AppDeps } from '../src/app.js';
import type { CoordinatorConfig } from '../src/config.js';
import { hashSecret } from '../src/http/auth/tokens.js';
import { startCoordinator, type RunningCoordinator } from '../src/start.js';
import { closeAfter, tempDir as tempDirOf } from './helpers.js';

/** A temporary directory, removed once the test's coordinators have closed (helpers.ts). */
export const tempDir = (t: TestContext): string => tempDirOf(t, 'agentq-auth-test-');

/** A new random secret, as `agentq token create` makes them. */
export const newSecret = () => randomBytes(32).toString('base64url');

/** Token file text for these named tokens: `NAME ROLE SHA256HEX` lines. */
export function tokenFileText(tokens: ReadonlyArray<{ name: string; role: Role; secret: string }>): string {
  return ['# written by a test', ...tokens.map((x) => `${x.name} ${x.role} ${hashSecret(x.secret)}`), ''].join('\n');
}

/** One token per role (named after it), written to a token file in `dir`. */
export function writeRoleTokens(dir: string): { file: string; secrets: Record<Role, string> } {
  const secrets = Object.fromEntries(Roles.map((r) => [r, newSecret()])) as Record<Role, string>;
  const file = join(dir, 'tokens');
  writeFileSync(file, tokenFileText(Roles.map((role) => ({ name: `${role}-token`, role, secret: secrets[role] }))));
  return { file, secrets };
}

export interface AuthTest {
  c: RunningCoordinator;
  file: string;
  secrets: Record<Role, string>;
  /** a client per role, each with that role's token */
  as: Record<Role, AgentqClient>;
  /** a client with no token */
  anonymous: AgentqClient;
  /** a client with this token (closed with the test) */
  withToken(token: string | undefined): AgentqClient;
}

/** A coordinator with authentication on (a token per role) and clients for each role. */
export async function startAuthTest(
  t: TestContext,
  overrides: Partial<CoordinatorConfig> = {},
  deps: AppDeps = {},
): Promise<AuthTest> {
  const { file, secrets } = writeRoleTokens(tempDir(t));
  // closed first: closing it answers parked waits, which the clients' close would wait out
  const c = closeAfter(t, await startCoordinator({ pollTimeoutSeconds: 5, authTokensFile: file, ...overrides }, deps));
  const clients: AgentqClient[] = [];
  const withToken = (token: string | undefined) => {
    const client = new AgentqClient({ url: c.url, ...(token ? { token } : {}), overloadRetries: 0 });
    clients.push(client);
    return client;
  };
  t.after(() => Promise.all(clients.map((x) => x.close())));
  const as = Object.fromEntries(Roles.map((r) => [r, withToken(secrets[r])])) as Record<Role, AgentqClient>;
  return { c, file, secrets, as, anonymous: withToken(undefined), withToken };
}

/** A launcher registered with the launcher-role token, acting with its own credential. */
export async function credentialedLauncher(a: AuthTest, hostname = 'test-host') {
  const reg = await a.as.launcher.register({ hostname, executor_type: 'test' });
  if (!reg.launcher_token) throw new Error('registration answered no launcher_token');
  const client = a.withToken(reg.launcher_token);
  const id = reg.launcher_id;
  return {
    id,
    token: reg.launcher_token,
    client,
    poll: (capacity = 1) => client.poll(id, { capacity, holdSeconds: reg.poll_timeout_seconds }),
    /** poll until the coordinator hands out `jobId` (other jobs it hands out first are completed) */
    async claim(jobId: string): Promise<Job> {
      for (;;) {
        const answer = await client.poll(id, { capacity: 1, holdSeconds: reg.poll_timeout_seconds });
        const job = answer?.job;
        if (!job) continue;
        if (job.job_id === jobId) return job;
        await client.reportCompleted(job.job_id, { launcher_id: id });
      }
    },
  };
}
export type CredentialedLauncher = Awaited<ReturnType<typeof credentialedLauncher>>;
