import type { ClientBase } from 'pg';
import { ConfigError } from '../../config.js';

/*
 * The PostgreSQL schema, as numbered migrations (the SQLite schema's twin, in PostgreSQL types:
 * bigint milliseconds, double precision costs, boolean flags, JSON as text). `agentq_schema`
 * holds how many have run. Every start runs the missing ones in one transaction under an
 * advisory lock, so several coordinators may start at once: the first migrates, the others wait
 * and find nothing to do. Never edit a released migration: add the next one.
 *
 * Everything lives in the connection's current schema (`search_path`), so one database can hold
 * several independent deployments (`?options=-c search_path=NAME`).
 */
export const PG_MIGRATIONS: readonly string[] = [
  // 1: jobs, sessions, launchers, output, Idempotency-Keys, and the commit log
  `
  CREATE SEQUENCE jobs_seq;
  CREATE SEQUENCE sessions_seq;
  CREATE TABLE jobs (
    seq bigint PRIMARY KEY,
    id text NOT NULL UNIQUE,
    type text NOT NULL,
    session_name text NOT NULL,
    agent_name text,
    prompt text NOT NULL,
    project_dir text,
    parent_session_name text,
    created_at bigint NOT NULL,
    timeout_ms bigint,
    callback_of text,
    message_ids text,
    requires text,
    max_cost_usd double precision,
    created_by text,
    status text NOT NULL,
    launcher_id text,
    error text,
    error_code text,
    result text,
    claimed_at bigint,
    started_at bigint,
    completed_at bigint,
    updated_at bigint NOT NULL,
    stop_requested_at bigint,
    stop_reason text,
    stopped_by text,
    stop_pending boolean NOT NULL DEFAULT false,
    executor_session_id text,
    attempts integer NOT NULL DEFAULT 0,
    usage text,
    cost_usd double precision,
    num_turns bigint,
    duration_api_ms bigint,
    ready_since bigint,
    route_key text,
    output_bytes bigint NOT NULL DEFAULT 0,
    agent_token_hash text
  );
  CREATE INDEX jobs_by_session ON jobs (session_name, seq);
  CREATE INDEX jobs_by_launcher ON jobs (launcher_id, seq);
  CREATE INDEX jobs_by_status ON jobs (status, seq);
  CREATE INDEX jobs_by_end ON jobs (completed_at) WHERE completed_at IS NOT NULL;
  -- a poll reads its launcher's active jobs: not its whole history
  CREATE INDEX jobs_active_by_launcher ON jobs (launcher_id, seq) WHERE status IN ('claimed', 'running', 'stopping');
  CREATE INDEX jobs_stops_by_launcher ON jobs (launcher_id, seq) WHERE stop_pending;
  -- the ready queue: by route key (its buckets) and in FIFO order
  CREATE INDEX jobs_ready_by_key ON jobs (route_key, seq) WHERE ready_since IS NOT NULL;
  CREATE INDEX jobs_ready_by_seq ON jobs (seq) WHERE ready_since IS NOT NULL;
  CREATE INDEX jobs_by_deadline ON jobs ((created_at + timeout_ms)) WHERE timeout_ms IS NOT NULL AND completed_at IS NULL;
  CREATE TABLE sessions (
    seq bigint PRIMARY KEY,
    name text NOT NULL UNIQUE,
    agent_name text,
    project_dir text,
    parent_name text,
    root_name text NOT NULL,
    depth integer NOT NULL,
    created_at bigint NOT NULL,
    created_by text,
    updated_at bigint NOT NULL,
    executor_session_id text,
    last_job_status text,
    last_result text,
    last_error text,
    callbacks text NOT NULL,
    messages text NOT NULL,
    delivery_job_id text,
    in_flight text,
    deliveries_held boolean NOT NULL,
    affinity text,
    accepts_input boolean NOT NULL,
    usage text NOT NULL,
    cost_usd double precision NOT NULL,
    tree_usage text NOT NULL,
    tree_cost_usd double precision NOT NULL,
    budget_usd double precision
  );
  CREATE INDEX sessions_by_parent ON sessions (parent_name, seq);
  CREATE INDEX sessions_by_update ON sessions (updated_at);
  CREATE TABLE launchers (
    id text PRIMARY KEY,
    hostname text,
    project_dir text,
    executor_type text,
    max_jobs integer,
    version text,
    registered_at bigint NOT NULL,
    last_seen bigint NOT NULL,
    status text NOT NULL,
    stale_at bigint,
    labels text NOT NULL,
    roots text NOT NULL,
    host_id text,
    portable boolean NOT NULL,
    created_by text,
    token_hash text UNIQUE
  );
  CREATE TABLE job_output (
    job_id text NOT NULL,
    byte_offset bigint NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (job_id, byte_offset)
  );
  CREATE TABLE idempotency (
    key text PRIMARY KEY,
    request_hash text NOT NULL,
    job_ids text NOT NULL,
    created_at bigint NOT NULL
  );
  CREATE INDEX idempotency_by_age ON idempotency (created_at);
  -- One row per committed transaction that changed something another coordinator reacts to, in
  -- commit order: its lifecycle events (ids first_event_id, first_event_id + 1, ...) and the
  -- hints that wake parked polls and waits. commit_head hands out both numberings; its row lock,
  -- held from the insert to the commit, makes ids commit in order (see postgres-store.ts).
  CREATE TABLE commit_head (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    commit_id bigint NOT NULL,
    event_id bigint NOT NULL
  );
  INSERT INTO commit_head (commit_id, event_id) VALUES (0, 0);
  CREATE TABLE commit_log (
    id bigint PRIMARY KEY,
    first_event_id bigint NOT NULL,
    last_event_id bigint NOT NULL,
    origin text NOT NULL,
    at bigint NOT NULL,
    events text NOT NULL,
    hints text NOT NULL
  );
  CREATE INDEX commit_log_by_event ON commit_log (last_event_id);
  CREATE INDEX commit_log_by_age ON commit_log (at);
  `,
  // 2: a session's required labels, the default of its later jobs (resumes, deliveries)
  `
  ALTER TABLE sessions ADD COLUMN requires text;
  `,
  // 3: host identities bound to the token that first registered them (launchers.ts)
  `
  CREATE TABLE host_bindings (
    host_id text PRIMARY KEY,
    token_name text NOT NULL,
    bound_at bigint NOT NULL
  );
  `,
  // 4: what the sweeping coordinator keeps for the next one (routes no launcher serves, and since
  // when). IF NOT EXISTS: builds between ffa68d7 and this migration made it in migration 3, which a
  // database they migrated does not run again
  `
  CREATE TABLE IF NOT EXISTS meta (
    key text PRIMARY KEY,
    value text NOT NULL
  );
  `,
  // 5: jobs by status, for /metrics (docs/operations.md, "Metrics"): a scrape sums a few rows
  // instead of counting every job kept under retention. A row trigger on jobs appends each
  // insert, deletion and status change to job_count_changes (an insert into a table without an
  // index: no row is updated, so no lock wait between transactions or coordinators, and a
  // transaction that changes 20,000 jobs does not update one row 20,000 times); the sweeper folds
  // them into job_counts (foldJobCounts in postgres-store.ts). A trigger rather than the
  // coordinator's code: a coordinator of an older version, still running during a rolling
  // upgrade, is counted too. Writes to jobs are held back while the counts are taken, so they
  // start exact (writers wait for that count: once, at this upgrade).
  `
  LOCK TABLE jobs IN SHARE ROW EXCLUSIVE MODE;
  CREATE TABLE job_counts (
    status text PRIMARY KEY,
    n bigint NOT NULL
  );
  CREATE TABLE job_count_changes (
    was text,
    became text
  );
  INSERT INTO job_counts (status, n) SELECT status, count(*) FROM jobs GROUP BY status;
  CREATE FUNCTION agentq_count_job_status() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'INSERT' THEN
      INSERT INTO job_count_changes (was, became) VALUES (NULL, NEW.status);
    ELSIF TG_OP = 'DELETE' THEN
      INSERT INTO job_count_changes (was, became) VALUES (OLD.status, NULL);
    ELSE
      INSERT INTO job_count_changes (was, became) VALUES (OLD.status, NEW.status);
    END IF;
    RETURN NULL;
  END
  $$;
  CREATE TRIGGER jobs_counted AFTER INSERT OR DELETE ON jobs FOR EACH ROW EXECUTE FUNCTION agentq_count_job_status();
  CREATE TRIGGER jobs_status_counted AFTER UPDATE OF status ON jobs FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION agentq_count_job_status();
  `,
  // 6: the roots of the session trees, newest first (GET /sessions?root=true, the dashboard's
  // tree). sessions_by_parent finds them (parent_name IS NULL) but not in seq order: a page of
  // roots either sorted every root or walked every session newer than it, children included.
  `
  CREATE INDEX sessions_roots ON sessions (seq) WHERE parent_name IS NULL;
  `,
  // 7: the registration_key a launcher registered with (launchers.ts): a retry of a registration
  // whose answer was lost is answered with the same launcher instead of a second one. Unique: two
  // coordinators handed the first try and the retry at once cannot both insert a launcher (the
  // second meets the first's key, and its transaction runs again and finds that launcher)
  `
  ALTER TABLE launchers ADD COLUMN registration_key text;
  CREATE UNIQUE INDEX launchers_by_registration_key ON launchers (registration_key) WHERE registration_key IS NOT NULL;
  `,
  // 8: what a stop with an Idempotency-Key answered (stops.ts), answered again to a retry of it.
  // A coordinator of an older version leaves it null (it keys creates only)
  `
  ALTER TABLE idempotency ADD COLUMN answer text;
  `,
  // 9: claims of a job lost without a start (lease expired, launcher lost), bounded by
  // JOB_MAX_CLAIMS (jobs.ts loseClaim); apart from attempts, which restarts and undelivered answers
  // raise too. A coordinator of an older version leaves it as it is (it never fails a job for it)
  `
  ALTER TABLE jobs ADD COLUMN lost_claims integer NOT NULL DEFAULT 0;
  `,
];

export const PG_SCHEMA_VERSION = PG_MIGRATIONS.length;

/**
 * Bring the schema to the current version, under a transaction-level advisory lock (`lockKey`)
 * so that coordinators starting together migrate one after the other. Returns the version it
 * was at.
 */
export async function migratePg(client: ClientBase, lockKey: string): Promise<number> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [lockKey]);
    await client.query('CREATE TABLE IF NOT EXISTS agentq_schema (version integer NOT NULL)');
    const { rows } = await client.query<{ version: number }>('SELECT version FROM agentq_schema');
    const from = rows[0]?.version ?? 0;
    if (rows.length === 0) await client.query('INSERT INTO agentq_schema (version) VALUES (0)');
    if (from > PG_SCHEMA_VERSION) {
      // the set-up's mistake, said as a configuration error (exit 2), not a crash
      throw new ConfigError(
        'DATABASE_URL',
        `the database is at schema version ${from}, newer than this coordinator knows (${PG_SCHEMA_VERSION}); upgrade agentq`,
      );
    }
    for (let v = from; v < PG_SCHEMA_VERSION; v++) await client.query(PG_MIGRATIONS[v]!);
    if (from < PG_SCHEMA_VERSION) await client.query('UPDATE agentq_schema SET version = $1', [PG_SCHEMA_VERSION]);
    await client.query('COMMIT');
    return from;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
