import type { HostBindingRow, IdempotencyRow, JobRow, LauncherRow, SessionRow } from '../rows.js';

/*
 * How rows map to SQL columns (SQLite and PostgreSQL alike): one entry per field, its column
 * (snake_case of the field) and how its value is stored. Objects and arrays are JSON text,
 * booleans integers (0/1).
 */
type Codec = 'plain' | 'json' | 'bool';

export interface Table<T> {
  readonly name: string;
  /** the key column and its field */
  readonly key: keyof T & string;
  /** SQLite: the field that is the table's rowid (INTEGER PRIMARY KEY), when it has one */
  readonly rowid?: keyof T & string;
  readonly fields: ReadonlyArray<readonly [keyof T & string, Codec]>;
}

const columns = new Map<string, string>();
/** A field's column: its snake_case (remembered: it is asked for every field of every write). */
export function column(field: string): string {
  let name = columns.get(field);
  if (name === undefined) columns.set(field, (name = field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)));
  return name;
}

export const JOBS: Table<JobRow> = {
  name: 'jobs',
  key: 'id',
  rowid: 'seq',
  fields: [
    ['seq', 'plain'],
    ['id', 'plain'],
    ['type', 'plain'],
    ['sessionName', 'plain'],
    ['agentName', 'plain'],
    ['prompt', 'plain'],
    ['projectDir', 'plain'],
    ['parentSessionName', 'plain'],
    ['createdAt', 'plain'],
    ['timeoutMs', 'plain'],
    ['callbackOf', 'json'],
    ['messageIds', 'json'],
    ['requires', 'json'],
    ['maxCostUsd', 'plain'],
    ['createdBy', 'plain'],
    ['status', 'plain'],
    ['launcherId', 'plain'],
    ['error', 'plain'],
    ['errorCode', 'plain'],
    ['result', 'plain'],
    ['claimedAt', 'plain'],
    ['startedAt', 'plain'],
    ['completedAt', 'plain'],
    ['updatedAt', 'plain'],
    ['stopRequestedAt', 'plain'],
    ['stopReason', 'plain'],
    ['stoppedBy', 'plain'],
    ['stopPending', 'bool'],
    ['executorSessionId', 'plain'],
    ['attempts', 'plain'],
    ['usage', 'json'],
    ['costUsd', 'plain'],
    ['numTurns', 'plain'],
    ['durationApiMs', 'plain'],
    ['readySince', 'plain'],
    ['routeKey', 'plain'],
    ['outputBytes', 'plain'],
    // column agent_token_hash (migration 3)
    ['agentTokenHash', 'plain'],
    // column lost_claims (SQLite migration 11, PostgreSQL migration 9)
    ['lostClaims', 'plain'],
  ],
};

export const SESSIONS: Table<SessionRow> = {
  name: 'sessions',
  key: 'name',
  rowid: 'seq',
  fields: [
    ['seq', 'plain'],
    ['name', 'plain'],
    ['agentName', 'plain'],
    ['projectDir', 'plain'],
    ['parentName', 'plain'],
    ['rootName', 'plain'],
    ['depth', 'plain'],
    ['createdAt', 'plain'],
    ['createdBy', 'plain'],
    ['updatedAt', 'plain'],
    ['executorSessionId', 'plain'],
    ['lastJobStatus', 'plain'],
    ['lastResult', 'plain'],
    ['lastError', 'plain'],
    ['callbacks', 'json'],
    ['messages', 'json'],
    ['deliveryJobId', 'plain'],
    ['inFlight', 'json'],
    ['deliveriesHeld', 'bool'],
    ['affinity', 'json'],
    ['acceptsInput', 'bool'],
    ['usage', 'json'],
    ['costUsd', 'plain'],
    ['treeUsage', 'json'],
    ['treeCostUsd', 'plain'],
    ['budgetUsd', 'plain'],
    ['requires', 'json'],
  ],
};

export const LAUNCHERS: Table<LauncherRow> = {
  name: 'launchers',
  key: 'id',
  fields: [
    ['id', 'plain'],
    ['hostname', 'plain'],
    ['projectDir', 'plain'],
    ['executorType', 'plain'],
    ['maxJobs', 'plain'],
    ['version', 'plain'],
    ['registeredAt', 'plain'],
    ['lastSeen', 'plain'],
    ['status', 'plain'],
    ['staleAt', 'plain'],
    ['labels', 'json'],
    ['roots', 'json'],
    ['hostId', 'plain'],
    ['portable', 'bool'],
    ['createdBy', 'plain'],
    ['tokenHash', 'plain'],
    ['registrationKey', 'plain'],
  ],
};

export const IDEMPOTENCY: Table<IdempotencyRow> = {
  name: 'idempotency',
  key: 'key',
  fields: [
    ['key', 'plain'],
    ['requestHash', 'plain'],
    ['jobIds', 'json'],
    ['createdAt', 'plain'],
    ['answer', 'json'],
  ],
};

export const HOST_BINDINGS: Table<HostBindingRow> = {
  name: 'host_bindings',
  key: 'hostId',
  fields: [
    ['hostId', 'plain'],
    ['tokenName', 'plain'],
    ['boundAt', 'plain'],
  ],
};

const codecs = new Map<Table<never>, Map<string, Codec>>();
function codecOf<T>(table: Table<T>, field: string): Codec {
  let map = codecs.get(table as Table<never>);
  if (!map) codecs.set(table as Table<never>, (map = new Map(table.fields.map(([f, c]) => [f, c]))));
  return map.get(field) ?? 'plain';
}

/** A field's value as stored. */
export function encode<T>(table: Table<T>, field: string, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  const codec = codecOf(table, field);
  if (codec === 'json') return JSON.stringify(value);
  if (codec === 'bool') return value ? 1 : 0;
  return value;
}

/** A row from its stored columns. */
export function decode<T>(table: Table<T>, raw: Record<string, unknown>): T {
  const row: Record<string, unknown> = {};
  for (const [field, codec] of table.fields) {
    const v = raw[column(field)];
    if (v === null || v === undefined) row[field] = null;
    else if (codec === 'json') row[field] = JSON.parse(v as string);
    else if (codec === 'bool') row[field] = Boolean(v);
    else if (typeof v === 'bigint') row[field] = Number(v);
    else row[field] = v;
  }
  return row as T;
}
