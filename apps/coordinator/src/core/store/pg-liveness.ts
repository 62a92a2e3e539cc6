import pg from 'pg';
import { within } from '../within.js';
import { CLOSE_GRACE_MS, destroy, endWithin } from './pg-close.js';

/**
 * Runs `work` (statements on `client` that may rightly take minutes: a schema migration building
 * an index over millions of rows, or waiting for another coordinator's migration, which no query
 * timeout may cut) while making sure the database still answers: once `work` has run for
 * `timeouts.queryMs`, and again each `timeouts.queryMs` after that, a check opens a connection of
 * its own (`config`, so bounded by its `connectionTimeoutMillis`) and sends `SELECT 1`, which must
 * be answered within `timeouts.queryMs`. A check that fails gives `client` up (its socket
 * destroyed, failing the statement under way) and `work` fails saying why: a database host that
 * froze (packets dropped, nothing reset) would otherwise hold it until TCP gives up, and the
 * coordinator's start with it, for ever on a network that keeps the connection open.
 */
export async function whileAnswering<T>(
  client: pg.Client,
  config: pg.ClientConfig,
  queryMs: number,
  /** what `work` does, for the error ("while …") */
  what: string,
  work: () => Promise<T>,
): Promise<T> {
  let done = false;
  let timer: NodeJS.Timeout | undefined;
  let failure: Error | undefined;
  const next = () => {
    timer = setTimeout(() => {
      answers(config, queryMs).then(
        () => {
          if (!done) next();
        },
        (err: unknown) => {
          if (done) return;
          failure = new Error(`the database stopped answering while ${what}: a check on a new connection failed (${(err as Error).message})`, { cause: err });
          destroy(client);
        },
      );
    }, queryMs);
  };
  next();
  try {
    return await work();
  } catch (err) {
    throw failure ?? err;
  } finally {
    done = true;
    clearTimeout(timer);
  }
}

/**
 * Whether the database takes a new connection and answers `SELECT 1` on it within `queryMs`. A
 * refusal of the server's own (too many connections, say) is an answer: the host is not frozen.
 */
async function answers(config: pg.ClientConfig, queryMs: number): Promise<void> {
  const probe = new pg.Client(config);
  probe.on('error', () => undefined); // a failure also fails the connect or the query
  try {
    await probe.connect();
    await within(probe.query('SELECT 1'), queryMs, `SELECT 1 was not answered within ${queryMs} ms`);
  } catch (err) {
    if (!(err instanceof pg.DatabaseError)) throw err;
  } finally {
    await endWithin(probe, CLOSE_GRACE_MS);
  }
}
