import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Per-launcher credentials: `POST /launcher/register` issues one (`launcher_token`), and every
 * later launcher call carries it. A credential names its launcher, so it works for that
 * launcher's id only: a stolen launcher id is not enough to poll or report.
 *
 * The storage is behind this interface so it can move into the durable store (then launchers
 * keep their credential across a coordinator restart, as they keep their id).
 */
export interface LauncherCredentials {
  /** A new secret credential for the launcher (replacing any earlier one). Shown to the launcher once. */
  issue(launcherId: string, registeredBy: string | null): string;
  /** The launcher a credential belongs to; undefined when it is not (or no longer) valid. */
  verify(token: string): string | undefined;
  /** Forget the launcher's credential (the launcher was removed). */
  revoke(launcherId: string): void;
}

/**
 * `lnch_<12 hex>.<secret>`: the launcher id, then 32 random bytes in base64url. The id part lets
 * the coordinator find the one entry to compare; the secret is compared in constant time.
 */
const SHAPE = /^(lnch_[0-9a-f]{12})\.([A-Za-z0-9_-]{20,200})$/;

/** The launcher id a token claims to belong to, if it has the shape of a launcher credential. */
export function launcherIdOf(token: string): string | undefined {
  return SHAPE.exec(token)?.[1];
}

interface Entry {
  /** SHA-256 of the secret part: the store never keeps a usable secret */
  hash: Buffer;
  registeredBy: string | null;
}

/** In memory: credentials are lost when the coordinator restarts (launchers then register again). */
export class MemoryLauncherCredentials implements LauncherCredentials {
  readonly #entries = new Map<string, Entry>();

  issue(launcherId: string, registeredBy: string | null): string {
    const secret = randomBytes(32).toString('base64url');
    this.#entries.set(launcherId, { hash: sha256(secret), registeredBy });
    return `${launcherId}.${secret}`;
  }

  verify(token: string): string | undefined {
    const m = SHAPE.exec(token);
    if (!m) return undefined;
    const entry = this.#entries.get(m[1]!);
    if (!entry) return undefined;
    return timingSafeEqual(entry.hash, sha256(m[2]!)) ? m[1] : undefined;
  }

  revoke(launcherId: string): void {
    this.#entries.delete(launcherId);
  }
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();
