import { Pool, errors as undiciErrors } from 'undici';
import type {
  CompletedReport,
  CreateJobRequest,
  DeleteLauncherResponse,
  FailedReport,
  Health,
  HeartbeatRequest,
  HeartbeatResponse,
  Job,
  JobList,
  JobOutput,
  LauncherList,
  ListJobsQuery,
  ListSessionsQuery,
  Ok,
  OutputQuery,
  OutputReport,
  PollResponse,
  RegisterLauncherRequest,
  RegisterLauncherResponse,
  SendMessageRequest,
  SendMessageResponse,
  Session,
  SessionList,
  StartedReport,
  StopJobResponse,
  StoppedReport,
  StopSessionResponse,
  WaitManyRequest,
  WaitManyResponse,
} from '@agentq/protocol';
import { AgentqApiError, AgentqConnectionError, toError } from './errors.js';
import { parseSse, type SseMessage } from './sse.js';

export interface ClientOptions {
  /** coordinator base URL, e.g. http://127.0.0.1:8765 */
  url: string;
  /** connections kept to the coordinator (default 16) */
  connections?: number;
  /** time allowed for the answer's headers on ordinary requests (default 30 s) */
  headersTimeoutMs?: number;
  /** bearer token sent with every request (auth on the coordinator; see docs/operations.md) */
  token?: string;
  /** PEM file of the CA that signed the coordinator's certificate (https:// URLs) */
  caFile?: string;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** headers timeout for this call; long-polls and waits set it above their hold time */
  headersTimeoutMs?: number;
}

type Query = Record<string, string | number | boolean | undefined | null>;

/** Slack added to a long-poll's announced hold time before the client gives up on headers. */
const LONG_POLL_SLACK_MS = 30_000;

/**
 * The coordinator's HTTP client (one undici Pool per coordinator). Every method maps to one
 * endpoint and returns the typed body; errors are AgentqApiError (the coordinator said no) or
 * AgentqConnectionError (it could not be reached). Aborts reject with the signal's reason.
 */
export class AgentqClient {
  readonly url: string;
  readonly #pool: Pool;
  readonly #headersTimeoutMs: number;

  constructor(options: ClientOptions) {
    this.url = options.url.replace(/\/+$/, '');
    this.#headersTimeoutMs = options.headersTimeoutMs ?? 30_000;
    this.#pool = new Pool(this.url, {
      connections: options.connections ?? 16,
      // per-request timeouts are set on each call; these are the pool's outer bounds
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 4_000,
    });
  }

  /** Close after the requests in flight have finished. Safe to call more than once. */
  close(): Promise<void> {
    if (this.#pool.closed || this.#pool.destroyed) return Promise.resolve();
    return this.#pool.close();
  }

  /** Close at once, failing requests in flight (used by launchers that are shutting down). */
  destroy(): Promise<void> {
    if (this.#pool.destroyed) return Promise.resolve();
    return this.#pool.destroy();
  }

  // --- jobs -------------------------------------------------------------------------------

  createJob(body: CreateJobRequest, o?: CallOptions): Promise<Job> {
    return this.#json('POST', '/jobs', { body, ...o });
  }
  getJob(jobId: string, o?: CallOptions): Promise<Job> {
    return this.#json('GET', `/jobs/${enc(jobId)}`, o);
  }
  listJobs(query: ListJobsQuery = {}, o?: CallOptions): Promise<JobList> {
    return this.#json('GET', '/jobs', { query: query as Query, ...o });
  }
  /** Hold until the job is terminal or `timeoutMs` passes; returns the snapshot either way. */
  waitJob(jobId: string, timeoutMs: number, o?: CallOptions): Promise<Job> {
    return this.#json('GET', `/jobs/${enc(jobId)}/wait`, {
      query: { timeout_ms: timeoutMs },
      headersTimeoutMs: timeoutMs + LONG_POLL_SLACK_MS,
      ...o,
    });
  }
  waitJobs(body: WaitManyRequest, o?: CallOptions): Promise<WaitManyResponse> {
    return this.#json('POST', '/jobs/wait', {
      body,
      headersTimeoutMs: (body.timeout_ms ?? 30_000) + LONG_POLL_SLACK_MS,
      ...o,
    });
  }
  stopJob(jobId: string, o?: CallOptions): Promise<StopJobResponse> {
    return this.#json('POST', `/jobs/${enc(jobId)}/stop`, o);
  }
  getOutput(jobId: string, query: OutputQuery = {}, o?: CallOptions): Promise<JobOutput> {
    return this.#json('GET', `/jobs/${enc(jobId)}/output`, {
      query: query as Query,
      headersTimeoutMs: (query.wait_ms ?? 0) + LONG_POLL_SLACK_MS,
      ...o,
    });
  }

  // --- sessions ---------------------------------------------------------------------------

  listSessions(query: ListSessionsQuery = {}, o?: CallOptions): Promise<SessionList> {
    return this.#json('GET', '/sessions', { query: query as Query, ...o });
  }
  getSession(name: string, o?: CallOptions): Promise<Session> {
    return this.#json('GET', `/sessions/${enc(name)}`, o);
  }
  stopSession(name: string, o?: CallOptions): Promise<StopSessionResponse> {
    return this.#json('POST', `/sessions/${enc(name)}/stop`, o);
  }
  /** Queue a message for the session's next turn (a resume job at once when it is idle). */
  sendMessage(name: string, body: SendMessageRequest, o?: CallOptions): Promise<SendMessageResponse> {
    return this.#json('POST', `/sessions/${enc(name)}/messages`, { body, ...o });
  }

  // --- launchers --------------------------------------------------------------------------

  register(body: RegisterLauncherRequest = {}, o?: CallOptions): Promise<RegisterLauncherResponse> {
    return this.#json('POST', '/launcher/register', { body, ...o });
  }
  /**
   * Long-poll for work. Resolves `null` on 204 (nothing within the hold time). `holdSeconds`
   * is the poll timeout the coordinator announced at registration.
   */
  poll(
    launcherId: string,
    options: CallOptions & { capacity?: number; holdSeconds?: number } = {},
  ): Promise<PollResponse | null> {
    const { capacity, holdSeconds = 30, ...o } = options;
    return this.#json('GET', '/launcher/jobs', {
      query: { launcher_id: launcherId, capacity },
      headersTimeoutMs: holdSeconds * 1000 + LONG_POLL_SLACK_MS,
      allow204: true,
      ...o,
    });
  }
  heartbeat(body: HeartbeatRequest, o?: CallOptions): Promise<HeartbeatResponse> {
    return this.#json('POST', '/launcher/heartbeat', { body, ...o });
  }
  reportStarted(jobId: string, body: StartedReport, o?: CallOptions): Promise<Ok> {
    return this.#json('POST', `/launcher/jobs/${enc(jobId)}/started`, { body, ...o });
  }
  reportCompleted(jobId: string, body: CompletedReport, o?: CallOptions): Promise<Ok> {
    return this.#json('POST', `/launcher/jobs/${enc(jobId)}/completed`, { body, ...o });
  }
  reportFailed(jobId: string, body: FailedReport, o?: CallOptions): Promise<Ok> {
    return this.#json('POST', `/launcher/jobs/${enc(jobId)}/failed`, { body, ...o });
  }
  reportStopped(jobId: string, body: StoppedReport, o?: CallOptions): Promise<Ok> {
    return this.#json('POST', `/launcher/jobs/${enc(jobId)}/stopped`, { body, ...o });
  }
  reportOutput(jobId: string, body: OutputReport, o?: CallOptions): Promise<Ok> {
    return this.#json('POST', `/launcher/jobs/${enc(jobId)}/output`, { body, ...o });
  }
  listLaunchers(o?: CallOptions): Promise<LauncherList> {
    return this.#json('GET', '/launchers', o);
  }
  deleteLauncher(launcherId: string, options: CallOptions & { self?: boolean } = {}): Promise<DeleteLauncherResponse> {
    const { self, ...o } = options;
    return this.#json('DELETE', `/launchers/${enc(launcherId)}`, {
      query: self ? { self: 'true' } : {},
      ...o,
    });
  }

  health(o?: CallOptions): Promise<Health> {
    return this.#json('GET', '/health', o);
  }

  /**
   * Follow `GET /events` (Server-Sent Events). Yields each message until the signal aborts or
   * the server ends the stream. Pass the last seen id to resume after a disconnect. `onOpen` is
   * called once the coordinator has accepted the stream: every event after that moment will come.
   */
  async *events(
    options: { lastEventId?: string | number; signal?: AbortSignal; onOpen?: () => void } = {},
  ): AsyncGenerator<SseMessage> {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (options.lastEventId !== undefined) headers['last-event-id'] = String(options.lastEventId);
    let res;
    try {
      res = await this.#pool.request({
        method: 'GET',
        path: '/events',
        headers,
        signal: options.signal,
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: 0,
      });
    } catch (err) {
      throw this.#wrap(err);
    }
    if (res.statusCode !== 200) {
      throw await apiError(res.statusCode, await res.body.text());
    }
    options.onOpen?.();
    try {
      yield* parseSse(res.body);
    } catch (err) {
      if (options.signal?.aborted) return;
      throw this.#wrap(err);
    }
  }

  // --- plumbing ---------------------------------------------------------------------------

  async #json<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    o: CallOptions & { body?: unknown; query?: Query; allow204?: boolean } = {},
  ): Promise<T> {
    const qs = toQueryString(o.query);
    let res;
    try {
      res = await this.#pool.request({
        method,
        path: qs ? `${path}?${qs}` : path,
        headers: o.body === undefined ? {} : { 'content-type': 'application/json' },
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: o.signal,
        headersTimeout: o.headersTimeoutMs ?? this.#headersTimeoutMs,
        bodyTimeout: o.headersTimeoutMs ?? this.#headersTimeoutMs,
      });
    } catch (err) {
      throw this.#wrap(err, o.signal);
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw this.#wrap(err, o.signal);
    }
    if (res.statusCode === 204 && o.allow204) return null as T;
    if (res.statusCode >= 400) throw await apiError(res.statusCode, text);
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new AgentqApiError(res.statusCode, 'invalid_response', `${method} ${path}: answer is not JSON`, {
        body: text.slice(0, 200),
        cause: String(err),
      });
    }
  }

  #wrap(err: unknown, signal?: AbortSignal): Error {
    if (signal?.aborted) return toError(signal.reason);
    if (err instanceof AgentqApiError || err instanceof AgentqConnectionError) return err;
    const e = toError(err);
    if (e instanceof undiciErrors.RequestAbortedError) return e;
    return new AgentqConnectionError(`coordinator at ${this.url} unreachable: ${e.message}`, { cause: e });
  }
}

async function apiError(status: number, text: string): Promise<AgentqApiError> {
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
    const e = parsed.error;
    if (e && typeof e.code === 'string') {
      return new AgentqApiError(
        status,
        e.code,
        typeof e.message === 'string' ? e.message : e.code,
        typeof e.details === 'object' && e.details !== null ? (e.details as Record<string, unknown>) : undefined,
      );
    }
  } catch {
    // not JSON: fall through to a generic error that keeps the start of the body
  }
  return new AgentqApiError(status, `http_${status}`, `HTTP ${status}: ${text.slice(0, 200)}`);
}

function toQueryString(query?: Query): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
  return params.toString();
}

const enc = encodeURIComponent;
