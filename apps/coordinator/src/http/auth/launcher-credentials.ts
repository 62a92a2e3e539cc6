import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { REGISTRATION_CREDENTIALS_KEPT } from '../../core/launchers.js';

/**
 * Per-launcher credentials: `POST /launcher/register` issues one (`launcher_token`), and every
 * later launcher call carries it. A credential names its launcher, so it works for that
 * launcher's id only: a stolen launcher id is not enough to poll or report.
 *
 * The storage is behind this interface so it can move into the durable store (then launchers
 * keep their credential across a coordinator restart, as they keep their id).
 */
export interface LauncherCredentials {
  /**
   * A new secret credential for the launcher, shown to it once; called for each answer to a
   * registration when there is no `prepare`. A launcher answered again (a retry of its
   * registration: `registration_key`) keeps the earlier answers' credentials beside the new one
   * (a few, the newest), as the store does (LauncherRow.tokenHash): any may be the one received.
   */
  issue(launcherId: string, registeredBy: string | null): Promise<string>;
  /** The launcher a credential belongs to; undefined when it is not (or no longer) valid. */
  verify(token: string): Promise<string | undefined>;
  /**
   * A credential made before its launcher's id is known, for a store that keeps the hash on the
   * launcher's row: the registration's own transaction writes it (insert, or the answer to a
   * retry of it, beside the earlier answers' credentials), so the row holds the credential of
   * every answer given. Written afterwards (issue), the write of an answer that was lost could
   * land after its retry's and undo it. Without it, the credential is issued once the launcher is
   * registered.
   */
  prepare?(): PreparedCredential;
}

/** A credential whose hash is stored with the registration (LauncherCredentials.prepare). */
export interface PreparedCredential {
  /** SHA-256 (hex) of the secret, as `launcherTokenHash` answers it */
  readonly hash: string;
  /** the credential, once the registration has answered its launcher id */
  tokenFor(launcherId: string): string;
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
  /**
   * SHA-256 of the secret part (the store never keeps a usable secret); of each credential
   * answered for the launcher, newest first, when a registration was answered more than once
   * (a retry with its `registration_key`: LauncherRow.tokenHash)
   */
  hashes: Buffer[];
  registeredBy: string | null;
}

/**
 * The default: the hash is kept on the launcher's row in the store, so a launcher keeps its
 * credential across coordinator restarts (as it keeps its id), every coordinator sharing a
 * PostgreSQL database knows it, and it is gone with the launcher.
 */
export class StoreLauncherCredentials implements LauncherCredentials {
  constructor(
    private readonly core: {
      setLauncherTokenHash(launcherId: string, hash: string): Promise<void>;
      launcherTokenHash(launcherId: string): Promise<string | null>;
    },
  ) {}

  async issue(launcherId: string): Promise<string> {
    const prepared = this.prepare();
    await this.core.setLauncherTokenHash(launcherId, prepared.hash);
    return prepared.tokenFor(launcherId);
  }

  prepare(): PreparedCredential {
    const secret = randomBytes(32).toString('base64url');
    return { hash: sha256(secret).toString('hex'), tokenFor: (launcherId) => `${launcherId}.${secret}` };
  }

  async verify(token: string): Promise<string | undefined> {
    const m = SHAPE.exec(token);
    if (!m) return undefined;
    const stored = await this.core.launcherTokenHash(m[1]!);
    if (stored === null) return undefined;
    // one hash, or a few when a registration was answered more than once (LauncherRow.tokenHash)
    const given = sha256(m[2]!);
    let valid = false;
    for (const hash of stored.split(' ')) {
      const bytes = Buffer.from(hash, 'hex');
      if (bytes.length === given.length && timingSafeEqual(bytes, given)) valid = true;
    }
    return valid ? m[1] : undefined;
  }
}

/** In memory, beside the store (tests): lost when the coordinator restarts. */
export class MemoryLauncherCredentials implements LauncherCredentials {
  readonly #entries = new Map<string, Entry>();

  async issue(launcherId: string, registeredBy: string | null): Promise<string> {
    const secret = randomBytes(32).toString('base64url');
    // beside the credentials of the earlier answers to its registration: any may be the one received
    const earlier = this.#entries.get(launcherId)?.hashes ?? [];
    this.#entries.set(launcherId, { hashes: [sha256(secret), ...earlier].slice(0, REGISTRATION_CREDENTIALS_KEPT), registeredBy });
    return `${launcherId}.${secret}`;
  }

  async verify(token: string): Promise<string | undefined> {
    const m = SHAPE.exec(token);
    if (!m) return undefined;
    const entry = this.#entries.get(m[1]!);
    if (!entry) return undefined;
    const given = sha256(m[2]!);
    let valid = false;
    for (const hash of entry.hashes) if (timingSafeEqual(hash, given)) valid = true;
    return valid ? m[1] : undefined;
  }

  revoke(launcherId: string): void {
    this.#entries.delete(launcherId);
  }
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();
