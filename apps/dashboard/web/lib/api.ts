import type { ErrorBody } from '@agentq/protocol';
import { parseRetryAfter } from '@agentq/client/retry-after';
import { sleep } from './sleep.js';

/** The coordinator said no: `code` is the machine-readable error code (`forbidden`, `validation_failed`, ...). */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

/** What the page tells the user when the coordinator wants a (better) token. */
export interface AuthProblem {
  status: 401 | 403;
  message: string;
}

type Query = Record<string, string | number | boolean | undefined | null>;

const TOKEN_KEY = 'agentq.token';

/** How often a read refused with 429/503 and a short Retry-After is sent again (as the CLI's client does). */
const READ_RETRIES = 2;
/** the longest Retry-After a read waits for; a longer one is shown as the error it is */
const MAX_RETRY_AFTER_MS = 10_000;

/**
 * Calls to the coordinator from the page (same origin). The bearer token is entered once and
 * kept in sessionStorage: it lives as long as the tab and never reaches localStorage or a cookie.
 * A 401 (and a 403 on a read) is also reported to `onAuthProblem` listeners, so the page can ask
 * for a token wherever the call came from. A read the coordinator refuses for now (429, or 503
 * `overloaded` with a Retry-After of a few seconds) is sent again after that wait, twice at most.
 */
export class Api {
  #token: string | null;
  readonly #authListeners = new Set<(problem: AuthProblem | null) => void>();
  /** the last problem told (null once a token was set since), for a listener added after it */
  #problem: AuthProblem | null = null;

  /** `base`: the coordinator's URL; the page's own origin when empty */
  constructor(
    private readonly storage: Storage,
    private readonly base = '',
  ) {
    const kept = storage.getItem(TOKEN_KEY);
    this.#token = kept !== null && tokenProblem(kept) === null ? kept : null;
  }

  get token(): string | null {
    return this.#token;
  }

  /** Throws when `token` cannot be sent in a header (see tokenProblem): ask for it again. */
  setToken(token: string | null): void {
    const problem = token === null || token.trim() === '' ? null : tokenProblem(token);
    if (problem !== null) throw new Error(problem);
    this.#token = token === null || token.trim() === '' ? null : token.trim();
    if (this.#token === null) this.storage.removeItem(TOKEN_KEY);
    else this.storage.setItem(TOKEN_KEY, this.#token);
    this.#tell(null);
  }

  /**
   * `listener` gets each problem, and at once the last one if it is still current: the event
   * stream is opened before the page's components subscribe (in an effect, after the first
   * paint), and a 401 it got meanwhile was never shown when no view's own read was answered 401.
   */
  onAuthProblem(listener: (problem: AuthProblem | null) => void): () => void {
    this.#authListeners.add(listener);
    if (this.#problem !== null) listener(this.#problem);
    return () => this.#authListeners.delete(listener);
  }

  /** Headers every call carries (also used by the event stream). */
  headers(): Record<string, string> {
    return this.#token === null ? {} : { authorization: `Bearer ${this.#token}` };
  }

  get<T>(path: string, query?: Query, signal?: AbortSignal): Promise<T> {
    return this.#call<T>('GET', path, { query, signal });
  }

  post<T>(path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
    return this.#call<T>('POST', path, { body, signal });
  }

  /** Report the answer of a request made elsewhere (the event stream) if it is an auth problem. */
  async checkAuth(res: Response, write: boolean): Promise<ApiError | null> {
    if (res.status !== 401 && res.status !== 403) return null;
    const err = await toApiError(res);
    if (res.status === 401 || !write) this.#tell({ status: res.status, message: err.message });
    return err;
  }

  async #call<T>(method: 'GET' | 'POST', path: string, o: { query?: Query; body?: unknown; signal?: AbortSignal }): Promise<T> {
    const url = this.base + path + queryString(o.query);
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers() };
    if (o.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await fetch(url, {
          method,
          headers,
          body: o.body === undefined ? null : JSON.stringify(o.body),
          signal: o.signal ?? null,
          cache: 'no-store',
        });
      } catch (err) {
        if (o.signal?.aborted) throw err;
        throw new ApiError(0, 'unreachable', 'the coordinator is unreachable', { cause: String(err) });
      }
      const wait = method === 'GET' && attempt < READ_RETRIES ? retryAfterMs(res) : undefined;
      if (wait === undefined) break;
      await res.body?.cancel().catch(() => undefined);
      await sleep(wait, o.signal);
    }
    const authError = await this.checkAuth(res, method !== 'GET');
    if (authError) throw authError;
    if (!res.ok) throw await toApiError(res);
    return (await res.json()) as T;
  }

  #tell(problem: AuthProblem | null): void {
    this.#problem = problem;
    for (const l of this.#authListeners) l(problem);
  }
}

/**
 * Why `token` (trimmed) cannot be a bearer token, or null. A token is printable ASCII with no
 * space, as the coordinator reads `Authorization: Bearer <token>`. A character copied along with
 * it (a zero-width space from a chat message, a typographic quote) would make every call fail in
 * the browser before it is sent, as if the coordinator were unreachable, and the event stream
 * retry for ever.
 */
export function tokenProblem(token: string): string | null {
  const t = token.trim();
  for (let i = 0; i < t.length; i++) {
    const code = t.codePointAt(i)!;
    if (code >= 0x21 && code <= 0x7e) continue;
    const what = code === 0x20 || code === 0x09 ? 'a space' : `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
    return `the token has ${what} at character ${i + 1}; a token is printable ASCII with no spaces: paste it again without it`;
  }
  return null;
}

async function toApiError(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const { error } = JSON.parse(text) as ErrorBody;
    return new ApiError(res.status, error.code, error.message, error.details ?? {});
  } catch {
    return new ApiError(res.status, `http_${res.status}`, `HTTP ${res.status}${text ? `: ${text.slice(0, 200)}` : ''}`);
  }
}

/**
 * The wait a 429 or 503 asks for (`Retry-After`, seconds or an HTTP date), when it is short enough
 * to wait for; undefined without one: such a refusal is shown, not sent again.
 */
export function retryAfterMs(res: Pick<Response, 'status' | 'headers'>, now = Date.now()): number | undefined {
  if (res.status !== 429 && res.status !== 503) return undefined;
  const ms = parseRetryAfter(res.headers.get('retry-after'), now);
  return ms !== undefined && ms <= MAX_RETRY_AFTER_MS ? ms : undefined;
}

function queryString(query?: Query): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const s = params.toString();
  return s ? `?${s}` : '';
}

/** A readable one-liner for an error caught in a view. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 403) {
      // a role refused (details.role): a reader may only look; any other refusal says why itself
      const role = err.details['role'];
      if (role === 'reader') return `forbidden: ${err.message} (a reader token can only look; acting needs a client token)`;
      const allowed = err.details['allowed_roles'];
      if (typeof role === 'string' && Array.isArray(allowed)) return `forbidden: ${err.message} (this needs a token of role ${allowed.join(' or ')})`;
      return `forbidden: ${err.message}`;
    }
    return `${err.code}: ${err.message}`;
  }
  return err instanceof Error ? err.message : String(err);
}
