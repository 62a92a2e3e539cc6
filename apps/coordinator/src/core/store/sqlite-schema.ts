import type { Database } from 'better-sqlite3';
import { ConfigError } from '../../config.js';

/*
 * The SQLite schema, as numbered migrations. `PRAGMA user_version` says how many have run; every
 * start runs the missing ones, each in its own transaction. Never edit a released migration: add
 * the next one.
 */
export const MIGRATIONS: readonly string[] = [
  // 1: jobs, sessions, launchers, and what survives a restart beside them
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
  CREATE TABLE jobs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    session_name TEXT NOT NULL,
    agent_name TEXT,
    prompt TEXT NOT NULL,
    project_dir TEXT,
    parent_session_name TEXT,
    created_at INTEGER NOT NULL,
    timeout_ms INTEGER,
    callback_of TEXT,
    message_ids TEXT,
    requires TEXT,
    max_cost_usd REAL,
    created_by TEXT,
    status TEXT NOT NULL,
    launcher_id TEXT,
    error TEXT,
    error_code TEXT,
    result TEXT,
    claimed_at INTEGER,
    started_at INTEGER,
    completed_at INTEGER,
    updated_at INTEGER NOT NULL,
    stop_requested_at INTEGER,
    stop_reason TEXT,
    stopped_by TEXT,
    stop_pending INTEGER NOT NULL DEFAULT 0,
    executor_session_id TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    usage TEXT,
    cost_usd REAL,
    num_turns INTEGER,
    duration_api_ms INTEGER,
    ready_since INTEGER,
    route_key TEXT,
    output_bytes INTEGER NOT NULL DEFAULT 0
  ) STRICT;
  CREATE INDEX jobs_by_session ON jobs (session_name, seq);
  CREATE INDEX jobs_by_launcher ON jobs (launcher_id, seq);
  CREATE INDEX jobs_by_status ON jobs (status, seq);
  CREATE INDEX jobs_by_end ON jobs (completed_at) WHERE completed_at IS NOT NULL;
  CREATE TABLE sessions (
    seq INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    agent_name TEXT,
    project_dir TEXT,
    parent_name TEXT,
    root_name TEXT NOT NULL,
    depth INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT,
    updated_at INTEGER NOT NULL,
    executor_session_id TEXT,
    last_job_status TEXT,
    last_result TEXT,
    last_error TEXT,
    callbacks TEXT NOT NULL,
    messages TEXT NOT NULL,
    delivery_job_id TEXT,
    in_flight TEXT,
    deliveries_held INTEGER NOT NULL,
    affinity TEXT,
    accepts_input INTEGER NOT NULL,
    usage TEXT NOT NULL,
    cost_usd REAL NOT NULL,
    tree_usage TEXT NOT NULL,
    tree_cost_usd REAL NOT NULL,
    budget_usd REAL
  ) STRICT;
  CREATE INDEX sessions_by_parent ON sessions (parent_name, seq);
  CREATE INDEX sessions_by_update ON sessions (updated_at);
  CREATE TABLE launchers (
    id TEXT PRIMARY KEY,
    hostname TEXT,
    project_dir TEXT,
    executor_type TEXT,
    max_jobs INTEGER,
    version TEXT,
    registered_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    status TEXT NOT NULL,
    stale_at INTEGER,
    labels TEXT NOT NULL,
    roots TEXT NOT NULL,
    host_id TEXT,
    portable INTEGER NOT NULL,
    created_by TEXT,
    token_hash TEXT UNIQUE
  ) STRICT;
  `,
  // 2: job output (batches at their byte offsets) and Idempotency-Keys
  `
  CREATE TABLE job_output (
    job_id TEXT NOT NULL,
    byte_offset INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (job_id, byte_offset)
  ) STRICT, WITHOUT ROWID;
  CREATE TABLE idempotency (
    key TEXT PRIMARY KEY,
    request_hash TEXT NOT NULL,
    job_ids TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX idempotency_by_age ON idempotency (created_at);
  `,
  // 3: the SHA-256 of a job's per-job agent token (issue 12; null when none was minted)
  `
  ALTER TABLE jobs ADD COLUMN agent_token_hash TEXT;
  `,
  // 4: prompts in their own table (sqlite-prompts.ts): an UPDATE of a job no longer rewrites them
  `
  CREATE TABLE job_prompts (
    job_id TEXT PRIMARY KEY,
    prompt TEXT NOT NULL
  ) STRICT;
  INSERT INTO job_prompts (job_id, prompt) SELECT id, prompt FROM jobs;
  UPDATE jobs SET prompt = '';
  `,
  // 5: fewer index pages per commit (docs/benchmarks.md, throughput). Every status change moved a
  // job in jobs_by_status: two pages written per transition, three transitions per job. Non-
  // terminal jobs are all held in memory (SqliteStore lists them from there), so only ended jobs
  // are indexed by status, once, when they end. A job that no launcher holds, a root session:
  // neither is in the index of launchers or of parents (no query asks for a NULL there).
  `
  DROP INDEX jobs_by_status;
  CREATE INDEX jobs_ended ON jobs (status, seq) WHERE completed_at IS NOT NULL;
  DROP INDEX jobs_by_launcher;
  CREATE INDEX jobs_by_launcher ON jobs (launcher_id, seq) WHERE launcher_id IS NOT NULL;
  DROP INDEX sessions_by_parent;
  CREATE INDEX sessions_by_parent ON sessions (parent_name, seq) WHERE parent_name IS NOT NULL;
  `,
  // 6: a session's required labels, the default of its later jobs (resumes, deliveries)
  `
  ALTER TABLE sessions ADD COLUMN requires TEXT;
  `,
  // 7: host identities bound to the token that first registered them (launchers.ts)
  `
  CREATE TABLE host_bindings (
    host_id TEXT PRIMARY KEY,
    token_name TEXT NOT NULL,
    bound_at INTEGER NOT NULL
  ) STRICT;
  `,
  // 8: the roots of the session trees, newest first (GET /sessions?root=true, the dashboard's
  // tree). Migration 5 left roots out of sessions_by_parent, so a page of roots walked every
  // session newer than it, children included: a tree of a million children was read through at
  // each page. Only roots are in this index, each written once, when its session is made.
  `
  CREATE INDEX sessions_roots ON sessions (seq) WHERE parent_name IS NULL;
  `,
  // 9: the registration_key a launcher registered with (launchers.ts): a retry of a registration
  // whose answer was lost is answered with the same launcher instead of a second one
  `
  ALTER TABLE launchers ADD COLUMN registration_key TEXT;
  CREATE UNIQUE INDEX launchers_by_registration_key ON launchers (registration_key) WHERE registration_key IS NOT NULL;
  `,
  // 10: what a stop with an Idempotency-Key answered (stops.ts), answered again to a retry of it
  `
  ALTER TABLE idempotency ADD COLUMN answer TEXT;
  `,
  // 11: claims of a job lost without a start (lease expired, launcher lost), bounded by
  // JOB_MAX_CLAIMS (jobs.ts loseClaim); apart from attempts, which restarts and undelivered answers raise too
  `
  ALTER TABLE jobs ADD COLUMN lost_claims INTEGER NOT NULL DEFAULT 0;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** Bring `db` to `upTo` (default: the current version). Returns the version it was at. */
export function migrate(db: Database, upTo = SCHEMA_VERSION): number {
  const from = db.pragma('user_version', { simple: true }) as number;
  if (from > SCHEMA_VERSION) {
    // the set-up's mistake, said as a configuration error (exit 2), not a crash
    throw new ConfigError('DATABASE_URL', `the database is at schema version ${from}, newer than this coordinator knows (${SCHEMA_VERSION}); upgrade agentq`);
  }
  for (let v = from; v < upTo; v++) {
    db.transaction(() => {
      db.exec(MIGRATIONS[v]!);
      db.pragma(`user_version = ${v + 1}`);
    })();
  }
  return from;
}
