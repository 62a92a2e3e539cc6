import pg from 'pg';
import type { Logger } from 'pino';
import { CLOSE_GRACE_MS, destroy, endWithin } from './pg-close.js';
import { setKnownSettings } from './pg-sql.js';

/**
 * How fast a dead peer of the control connection is noticed, on both ends. PostgreSQL keeps the
 * sweeper's advisory lock as long as it believes this connection alive: when the network drops
 * packets instead of resetting (a partition, a frozen VM), the operating system's TCP defaults
 * take two hours to notice, and no other coordinator sweeps meanwhile (stale launchers, claim
 * leases, timeouts, retention). With these the server ends the session, and frees the lock,
 * after about 25 s of silence (10 s idle, then 3 probes 5 s apart) or 30 s of data it sent
 * without an acknowledgement; the coordinator probes its end after 10 s idle too. (Ignored by
 * PostgreSQL on a Unix socket, where a dead peer is seen at once.)
 *
 * A coordinator process that is paused (SIGSTOP, `docker pause`, a debugger) or whose event loop
 * is stuck is no dead peer: its kernel still acknowledges every packet. `idle_session_timeout`
 * (PostgreSQL 14 and later) ends a session that sent no query for 30 s, and the connection sends
 * one every PING_MS while its process runs: a coordinator that stopped running loses the lock
 * (and stops holding back the server's notification queue) within 30 s. Settings the server
 * does not know (older versions) are left out.
 */
export const CONTROL_KEEPALIVE = {
  tcp_keepalives_idle: 10,
  tcp_keepalives_interval: 5,
  tcp_keepalives_count: 3,
  tcp_user_timeout: 30_000,
  idle_session_timeout: 30_000,
} as const;

/** How often the control connection sends a query while its process runs (see CONTROL_KEEPALIVE). */
export const PING_MS = 5_000;

/**
 * How long a ping may go unanswered before the control connection is taken for lost (and
 * reconnected) by default: as long as the server waits for this end (`tcp_user_timeout`). A
 * database host that froze acknowledges nothing, and this end's TCP would keep retransmitting for
 * many minutes (keepalive probes are not sent while data is unacknowledged), the coordinator
 * meanwhile saying its store is available and its sweeper stuck on the lock's check.
 */
export const PING_TIMEOUT_MS = CONTROL_KEEPALIVE.tcp_user_timeout;

export interface ControlHandlers {
  /** NOTIFY on the commits channel: log entry `id` is committed, by server process `from` */
  commit(id: number, from: number): void;
  /** NOTIFY on the output channel: `<stream length> <job id>` (a job has new output) */
  output(payload: string): void;
  /** (re)connected and listening: notifications may have been missed meanwhile */
  connected(): void;
}

/**
 * The store's own connection, outside the pool: it LISTENs for the commits and output of every
 * coordinator, and holds the sweeper's advisory lock (a session lock: it is held as long as this
 * connection lives, and PostgreSQL releases it when the connection dies, so another coordinator
 * takes over). It reconnects by itself, with backoff.
 */
export class PgControl {
  #client: pg.Client | undefined;
  #leader = false;
  #closed = false;
  #attempt = 0;
  #timer: NodeJS.Timeout | undefined;
  #ping: NodeJS.Timeout | undefined;
  /** the connection being set up (#connect), given up on by close() */
  #connecting: pg.Client | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channels: { commits: string; output: string },
    /** the advisory lock key of the sweeper (hashed by PostgreSQL's hashtext) */
    private readonly sweeperKey: string,
    private readonly handlers: ControlHandlers,
    private readonly log: Logger,
    /** a ping unanswered this long loses the connection (PING_TIMEOUT_MS by default) */
    private readonly pingTimeoutMs: number = PING_TIMEOUT_MS,
  ) {}

  /** Connect and listen; throws when the first connection fails (the coordinator does not start). */
  async start(): Promise<void> {
    await this.#connect();
  }

  get connected(): boolean {
    return this.#client !== undefined;
  }

  async #connect(): Promise<void> {
    const bound = this.pingTimeoutMs;
    const client = new pg.Client({
      ...this.config,
      // a host that takes the connection and never answers (frozen) fails the attempt, and the
      // reconnect loop tries again, rather than waiting for TCP to give up (minutes)
      connectionTimeoutMillis: this.config.connectionTimeoutMillis || bound,
      keepAlive: true,
      keepAliveInitialDelayMillis: CONTROL_KEEPALIVE.tcp_keepalives_idle * 1000,
    });
    this.#connecting = client;
    client.on('error', (err) => this.#lost(client, err));
    client.on('end', () => this.#lost(client, new Error('connection ended')));
    client.on('notification', (msg) => {
      if (msg.channel === this.channels.commits) {
        const id = Number(msg.payload);
        if (Number.isSafeInteger(id)) this.handlers.commit(id, msg.processId);
      } else if (msg.channel === this.channels.output && msg.payload) {
        this.handlers.output(msg.payload);
      }
    });
    let silent: NodeJS.Timeout | undefined;
    let timedOut = false;
    try {
      await client.connect();
      // the setup's statements, bounded as a ping is: a host that freezes now would otherwise hold
      // the reconnect loop (the store unavailable, no sweeper) until TCP gives up, even once the
      // database answers new connections again
      silent = setTimeout(() => {
        timedOut = true;
        destroy(client);
      }, bound);
      const settings = Object.entries(CONTROL_KEEPALIVE);
      await setKnownSettings(client, CONTROL_KEEPALIVE);
      // read back as in force on this socket (SHOW's view: the server reads the socket's options)
      const { rows } = await client.query<{ name: string; setting: string | null }>(
        'SELECT name, current_setting(name, true) AS setting FROM unnest($1::text[]) AS name',
        [settings.map(([name]) => name)],
      );
      this.log.debug({ settings: Object.fromEntries(rows.map((r) => [r.name, r.setting])) }, 'PostgreSQL control connection keepalive set');
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channels.commits)}`);
      await client.query(`LISTEN ${pg.escapeIdentifier(this.channels.output)}`);
    } catch (err) {
      client.removeAllListeners('end');
      // not end(): it would wait for a frozen host to close the socket
      destroy(client);
      if (timedOut) throw new Error(`the database did not answer the control connection's setup within ${bound} ms`, { cause: err });
      throw err;
    } finally {
      clearTimeout(silent);
      if (this.#connecting === client) this.#connecting = undefined;
    }
    if (this.#closed) {
      client.removeAllListeners('end');
      await endWithin(client, CLOSE_GRACE_MS);
      return;
    }
    this.#client = client;
    // a sign that this process runs (idle_session_timeout ends the session of one that does not),
    // and of the database answering: one that does not answer within pingTimeoutMs loses it
    clearInterval(this.#ping);
    let pinging = false;
    this.#ping = setInterval(() => {
      if (this.#client !== client || pinging) return;
      pinging = true;
      this.#answered(client, 'a ping', client.query('SELECT 1'))
        .catch(() => undefined) // a failure also ends the connection: #lost
        .finally(() => (pinging = false));
    }, PING_MS).unref();
    if (this.#attempt > 0) this.log.info({ attempts: this.#attempt }, 'PostgreSQL control connection restored');
    this.#attempt = 0;
    this.handlers.connected();
  }

  #lost(client: pg.Client, err: Error): void {
    if (this.#client !== client) return;
    this.#client = undefined;
    clearInterval(this.#ping);
    if (this.#leader) this.log.warn('sweeper lock lost with the control connection');
    this.#leader = false;
    client.removeAllListeners('end');
    // given up on: not end(), which waits for the server to close the socket (a frozen host never
    // does) when no query is under way
    destroy(client);
    if (this.#closed) return;
    this.log.warn({ err }, 'PostgreSQL control connection lost; reconnecting');
    this.#reconnect();
  }

  #reconnect(): void {
    if (this.#closed || this.#timer) return;
    const ms = Math.min(5000, 100 * 2 ** Math.min(this.#attempt++, 6));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#connect().catch((err: unknown) => {
        if (this.#closed) return; // given up on by close()
        this.log.warn({ err, attempt: this.#attempt }, 'PostgreSQL control connection failed; retrying');
        this.#reconnect();
      });
    }, ms);
  }

  /**
   * Whether this coordinator is the one that sweeps: it holds the sweeper lock, or takes it now
   * if it is free. At most one connection holds it at a time.
   */
  async sweeperLease(): Promise<boolean> {
    const client = this.#client;
    if (!client) return false;
    if (this.#leader) {
      // still ours only if the session is: after a pause (SIGSTOP) the server may have ended it
      // (idle_session_timeout) and another coordinator taken the lock, which this one has not
      // read yet. A query on the connection finds out.
      try {
        await this.#answered(client, 'the sweeper lock check', client.query('SELECT 1'));
      } catch {
        return false;
      }
      return this.#client === client && this.#leader;
    }
    try {
      const { rows } = await this.#answered(
        client,
        'the sweeper lock request',
        client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [this.sweeperKey]),
      );
      if (this.#client !== client) return false;
      this.#leader = rows[0]?.ok === true;
      if (this.#leader) this.log.info('this coordinator now runs the sweeper (advisory lock taken)');
    } catch {
      this.#leader = false;
    }
    return this.#leader;
  }

  /**
   * `query`, sent on `client`, or the connection taken for lost (#lost: its socket destroyed,
   * which fails the query) when the database does not answer it within the ping timeout: the
   * sweeper awaits the lock's queries, and a frozen host would hold it until TCP gives up.
   */
  #answered<T>(client: pg.Client, what: string, query: Promise<T>): Promise<T> {
    const ms = this.pingTimeoutMs;
    const silent = setTimeout(() => this.#lost(client, new Error(`the database did not answer ${what} within ${ms} ms`)), ms);
    return query.finally(() => clearTimeout(silent));
  }

  /** Ends the connection (a coordinator's shutdown waits for it): never longer than CLOSE_GRACE_MS. */
  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    clearInterval(this.#ping);
    // one still setting up is given up on (its setup would end it once done, up to the ping timeout later)
    if (this.#connecting) destroy(this.#connecting);
    const client = this.#client;
    this.#client = undefined;
    this.#leader = false;
    if (client) {
      client.removeAllListeners('end');
      await endWithin(client, CLOSE_GRACE_MS);
    }
  }
}
