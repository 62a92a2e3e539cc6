import pg from 'pg';
import { settledWithin } from '../within.js';

/*
 * Closing PostgreSQL connections without waiting for a frozen host. node-postgres' end() sends
 * Terminate and waits for the server to close the socket (when no query is under way): a host
 * that froze (packets dropped, nothing reset) never does, and the open socket keeps the process
 * alive until TCP gives up, minutes to hours later: `main` exits anyway (it forces its exit), but
 * a program that embeds the coordinator (startCoordinator / buildApp, then close()) would not.
 */

/**
 * How long closing a connection (or the pool's) waits for the server to close it after the
 * goodbye, and for a statement under way to be answered, before the sockets are destroyed.
 */
export const CLOSE_GRACE_MS = 1000;

/**
 * Gives `client` up at once: its socket is destroyed, which fails every query under way or queued
 * on it (the server rolls back an open transaction when it sees the connection gone).
 */
export function destroy(client: pg.Client): void {
  client.connection.stream.destroy();
}

/** end() gracefully, or destroy the socket if the server has not closed it within `ms`. */
export async function endWithin(client: pg.Client, ms: number): Promise<void> {
  const late = setTimeout(() => destroy(client), ms);
  try {
    await client.end();
  } catch {
    // already ended, or ended with an error: either way it is gone
  } finally {
    clearTimeout(late);
  }
}

/**
 * A `Client` class for a pool that keeps `open`: every connection the pool made (connecting or
 * connected) whose socket is not closed yet, for `endPoolWithin`. pg-pool itself forgets a
 * connection as soon as it asks it to end, before its socket closes.
 */
export function trackedClients(): { Client: typeof pg.Client; open: ReadonlySet<pg.Client> } {
  const open = new Set<pg.Client>();
  // pg-pool connects each client it makes at once
  class TrackedClient extends pg.Client {
    constructor(config?: string | pg.ClientConfig) {
      super(config);
      open.add(this);
      // the connection's 'end' is its socket's 'close' (node-postgres' Connection)
      this.connection.once('end', () => open.delete(this));
    }
  }
  return { Client: TrackedClient, open };
}

/**
 * pool.end(), bounded: the idle connections say goodbye and the ones in use finish their
 * statement; whatever is still open after `ms` (a frozen host that never closes its end, a
 * statement it never answers, a connection attempt it never answers) has its socket destroyed,
 * its statement failing as a broken connection's. Resolves once every socket of the pool is
 * closed (pool.end() may still wait for a holder to hand its broken connection back).
 */
export async function endPoolWithin(pool: pg.Pool, open: ReadonlySet<pg.Client>, ms: number): Promise<void> {
  const ended = pool.end().catch(() => undefined);
  const closed = () => Promise.all([...open].map((c) => new Promise<void>((resolve) => c.connection.once('end', () => resolve()))));
  await settledWithin(Promise.all([ended, closed()]), ms);
  if (open.size === 0) return;
  const gone = closed();
  for (const client of open) destroy(client);
  await gone;
}
