/**
 * Several coordinators behind one client (`--url http://a:8765,http://b:8765`, or AGENTQ_URL
 * with commas): requests go to the current URL; when one cannot be reached, the client moves on
 * to the next (round robin), so launchers and the CLI keep working while a coordinator is down.
 * Coordinators sharing one PostgreSQL database serve the same state, so any of them will do.
 */
export class Endpoints {
  readonly urls: readonly string[];
  #current = 0;

  constructor(urls: string | readonly string[]) {
    this.urls = typeof urls === 'string' ? splitUrls(urls) : urls.map(trimUrl).filter(Boolean);
    if (this.urls.length === 0) throw new Error('no coordinator URL given');
  }

  get current(): string {
    return this.urls[this.#current]!;
  }

  /** `url` could not be reached: unless the client already moved on, the next URL is current. */
  failed(url: string): string {
    if (this.urls.length > 1 && this.current === url) this.#current = (this.#current + 1) % this.urls.length;
    return this.current;
  }
}

const trimUrl = (url: string): string => url.trim().replace(/\/+$/, '');

/** `a, b,c` -> ['a', 'b', 'c'] (empty items dropped, trailing slashes removed). */
export function splitUrls(value: string): string[] {
  return value.split(',').map(trimUrl).filter(Boolean);
}

/**
 * What keeps `url` from being a coordinator's address, if anything (null: nothing), checked in
 * this order: not a URL; not http(s); a user name or password (never sent: the token goes in a
 * header, and it would be printed back with the URL); a path, query or fragment (every request
 * goes from the root: a prefix would be dropped). Each caller says it in its own words.
 */
export function coordinatorUrlProblem(url: string): 'not_a_url' | 'not_http' | 'credentials' | 'path' | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'not_a_url';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'not_http';
  if (u.username !== '' || u.password !== '') return 'credentials';
  if (u.pathname !== '/' || u.search !== '' || u.hash !== '') return 'path';
  return null;
}

/** `url` as it may be printed: a user name and password are left out. */
export function withoutCredentials(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//***@${u.host}`;
}

/** Codes of failures before any request reached a server: sending it elsewhere is always safe. */
const NEVER_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/** Whether `err` (or its cause) says the connection was never made. */
export function neverSent(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && NEVER_SENT.has(e.code)) return true;
    const errors = (e as { errors?: unknown }).errors; // AggregateError (several addresses tried)
    if (Array.isArray(errors) && errors.some((x) => neverSent(x))) return true;
  }
  return false;
}
