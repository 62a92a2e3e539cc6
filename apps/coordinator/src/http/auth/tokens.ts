import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Roles, TOKEN_NAME_PATTERN, type Role } from '@agentq/protocol';

/**
 * The token file (`AUTH_TOKENS_FILE`): one token per line, `NAME ROLE SHA256HEX`, separated by
 * spaces or tabs; `#` starts a comment. The file holds the SHA-256 of each secret, never the
 * secret: whoever reads it cannot call the API. The name is what audit fields (`created_by`,
 * `stopped_by`) and logs show.
 *
 *   # name        role      sha256 of the secret
 *   ci-bot        client    9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
 */
export interface TokenEntry {
  readonly name: string;
  readonly role: Role;
  /** the 32-byte SHA-256 of the secret */
  readonly hash: Buffer;
}

/** A line of the token file that is wrong; the coordinator refuses to start (or keeps its tokens on reload). */
export class TokenFileError extends Error {
  override readonly name = 'TokenFileError';
}

const HEX = /^[0-9a-fA-F]{64}$/;

/** The hex SHA-256 of a secret: what the token file holds. */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Parse the token file's text; `source` names it in errors (`path line N: ...`). */
export function parseTokenFile(text: string, source: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const names = new Set<string>();
  const hashes = new Set<string>();
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    const where = `${source} line ${i + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 3) {
      throw new TokenFileError(`${where}: expected "NAME ROLE SHA256HEX", got ${fields.length} field(s)`);
    }
    const [name, role, hex] = fields as [string, string, string];
    if (!TOKEN_NAME_PATTERN.test(name)) {
      throw new TokenFileError(`${where}: name ${JSON.stringify(name)} must be 1-64 letters, digits or _ . @ : - (starting with a letter or digit)`);
    }
    if (!(Roles as readonly string[]).includes(role)) {
      throw new TokenFileError(`${where}: role ${JSON.stringify(role)} is not one of ${Roles.join(', ')}`);
    }
    if (!HEX.test(hex)) {
      throw new TokenFileError(`${where}: the third field must be the 64-hex-digit SHA-256 of the secret, not the secret itself`);
    }
    if (names.has(name)) throw new TokenFileError(`${where}: the name ${name} is used twice`);
    const lower = hex.toLowerCase();
    if (hashes.has(lower)) throw new TokenFileError(`${where}: the same secret is listed twice`);
    names.add(name);
    hashes.add(lower);
    entries.push({ name, role: role as Role, hash: Buffer.from(lower, 'hex') });
  });
  return entries;
}

/**
 * The tokens in force. `reload()` re-reads the file (SIGHUP); a bad file leaves the current
 * tokens in place, so a typo cannot lock everyone out of a running coordinator.
 */
export class TokenStore {
  readonly path: string;
  #entries: readonly TokenEntry[];

  /** Read `path` now; throws TokenFileError (or the read error) when it is unusable. */
  constructor(path: string) {
    this.path = path;
    this.#entries = TokenStore.#read(path);
  }

  get size(): number {
    return this.#entries.length;
  }

  /** The names and roles in force (never the hashes), for logs. */
  get summary(): Array<{ name: string; role: Role }> {
    return this.#entries.map(({ name, role }) => ({ name, role }));
  }

  reload(): { added: string[]; removed: string[]; count: number } {
    const next = TokenStore.#read(this.path);
    const before = new Set(this.#entries.map((e) => `${e.name} ${e.role} ${e.hash.toString('hex')}`));
    const after = new Set(next.map((e) => `${e.name} ${e.role} ${e.hash.toString('hex')}`));
    const name = (key: string) => key.split(' ')[0]!;
    const added = [...after].filter((k) => !before.has(k)).map(name);
    const removed = [...before].filter((k) => !after.has(k)).map(name);
    this.#entries = next;
    return { added, removed, count: next.length };
  }

  /** Whether a token of this name is in force with this role. */
  hasNamed(name: string, role: Role): boolean {
    return this.#entries.some((e) => e.name === name && e.role === role);
  }

  /** Whether `entry` (from an earlier `verify`) is still in force with the same role. */
  holds(entry: TokenEntry): boolean {
    return this.#entries.some((e) => e.role === entry.role && e.hash.equals(entry.hash));
  }

  /**
   * The entry whose secret this is. Every entry is compared, in constant time and without an
   * early exit, so the answer's timing says nothing about which hash (or how much of it) matched.
   */
  verify(secret: string): TokenEntry | undefined {
    const digest = createHash('sha256').update(secret, 'utf8').digest();
    let found: TokenEntry | undefined;
    for (const entry of this.#entries) {
      if (timingSafeEqual(entry.hash, digest) && found === undefined) found = entry;
    }
    return found;
  }

  static #read(path: string): TokenEntry[] {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      throw new TokenFileError(`cannot read ${path}: ${(err as Error).message}`, { cause: err });
    }
    return parseTokenFile(text, path);
  }
}
