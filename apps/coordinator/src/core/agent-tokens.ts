import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { JobRow } from './rows.js';
import { isActive } from './rows.js';
import type { Tx } from './store/store.js';

/*
 * Per-job agent tokens (issue 12): with authentication on, every job handed to a launcher comes
 * with a token of its own, which the launcher gives the job's executor (AGENTQ_TOKEN) and so the
 * agent's `agentq mcp`. It may only act on the job's session and the sessions below it (the
 * scope is checked per route by http/auth/agent-scope.ts), and only while the job is active.
 *
 * `agt_<job_id>.<secret>`: the job id lets the coordinator find the one hash to compare; the
 * secret (32 random bytes, base64url) is compared in constant time. Only its SHA-256 is kept, on
 * the job's row (`agentTokenHash`); a new claim of the same job (after a requeue) mints a new one,
 * so a token given out with an answer that never arrived is worthless.
 */

const SHAPE = /^agt_(job_[0-9a-f]{12})\.([A-Za-z0-9_-]{20,200})$/;

const sha256 = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/**
 * The turn an agent token acts for: its job, and the hash of the token, since a job requeued and
 * claimed again is a new turn with a new token (the old one must not act for it).
 */
export interface Turn {
  readonly jobId: string;
  readonly tokenHash: string;
}

/** The job id an agent token claims to belong to, when it has the shape of one. */
export function agentTokenJobId(token: string): string | undefined {
  return SHAPE.exec(token)?.[1];
}

/** Whether jobs get agent tokens: only with authentication on (with it off, no token is needed). */
export const agentTokensEnabled = (config: { authTokensFile: string | null }): boolean => config.authTokensFile !== null;

/** Mint a token for a job being handed out (in the claim's transaction). Returns the token, shown once. */
export async function mintAgentToken(tx: Tx, job: JobRow): Promise<string> {
  const secret = randomBytes(32).toString('base64url');
  await tx.updateJob(job.id, { agentTokenHash: sha256(secret).toString('hex') });
  return `agt_${job.id}.${secret}`;
}

/**
 * The job a token is valid for: its hash matches the job's current one and the job is still
 * active (claimed, running or stopping). `undefined` otherwise: a token dies with its job.
 */
export function verifyAgentToken(token: string, job: JobRow | undefined): JobRow | undefined {
  const m = SHAPE.exec(token);
  if (!m || !job || job.id !== m[1] || job.agentTokenHash === null || job.agentTokenHash.length !== 64) return undefined;
  const matches = timingSafeEqual(Buffer.from(job.agentTokenHash, 'hex'), sha256(m[2]!));
  return matches && isActive(job.status) ? job : undefined;
}
