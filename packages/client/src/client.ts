import { randomUUID } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import { Pool, errors as undiciErrors } from 'undici';
import { readCaFile } from './ca-file.js';
import type {
  CompletedReport,
  CreateJobRequest,
  CreateJobsResponse,
  DeleteLauncherResponse,
  FailedReport,
  Health,
  Ready,
  HeartbeatRequest,
  HeartbeatResponse,
  Job,
  JobList,
  JobOutput,
  Launcher,
  LauncherList,
  ListJobsQuery,
  ListLaunchersQuery,
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
  SyncRequest,
  SyncResponse,
  WaitManyRequest,
  WaitManyResponse,
} from '@agentq/protocol';
import { backoffDelay, delay, type BackoffOptions } from './backoff.js';
import { Endpoints, neverSent } from './endpoints.js';
import { parseRetryAfter } from './retry-after.js';
import { AgentqApiError, AgentqAuthError, AgentqConnectionError, AgentqUsageError, isGatewayError, toError } from './errors.js';
import { parseSse, type SseMessage } from './sse.js';

export interface ClientOptions {
  /**
   * coordinator base URL, e.g. http://127.0.0.1:8765 or https://agentq.example:8765; several
   * coordinators of one PostgreSQL database as a comma list (the client moves to the next one
   * when the current one cannot be reached; see endpoints.ts)
   */
  url: string;
  /**
   * Bearer token sent with every request (`Authorization: Bearer <token>`). A function is asked
   * on every request: a launcher switches to its own credential once registered.
   */
  token?: string | (() => string | undefined);
  /** PEM file of the CA that signed the coordinator's certificate (a self-signed deployment) */
  caFile?: string;
  /**
   * connections kept to the coordinator (default 16); null: no limit, a connection for every
   * request in flight (a caller whose long-polls must never hold up its other requests)
   */
  connections?: number | null;
  /** time allowed for the answer's headers on ordinary requests (default 30 s) */
  headersTimeoutMs?: number;
  /**
   * How many times a request answered 429 or 503 with a Retry-After is sent again, after waiting
   * what the coordinator asked (default 2; 0 = never). Such a request was refused before it did
   * anything (overload, rate limit, shutdown), so sending it again is safe.
   */
  overloadRetries?: number;
  /** the longest Retry-After honoured; a longer one fails the request at once (default 60 s) */
  maxRetryAfterMs?: number;
  /** told before each such wait (a CLI says why it is quiet: a rate limit may ask for a minute) */
  onRetryWait?: (wait: { ms: number; error: AgentqApiError }) => void;
  /**
   * How many times `createJob` sends its request again after a lost answer (connection error,
   * 502/503/504), always with the same Idempotency-Key so that the coordinator creates the job
   * once (default 4; 0 = never).
   */
  createRetries?: number;
  /**
   * How many times `stopJob` and `stopSession` send their request again after a lost answer (as
   * `createRetries`), with the same Idempotency-Key: the coordinator answers a retry of a stop it
   * made with that stop's answer (`replayed: true`) and stops nothing more (default 4; 0 = never).
   */
  stopRetries?: number;
  /** the waits between a create's or a stop's retries (default 200 ms doubling, up to 5 s, with jitter) */
  createRetryBackoff?: BackoffOptions;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** headers timeout for this call; long-polls and waits set it above their hold time */
  headersTimeoutMs?: number;
  /** bearer token of this call instead of the client's (a launcher registers with its registration token) */
  token?: string;
  /**
   * The client's `overloadRetries` for this call. A caller that has a deadline of its own and
   * honours the Retry-After itself (the CLI's waits: reconnect.ts) passes 0: the client's waits
   * know no deadline, and would hold the call past it.
   */
  overloadRetries?: number;
}

export interface CreateJobOptions extends CallOptions {
  /**
   * The request's Idempotency-Key (default: a new random one for this call). The same key with
   * the same body within 24 h answers the job the first request created instead of a second one.
   */
  idempotencyKey?: string;
  /**
   * Told before the create is sent again after an attempt whose answer was lost (`err`: how it
   * failed): that attempt may have created the jobs, so what a later attempt fails with may not be
   * the whole story (the MCP server's refusals: answers.ts).
   */
  onResend?: (err: unknown) => void;
}

export interface StopOptions extends CallOptions {
  /**
   * The stop's Idempotency-Key (default: a new random one for this call). A caller that sends a
   * stop again after its answer was lost passes the same key to every attempt: the coordinator
   * then answers the first stop's answer again (`replayed: true`) and stops nothing more, though
   * the session may have started a job in between.
   */
  idempotencyKey?: string;
  /**
   * Told before the stop is sent again after an attempt whose answer was lost (`err`: how it
   * failed): that attempt may have stopped, so what a later attempt is answered, or fails with,
   * may not be the whole story (the MCP server's `outcome` of a stop).
   */
  onResend?: (err: unknown) => void;
}

/** What undici accepts in a header value (RFC 9110 field-value characters). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

type Query = Record<string, string | number | boolean | undefined | null>;

/** Launchers per page of listAllLaunchers: 500 typical launchers are about 400 KB of JSON. */
const LAUNCHERS_PAGE = 500;

/** An event stream silent this many keepalive intervals is dead, though not closed. */
const KEEPALIVES_MISSED = 3;
/** the coordinator's keepalive interval until the stream's opening comment says (15 s at most) */
const DEFAULT_KEEPALIVE_MS = 15_000;

/** Slack added to a long-poll's announced hold time before the client gives up on headers. */
const LONG_POLL_SLACK_MS = 30_000;

/**
 * The coordinator's HTTP client (one undici Pool per coordinator). Every method maps to one
 * endpoint and returns the typed body; errors are AgentqApiError (the coordinator said no) or
 * AgentqConnectionError (it could not be reached). Aborts reject with the signal's reason.
 */
export class AgentqClient {
  readonly #endpoints: Endpoints;
  readonly #pools = new Map<string, Pool>();
  readonly #poolOptions: Pool.Options;
  readonly #headersTimeoutMs: number;
  readonly #token: () => string | undefined;
  readonly #overloadRetries: number;
  readonly #onRetryWait: ClientOptions['onRetryWait'];
  readonly #maxRetryAfterMs: number;
  readonly #createRetries: number;
  readonly #stopRetries: number;
  readonly #createRetryBackoff: BackoffOptions;
  /** set by close() and destroy(): no request leaves after it, to this URL or another */
  #closed = false;
  /** set by destroy(): what the requests it cut fail with is the destroy, not the coordinator */
  #destroyed = false;

  constructor(options: ClientOptions) {
    this.#endpoints = new Endpoints(options.url);
    this.#headersTimeoutMs = options.headersTimeoutMs ?? 30_000;
    const token = options.token;
    this.#token = typeof token === 'function' ? token : () => token;
    this.#overloadRetries = options.overloadRetries ?? 2;
    this.#onRetryWait = options.onRetryWait;
    this.#maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
    this.#createRetries = options.createRetries ?? 4;
    this.#stopRetries = options.stopRetries ?? 4;
    this.#createRetryBackoff = options.createRetryBackoff ?? { baseMs: 200, maxMs: 5_000 };
    let ca: string[] | undefined;
    if (options.caFile !== undefined) {
      // the given CA in addition to the usual public ones (a `ca` option alone replaces them)
      ca = [...rootCertificates, readCaFile(options.caFile)];
    }
    this.#poolOptions = {
      connections: options.connections === undefined ? 16 : options.connections,
      // per-request timeouts are set on each call; these are the pool's outer bounds
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 4_000,
      ...(ca ? { connect: { ca } } : {}),
    };
  }

  /** The coordinator URL requests go to now (the first of the list until one fails). */
  get url(): string {
    return this.#endpoints.current;
  }

  /** Every coordinator URL this client may use, in order. */
  get urls(): readonly string[] {
    return this.#endpoints.urls;
  }

  #pool(url: string): Pool {
    if (this.#closed) throw closedError();
    let pool = this.#pools.get(url);
    if (!pool) this.#pools.set(url, (pool = new Pool(url, this.#poolOptions)));
    return pool;
  }

  /**
   * Close after the requests in flight have finished; a call made after it fails at once, to any
   * URL (so does a create's retry). Safe to call more than once.
   */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#pools.values()].map((p) => (p.closed || p.destroyed ? undefined : p.close())));
  }

  /**
   * Close at once, failing requests in flight with a "client is closed" error (used by launchers
   * that are shutting down): not a connection error, so neither a create's retry nor the next URL
   * sends them again.
   */
  async destroy(): Promise<void> {
    this.#closed = true;
    this.#destroyed = true;
    await Promise.all([...this.#pools.values()].map((p) => (p.destroyed ? undefined : p.destroy())));
  }

  // --- jobs -------------------------------------------------------------------------------

  /**
   * Create a job. The request carries an Idempotency-Key (one per call), and when its answer is
   * lost (the connection broke, or 502/503/504) it is sent again with the same key: the
   * coordinator then answers the job the first attempt created, so a lost answer never makes a
   * second job.
   */
  createJob(body: CreateJobRequest, o: CreateJobOptions = {}): Promise<Job> {
    return this.#create<Job>('/jobs', body, o);
  }
  /**
   * Create up to 1,000 jobs in one request, all or none (`POST /jobs/batch`); answered in order.
   * With an Idempotency-Key and retries on a lost answer, as createJob.
   */
  async createJobs(bodies: readonly CreateJobRequest[], o: CreateJobOptions = {}): Promise<Job[]> {
    return (await this.#create<CreateJobsResponse>('/jobs/batch', { jobs: bodies }, o)).jobs;
  }
  #create<T>(path: string, body: unknown, o: CreateJobOptions): Promise<T> {
    const { idempotencyKey = randomUUID(), ...call } = o;
    return this.#keyed<T>(path, { body, ...call }, idempotencyKey, this.#createRetries);
  }
  /**
   * A POST with an Idempotency-Key (a create, a stop), sent again with the same key after a lost
   * answer, up to `retries` times with backoff: the coordinator carries it out once at most and
   * answers the retry with what it did.
   */
  async #keyed<T>(
    path: string,
    o: CallOptions & { body?: unknown; query?: Query; onResend?: (err: unknown) => void },
    idempotencyKey: string,
    retries: number,
  ): Promise<T> {
    const { onResend, ...call } = o;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#json<T>('POST', path, { ...call, headers: { 'idempotency-key': idempotencyKey } });
      } catch (err) {
        if (call.signal?.aborted || attempt >= retries || !answerLost(err)) throw err;
        onResend?.(err);
        try {
          await delay(backoffDelay(attempt, this.#createRetryBackoff), call.signal);
        } catch {
          throw toError(call.signal?.reason ?? err);
        }
      }
    }
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
      readOnly: true,
      headersTimeoutMs: (body.timeout_ms ?? 30_000) + LONG_POLL_SLACK_MS,
      ...o,
    });
  }
  /**
   * Stop a job; with an Idempotency-Key (StopOptions) and retries on a lost answer, as
   * stopSession: a retry answers the first attempt's outcome (`replayed: true`).
   */
  stopJob(jobId: string, o: StopOptions = {}): Promise<StopJobResponse> {
    const { idempotencyKey = randomUUID(), ...call } = o;
    return this.#keyed(`/jobs/${enc(jobId)}/stop`, call, idempotencyKey, this.#stopRetries);
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
  /**
   * Stop the session's jobs; `tree`: and those of every session under it, which stays stopped. The
   * request carries an Idempotency-Key (`o.idempotencyKey`, else a new one): a session stop names
   * no jobs, so one sent again without it would stop what the session started in the meantime.
   * With it, a stop whose answer was lost (the connection broke, or 502/503/504) is sent again,
   * up to `stopRetries` times: the coordinator answers the first attempt's answer
   * (`replayed: true`) and stops nothing more.
   */
  stopSession(name: string, o: StopOptions & { tree?: boolean } = {}): Promise<StopSessionResponse> {
    const { tree, idempotencyKey = randomUUID(), ...call } = o;
    return this.#keyed(`/sessions/${enc(name)}/stop`, { ...(tree ? { query: { tree: 'true' } } : {}), ...call }, idempotencyKey, this.#stopRetries);
  }
  /** Queue a message for the session's next turn (a resume job at once when it is idle). */
  sendMessage(name: string, body: SendMessageRequest, o?: CallOptions): Promise<SendMessageResponse> {
    return this.#json('POST', `/sessions/${enc(name)}/messages`, { body, ...o });
  }

  // --- launchers --------------------------------------------------------------------------

  /**
   * Register a launcher. Not retried here: a caller that retries (the launcher does, with
   * backoff) sends one `registration_key` on every attempt of the registration, so that an
   * attempt whose answer was lost but which did register is answered with that launcher.
   */
  register(body: RegisterLauncherRequest = {}, o?: CallOptions): Promise<RegisterLauncherResponse> {
    return this.#json('POST', '/launcher/register', { body, ...o });
  }
  /**
   * Long-poll for work. Resolves `null` on 204 (nothing within the hold time). `holdSeconds`
   * is the poll timeout the coordinator announced at registration. With `batch`, the answer may
   * carry up to `capacity` jobs (`jobs`); without it at most one (`job`).
   */
  poll(
    launcherId: string,
    options: CallOptions & { capacity?: number; holdSeconds?: number; batch?: boolean } = {},
  ): Promise<PollResponse | null> {
    const { capacity, holdSeconds = 30, batch, ...o } = options;
    return this.#json('GET', '/launcher/jobs', {
      query: { launcher_id: launcherId, capacity, ...(batch ? { batch: 'true' } : {}) },
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
  /**
   * Report-and-poll (`POST /launcher/sync`): the reports are applied in order (each answered in
   * `results`), and the answer hands out up to `capacity` jobs like a poll. Held like a poll
   * (up to `holdSeconds`) only when there are no reports and nothing to hand out.
   */
  sync(body: SyncRequest, options: CallOptions & { holdSeconds?: number } = {}): Promise<SyncResponse> {
    const { holdSeconds = 30, ...o } = options;
    return this.#json('POST', '/launcher/sync', { body, headersTimeoutMs: holdSeconds * 1000 + LONG_POLL_SLACK_MS, ...o });
  }
  /**
   * One page of launchers, in registration order: up to `query.limit`, after `query.cursor` (the
   * previous page's `next_cursor`). Without `limit` every launcher in one answer, as before the
   * list was paged: up to MAX_LAUNCHERS of them (listAllLaunchers keeps each answer small).
   */
  listLaunchers(query: ListLaunchersQuery = {}, o?: CallOptions): Promise<LauncherList> {
    return this.#json('GET', '/launchers', { query: query as Query, ...o });
  }
  /**
   * Every launcher, in registration order, read `pageSize` (default 500) at a time following
   * `next_cursor`. A coordinator older than paging ignores `limit` and answers them all at once,
   * without `next_cursor`: that one answer is the whole list.
   */
  async listAllLaunchers(options: CallOptions & { pageSize?: number } = {}): Promise<Launcher[]> {
    const { pageSize = LAUNCHERS_PAGE, ...o } = options;
    const out: Launcher[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listLaunchers({ limit: pageSize, ...(cursor !== undefined ? { cursor } : {}) }, o);
      out.push(...page.launchers);
      if (page.next_cursor === null || page.next_cursor === undefined) return out;
      // a cursor that does not move would read the same page for ever
      if (page.next_cursor === cursor) throw new Error(`GET /launchers answered its own cursor ${JSON.stringify(cursor)} as the next one`);
      cursor = page.next_cursor;
    }
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
  /** `GET /ready`: resolves while the coordinator takes requests; 503 (overloaded, shutting down, store unavailable) otherwise. */
  ready(o?: CallOptions): Promise<Ready> {
    return this.#json('GET', '/ready', o);
  }

  /**
   * Follow `GET /events` (Server-Sent Events). Yields each message until the signal aborts or
   * the server ends the stream. Pass the last seen id to resume after a disconnect. `onOpen` is
   * called once the coordinator has accepted the stream: every event after that moment will come.
   * Job events leave the prompt out (`prompt_omitted: true`) unless `includePrompt` is set.
   * A stream that carries nothing for three of the coordinator's keepalive intervals (a dead
   * connection that did not close) fails with an AgentqConnectionError: resume it.
   */
  async *events(
    options: {
      lastEventId?: string | number;
      signal?: AbortSignal;
      onOpen?: () => void;
      /** each comment line of the stream, e.g. the coordinator's `connected, last event id N, coordinator P` */
      onComment?: (comment: string) => void;
      includePrompt?: boolean;
    } = {},
  ): AsyncGenerator<SseMessage> {
    const headers: Record<string, string> = { accept: 'text/event-stream', ...this.#auth() };
    if (options.lastEventId !== undefined) headers['last-event-id'] = String(options.lastEventId);
    const url = this.url;
    // A connection can die without closing (a NAT or proxy that forgot it, a network that went to
    // sleep): nothing would come again, and a body without a timeout would be waited on for ever.
    // The coordinator sends a comment at least every K ms (its opening comment says K): a stream
    // silent for a few of them is given up, as a connection error, so the caller reconnects.
    const silence = new AbortController();
    let silenceMs = KEEPALIVES_MISSED * DEFAULT_KEEPALIVE_MS;
    let watchdog: NodeJS.Timeout | undefined;
    const listen = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => silence.abort(), silenceMs);
    };
    const signal = options.signal ? AbortSignal.any([options.signal, silence.signal]) : silence.signal;
    let res;
    try {
      res = await this.#pool(url).request({
        method: 'GET',
        path: options.includePrompt ? '/events?include=prompt' : '/events',
        headers,
        signal,
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: 0,
      });
    } catch (err) {
      throw this.#wrap(err, url, options.signal);
    }
    if (res.statusCode !== 200) {
      let text: string;
      try {
        text = await res.body.text();
      } catch (err) {
        throw this.#wrap(err, url, options.signal);
      }
      throw apiError(res.statusCode, text, res.headers['retry-after']);
    }
    options.onOpen?.();
    const body = res.body;
    // the watchdog runs only while this waits for bytes, not while the caller holds a message
    const heard = async function* (): AsyncGenerator<Buffer> {
      listen();
      for await (const chunk of body) {
        clearTimeout(watchdog);
        yield chunk as Buffer;
        listen();
      }
    };
    // comments are parsed out of a chunk already read: the watchdog is stopped then, and the
    // interval announced only applies from the next wait for bytes (starting it here would time
    // the caller's handling of the messages of that chunk, and cut a stream that is not silent)
    const onComment = (comment: string) => {
      const k = /keepalive (\d+)/.exec(comment);
      if (k !== null && Number(k[1]) > 0) silenceMs = KEEPALIVES_MISSED * Number(k[1]);
      options.onComment?.(comment);
    };
    try {
      yield* parseSse(heard(), onComment);
    } catch (err) {
      if (options.signal?.aborted) return;
      if (silence.signal.aborted) {
        const next = this.#endpoints.failed(url);
        const moved = next === url ? '' : ` (next request goes to ${next})`;
        throw new AgentqConnectionError(
          `event stream from ${url} silent for ${silenceMs} ms, ${KEEPALIVES_MISSED} keepalives missed: the connection is dead${moved}`,
          { cause: err },
        );
      }
      throw this.#wrap(err, url, options.signal);
    } finally {
      clearTimeout(watchdog);
    }
  }

  // --- plumbing ---------------------------------------------------------------------------

  /** The Authorization header of a call (none without a token). */
  #auth(override?: string): Record<string, string> {
    const token = override ?? this.#token();
    if (!token) return {};
    // said here, without the token: undici's own refusal would read as an unreachable coordinator
    if (!HEADER_VALUE.test(token)) {
      throw new AgentqUsageError(
        'the token cannot be sent: it has a character an HTTP header cannot carry ' +
          '(a line break, a control character, or a non-Latin-1 one such as a typographic quote)',
      );
    }
    return { authorization: `Bearer ${token}` };
  }

  /**
   * One call. A 429/503 answered with a Retry-After (overloaded, rate-limited, shutting down)
   * is sent again after that wait, up to `overloadRetries` times; other errors are thrown. A call
   * that changes something is sent again only when the refusal is the coordinator's own (an agentq
   * error code: refused before any work): a proxy's 503 may come after the coordinator did it.
   * With several coordinator URLs, a call that could not reach one goes to the next at once when
   * that is safe: the connection was never made, or the call changes nothing (a GET, or a POST
   * that only reads: `readOnly`, e.g. `POST /jobs/wait`).
   */
  async #json<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    o: CallOptions & { body?: unknown; query?: Query; allow204?: boolean; headers?: Record<string, string>; readOnly?: boolean } = {},
  ): Promise<T> {
    // moves to another URL and waits asked by an overloaded coordinator are counted apart
    const unreachable: string[] = [];
    for (let waits = 0, elsewhere = 0; ; ) {
      // (#once takes the current URL before its first await: this is the one it calls)
      const url = this.url;
      try {
        return await this.#once<T>(method, path, o);
      } catch (err) {
        if (
          err instanceof AgentqConnectionError &&
          !o.signal?.aborted &&
          elsewhere < this.#endpoints.urls.length - 1 &&
          (method === 'GET' || o.readOnly === true || neverSent(err))
        ) {
          elsewhere++;
          unreachable.push(unreachableAt(url, err));
          continue;
        }
        // every coordinator was tried: the error names them all, not only the last one (whose
        // message alone read as if the others had not been asked). Its cause is the last
        // attempt's own, the socket's error, as with one URL (neverSent and logs read it).
        if (err instanceof AgentqConnectionError && unreachable.length > 0 && !o.signal?.aborted) {
          const tried = [...unreachable, unreachableAt(url, err)];
          throw new AgentqConnectionError(`no coordinator answered (${tried.length} tried): ${listed(tried)}`, { cause: err.cause ?? err });
        }
        const wait = err instanceof AgentqApiError && (err.status === 429 || err.status === 503) ? err.retryAfterMs : undefined;
        if (wait === undefined || waits++ >= (o.overloadRetries ?? this.#overloadRetries) || wait > this.#maxRetryAfterMs) throw err;
        // (a create or a stop with an Idempotency-Key is safe to send again: the coordinator made it once at most)
        const safe = method === 'GET' || o.readOnly === true || o.headers?.['idempotency-key'] !== undefined;
        if (!safe && (err as AgentqApiError).code.startsWith('http_')) throw err;
        this.#onRetryWait?.({ ms: wait, error: err as AgentqApiError });
        try {
          await delay(wait, o.signal);
        } catch {
          throw toError(o.signal?.reason ?? err);
        }
      }
    }
  }

  async #once<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    o: CallOptions & { body?: unknown; query?: Query; allow204?: boolean; headers?: Record<string, string> },
  ): Promise<T> {
    const qs = toQueryString(o.query);
    const url = this.url;
    let res;
    try {
      res = await this.#pool(url).request({
        method,
        path: qs ? `${path}?${qs}` : path,
        headers: {
          ...this.#auth(o.token),
          ...(o.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...o.headers,
        },
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: o.signal,
        headersTimeout: o.headersTimeoutMs ?? this.#headersTimeoutMs,
        bodyTimeout: o.headersTimeoutMs ?? this.#headersTimeoutMs,
      });
    } catch (err) {
      throw this.#wrap(err, url, o.signal);
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw this.#wrap(err, url, o.signal);
    }
    if (res.statusCode === 204 && o.allow204) return null as T;
    if (res.statusCode >= 400) throw apiError(res.statusCode, text, res.headers['retry-after']);
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new AgentqApiError(res.statusCode, 'invalid_response', `${method} ${path}: answer is not JSON`, {
        body: text.slice(0, 200),
        cause: String(err),
      });
    }
  }

  /** A failed request as the error callers see; a coordinator that could not be reached is left for the next URL. */
  #wrap(err: unknown, url: string, signal?: AbortSignal): Error {
    if (signal?.aborted) return toError(signal.reason);
    if (err instanceof AgentqApiError || err instanceof AgentqConnectionError) return err;
    if (err instanceof AgentqUsageError) return err;
    // a request undici refuses to send (a header value it cannot carry) never reached anyone
    if (err instanceof undiciErrors.InvalidArgumentError) {
      return new AgentqUsageError(`the request cannot be sent: ${err.message}`, { cause: err });
    }
    // cut by destroy(), or made after close()/destroy(): the coordinator is fine, and neither the
    // next URL nor a create retry may get a request the caller has closed the client on
    if (err instanceof ClientClosedError) return err;
    const cut = err instanceof undiciErrors.ClientDestroyedError || err instanceof undiciErrors.ClientClosedError;
    if (this.#destroyed || cut) return closedError(err);
    const e = toError(err);
    if (e instanceof undiciErrors.RequestAbortedError) return e;
    const next = this.#endpoints.failed(url);
    const moved = next === url ? '' : ` (next request goes to ${next})`;
    return new AgentqConnectionError(`coordinator at ${url} unreachable: ${e.message}${moved}`, { cause: e });
  }
}

/** How many coordinators an error that none answered names, at most: the first ones and the last. */
const NAMED_UNREACHABLE = 4;

/** `coordinator at <url> unreachable: <why>`, without the "next request goes to" of the one URL error. */
function unreachableAt(url: string, err: AgentqConnectionError): string {
  const why = err.cause === undefined ? err.message : toError(err.cause).message;
  return `coordinator at ${url} unreachable: ${why.length > 200 ? `${why.slice(0, 199)}…` : why}`;
}

/** Each of `tried`, or with many the first ones, how many are left out, and the last. */
function listed(tried: readonly string[]): string {
  if (tried.length <= NAMED_UNREACHABLE) return tried.join('; ');
  const first = tried.slice(0, NAMED_UNREACHABLE - 1);
  return [...first, `${tried.length - first.length - 1} more`, tried.at(-1)!].join('; ');
}

/**
 * The answer to a create or a stop may not have been the coordinator's: the connection broke, or a proxy
 * answered 502/503/504 for it. A refusal from the coordinator itself (an agentq error code, e.g.
 * 503 queue_full with its Retry-After, already honoured by #json) is an answer, not a loss.
 */
function answerLost(err: unknown): boolean {
  return err instanceof AgentqConnectionError || isGatewayError(err);
}

/** A call cut by close()/destroy(), or made after it: not a connection error, so nothing retries it. */
class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';
}
function closedError(cause?: unknown): Error {
  const message = 'the agentq client is closed (close() or destroy() was called)';
  return new ClientClosedError(message, cause === undefined ? {} : { cause });
}

function apiError(status: number, text: string, retryAfter?: string | string[]): AgentqApiError {
  const err = parseError(status, text);
  const ms = parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
  if (ms !== undefined) err.retryAfterMs = ms;
  return err;
}

function parseError(status: number, text: string): AgentqApiError {
  let code = `http_${status}`;
  let message = `HTTP ${status}: ${text.slice(0, 200)}`;
  let details: Record<string, unknown> | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
    const e = parsed.error;
    if (e && typeof e.code === 'string') {
      code = e.code;
      message = typeof e.message === 'string' ? e.message : e.code;
      details = typeof e.details === 'object' && e.details !== null ? (e.details as Record<string, unknown>) : undefined;
    }
  } catch {
    // not JSON: a generic error that keeps the start of the body
  }
  // launcher_unknown (401) means "register again", not "bad credentials"
  if ((status === 401 || status === 403) && code !== 'launcher_unknown') return new AgentqAuthError(status, code, message, details);
  return new AgentqApiError(status, code, message, details);
}


function toQueryString(query?: Query): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) params.set(k, String(v));
  return params.toString();
}

const enc = encodeURIComponent;
