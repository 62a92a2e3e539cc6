import { isTerminal, type LifecycleEvent } from '@agentq/protocol';
import type pg from 'pg';
import { iso } from '../clock.js';
import { ACTIVE_STATUSES, type JobRow, type LauncherRow, type SessionRow } from '../rows.js';
import { toWireJob, toWireLauncher, toWireSession, type SessionExtras } from '../wire.js';
import type { ChangeSet } from './changes.js';
import { decodeEvents, type EventDraft } from './pg-feed.js';
import { lookupOfNul } from './pg-sql.js';
import { statementName } from './pg-tx.js';
import { decode, JOBS, LAUNCHERS, SESSIONS } from './sql-rows.js';

/* Queries shared by the store's reads and its commits: what the wire views derive from rows. */

/** A pool, a client, or a transaction's pipeline (pg-pipeline.ts): all that these reads need. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(q: { name: string; text: string; values: unknown[] }): Promise<pg.QueryResult<R>>;
}
export const ACTIVE = `('claimed', 'running', 'stopping')`;

export async function rowsOf<R extends pg.QueryResultRow = Record<string, unknown>>(
  db: Queryable,
  text: string,
  values: unknown[] = [],
): Promise<R[]> {
  if (lookupOfNul(text, values)) return [];
  return (await db.query<R>({ name: statementName(text), text, values })).rows;
}

const EMPTY_EXTRAS: SessionExtras = { activeJobId: null, busy: false, jobIds: [], jobCount: 0, children: [], childCount: 0 };

/**
 * Sessions' derived views (active job, busy, the newest `max` job ids and children with their
 * counts), in one round trip. The lists are read backwards by the (session, seq) and (parent,
 * seq) indexes with a LIMIT, and counted on the indexes: never read whole to be cut.
 */
export async function extrasOf(db: Queryable, names: readonly string[], max: number): Promise<Map<string, SessionExtras>> {
  const out = new Map<string, SessionExtras>();
  if (names.length === 0) return out;
  const rows = await rowsOf<{
    name: string;
    active_job_id: string | null;
    busy: boolean;
    job_ids: string[];
    job_count: number;
    children: string[];
    child_count: number;
  }>(
    db,
    `SELECT n.name,
       (SELECT j.id FROM jobs j WHERE j.session_name = n.name AND j.status IN ${ACTIVE} ORDER BY j.seq LIMIT 1) AS active_job_id,
       EXISTS (SELECT 1 FROM jobs j WHERE j.session_name = n.name AND j.completed_at IS NULL) AS busy,
       ARRAY(SELECT t.id FROM (SELECT j.id, j.seq FROM jobs j WHERE j.session_name = n.name ORDER BY j.seq DESC LIMIT $2) t ORDER BY t.seq) AS job_ids,
       (SELECT count(*) FROM jobs j WHERE j.session_name = n.name)::int AS job_count,
       ARRAY(SELECT t.name FROM (SELECT c.name, c.seq FROM sessions c WHERE c.parent_name = n.name ORDER BY c.seq DESC LIMIT $2) t ORDER BY t.seq) AS children,
       (SELECT count(*) FROM sessions c WHERE c.parent_name = n.name)::int AS child_count
     FROM unnest($1::text[]) AS n(name)`,
    [names, max],
  );
  for (const r of rows) {
    out.set(r.name, {
      activeJobId: r.active_job_id,
      busy: r.busy,
      jobIds: r.job_ids,
      jobCount: r.job_count,
      children: r.children,
      childCount: r.child_count,
    });
  }
  return out;
}

/** Every child session of a session, oldest first (a tree walk, not a wire view). */
export async function childNamesOf(db: Queryable, name: string): Promise<string[]> {
  const rows = await rowsOf<{ name: string }>(db, 'SELECT name FROM sessions WHERE parent_name = $1 ORDER BY seq', [name]);
  return rows.map((r) => r.name);
}

/** The derived view of a session created by the transaction, from the rows it holds. */
function extrasOfNew(
  name: string,
  held: { jobs: ReadonlyMap<string, JobRow>; sessions: ReadonlyMap<string, SessionRow> },
  max: number,
): SessionExtras {
  const jobs = [...held.jobs.values()].filter((j) => j.sessionName === name).sort((a, b) => a.seq - b.seq);
  const children = [...held.sessions.values()].filter((s) => s.parentName === name).sort((a, b) => a.seq - b.seq);
  const active = jobs.find((j) => ACTIVE_STATUSES.has(j.status));
  return {
    activeJobId: active?.id ?? null,
    busy: jobs.some((j) => !isTerminal(j.status)),
    jobIds: jobs.slice(-max).map((j) => j.id),
    jobCount: jobs.length,
    children: children.slice(-max).map((c) => c.name),
    childCount: children.length,
  };
}

/** The jobs each launcher holds (claimed, running, stopping), oldest first. */
export async function heldBy(db: Queryable, launcherIds: readonly string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (launcherIds.length === 0) return out;
  const rows = await rowsOf<{ launcher_id: string; ids: string[] }>(
    db,
    `SELECT launcher_id, array_agg(id ORDER BY seq) AS ids FROM jobs
     WHERE launcher_id = ANY($1::text[]) AND status IN ${ACTIVE} GROUP BY launcher_id`,
    [launcherIds],
  );
  for (const r of rows) out.set(r.launcher_id, r.ids);
  return out;
}

/**
 * The lifecycle events of a transaction about to commit, each with its entity as the
 * transaction leaves it (read inside it, so the derived views include its own writes).
 */
export async function eventDrafts(
  db: Queryable,
  changes: ChangeSet,
  held: { jobs: ReadonlyMap<string, JobRow>; sessions: ReadonlyMap<string, SessionRow>; launchers: ReadonlyMap<string, LauncherRow> },
  now: number,
  /** MAX_SESSION_LIST_ITEMS */
  max: number,
): Promise<EventDraft[]> {
  const jobs = new Map<string, JobRow>();
  const sessions = new Map<string, SessionRow>();
  const launchers = new Map<string, LauncherRow>();
  const find = async <T>(
    id: string,
    into: Map<string, T>,
    mine: ReadonlyMap<string, T>,
    changed: Map<string, { before: T | undefined }>,
    sql: string,
    decodeRow: (raw: Record<string, unknown>) => T,
  ) => {
    if (into.has(id)) return;
    let row = mine.get(id) ?? changed.get(id)?.before;
    if (row === undefined) {
      const [raw] = await rowsOf(db, sql, [id]);
      row = raw ? decodeRow(raw) : undefined;
    }
    if (row !== undefined) into.set(id, row);
  };
  for (const e of changes.events) {
    if ('job' in e.ref) await find(e.ref.job, jobs, held.jobs, changes.jobs, 'SELECT * FROM jobs WHERE id = $1', (r) => decode(JOBS, r));
    else if ('session' in e.ref) {
      await find(e.ref.session, sessions, held.sessions, changes.sessions, 'SELECT * FROM sessions WHERE name = $1', (r) => decode(SESSIONS, r));
    } else {
      await find(e.ref.launcher, launchers, held.launchers, changes.launchers, 'SELECT * FROM launchers WHERE id = $1', (r) => decode(LAUNCHERS, r));
    }
  }
  // a session this transaction created has only what the transaction added: no query needed
  const created = [...sessions.keys()].filter((name) => changes.sessions.get(name)?.kind === 'insert');
  const extras = await extrasOf(db, [...sessions.keys()].filter((name) => !created.includes(name)), max);
  for (const name of created) extras.set(name, extrasOfNew(name, held, max));
  const holding = await heldBy(db, [...launchers.keys()]);
  const at = iso(now);
  const out: EventDraft[] = [];
  for (const e of changes.events) {
    if ('job' in e.ref) {
      const row = jobs.get(e.ref.job);
      if (row) out.push({ type: e.type, at, job: toWireJob(row) } as EventDraft);
    } else if ('session' in e.ref) {
      const row = sessions.get(e.ref.session);
      if (row) out.push({ type: e.type, at, session: toWireSession(row, extras.get(row.name) ?? EMPTY_EXTRAS) } as EventDraft);
    } else {
      const row = launchers.get(e.ref.launcher);
      if (row) out.push({ type: e.type, at, launcher: toWireLauncher(row, holding.get(row.id) ?? [], now) } as EventDraft);
    }
  }
  return out;
}

/** The prompts of the jobs, by id (jobs that are gone are missing). */
export async function promptsOf(db: Queryable, jobIds: string[]): Promise<Map<string, string>> {
  const rows = await rowsOf<{ id: string; prompt: string }>(db, 'SELECT id, prompt FROM jobs WHERE id = ANY($1)', [jobIds]);
  return new Map(rows.map((r) => [r.id, r.prompt]));
}

/** Events with afterId < id < beforeId still in the commit log, oldest first (the newest `limit` commits). */
export async function logEvents(
  db: Queryable,
  afterId: number,
  beforeId: number,
  limit: number,
  maxBytes: number,
): Promise<LifecycleEvent[]> {
  // newest first, while the logged events read so far take at most maxBytes (octet_length of a
  // stored value is read from its header; prompts read from the jobs table are not counted)
  const rows = await rowsOf<{ first_event_id: number; events: string }>(
    db,
    `SELECT first_event_id, events FROM (
       SELECT id, first_event_id, events, sum(octet_length(events)) OVER (ORDER BY id DESC) - octet_length(events) AS before
       FROM commit_log
       WHERE last_event_id > $1 AND first_event_id < $2 AND last_event_id >= first_event_id ORDER BY id DESC LIMIT $3
     ) newest WHERE before < $4 ORDER BY id DESC`,
    [afterId, beforeId, limit, maxBytes],
  );
  rows.reverse();
  const decoded = await decodeEvents(
    rows.map((r) => r.events),
    (ids) => promptsOf(db, ids),
  );
  const out: LifecycleEvent[] = [];
  for (const [n, r] of rows.entries()) {
    decoded[n]!.forEach((d, i) => {
      const id = r.first_event_id + i;
      if (id > afterId && id < beforeId) out.push({ ...d, id } as LifecycleEvent);
    });
  }
  return out;
}
