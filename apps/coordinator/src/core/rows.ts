import type {
  CallbackNotification,
  ErrorCode,
  Job,
  JobStatus,
  JobType,
  Labels,
  LauncherStatus,
  SessionMessage,
  StopOutcome,
  StopReason,
  Usage,
} from '@agentq/protocol';

/**
 * Why a job was asked to stop: the wire's StopReason, or `tree` — a stop of its session's whole
 * tree (POST /sessions/{name}/stop?tree=true), `requested` on the wire. Its outcome does not wake
 * a parent that holds its deliveries (callbacks.ts), as an outcome of a child stopped alone does.
 */
export type StopCause = StopReason | 'tree';

/*
 * The rows the store keeps: plain data, one interface per entity. A committed row is never
 * mutated; a change makes a new row (the row with the patch over it: row-versions.ts), so a
 * reader holding a row always sees one consistent version. What can be derived (a session's active job, a launcher's jobs, the
 * ready queue) is not stored in rows: the store keeps it as indexes (memory) or queries (SQL).
 */

/**
 * Where a session lives once its first job ran (see docs/routing.md): its host, or, for a session
 * of a portable executor (`hostId` null), only the executor type that can continue it.
 */
export interface Affinity {
  hostId: string | null;
  /** the launcher's hostname, for messages */
  hostname: string | null;
  executorType: string | null;
  workingDir: string | null;
}

export interface JobRow {
  /** creation order: FIFO position and list cursor; never reused, survives restarts */
  readonly seq: number;
  readonly id: string;
  readonly type: JobType;
  readonly sessionName: string;
  readonly agentName: string | null;
  readonly prompt: string;
  readonly projectDir: string | null;
  readonly parentSessionName: string | null;
  readonly createdAt: number;
  readonly timeoutMs: number | null;
  /** child jobs whose outcomes this resume delivers (a callback) */
  readonly callbackOf: readonly string[] | null;
  /** messages this resume delivers */
  readonly messageIds: readonly string[] | null;
  readonly requires: Labels | null;
  readonly maxCostUsd: number | null;
  readonly createdBy: string | null;
  readonly status: JobStatus;
  readonly launcherId: string | null;
  readonly error: string | null;
  readonly errorCode: string | null;
  readonly result: string | null;
  readonly claimedAt: number | null;
  readonly startedAt: number | null;
  readonly completedAt: number | null;
  readonly updatedAt: number;
  readonly stopRequestedAt: number | null;
  readonly stopReason: StopCause | null;
  readonly stoppedBy: string | null;
  /** a stop its launcher has not been told about yet (through a poll answer) */
  readonly stopPending: boolean;
  readonly executorSessionId: string | null;
  /** every claim, those whose answer was never delivered or that a coordinator restart took back too */
  readonly attempts: number;
  /**
   * claims that ended without a start by the job's own account: its lease expired, or its launcher
   * was lost (not an undelivered answer, not a coordinator restart); JOB_MAX_CLAIMS bounds it (jobs.ts loseClaim)
   */
  readonly lostClaims: number;
  readonly usage: Usage | null;
  readonly costUsd: number | null;
  readonly numTurns: number | null;
  readonly durationApiMs: number | null;
  /**
   * Set while the job may be claimed: it is pending, first of its session, and the session has no
   * active job. `routeKey` names the launchers that may take it (routing.ts).
   */
  readonly readySince: number | null;
  readonly routeKey: string | null;
  /** bytes of output received so far (the stream's length) */
  readonly outputBytes: number;
  /**
   * SHA-256 (hex) of the per-job agent token minted when the job was last claimed (auth on; see
   * core/agent-tokens.ts). Valid only while the job is active; never leaves the coordinator.
   */
  readonly agentTokenHash: string | null;
}

/**
 * A change to a job row, as the lifecycle modules build it: writable, so that a patch is built as
 * one object (fields set on it) rather than spread from several: V8 builds `{ ...a, x, ...b }`
 * property by property through its runtime, several microseconds for a claim's patch.
 */
export type JobPatch = { -readonly [K in keyof JobRow]?: JobRow[K] };
/** A session's patch, built as one object (see JobPatch). */
export type SessionPatch = { -readonly [K in keyof SessionRow]?: SessionRow[K] };

export interface SessionRow {
  /** creation order: list cursor */
  readonly seq: number;
  readonly name: string;
  readonly agentName: string | null;
  readonly projectDir: string | null;
  readonly parentName: string | null;
  /** the top of its tree (itself for a root): where the tree's budget and sums live */
  readonly rootName: string;
  readonly depth: number;
  readonly createdAt: number;
  readonly createdBy: string | null;
  readonly updatedAt: number;
  readonly executorSessionId: string | null;
  readonly lastJobStatus: JobStatus | null;
  readonly lastResult: string | null;
  readonly lastError: string | null;
  /** child outcomes waiting to be delivered */
  readonly callbacks: readonly CallbackNotification[];
  /** messages waiting to be delivered */
  readonly messages: readonly SessionMessage[];
  /** the delivery resume job in flight (callbacks and/or messages), and what it carries */
  readonly deliveryJobId: string | null;
  readonly inFlight: { readonly callbacks: readonly CallbackNotification[]; readonly messages: readonly SessionMessage[] } | null;
  /**
   * Set when a delivery failed (its notifications went back to the queue) or the session's own job
   * was stopped by request: queued notifications then wait for the next child outcome, message or
   * own job instead of going at once (a parent whose every turn fails would loop otherwise).
   */
  readonly deliveriesHeld: boolean;
  readonly affinity: Affinity | null;
  /** false once the session can no longer take input (its conversation never started) */
  readonly acceptsInput: boolean;
  readonly usage: Usage;
  readonly costUsd: number;
  readonly treeUsage: Usage;
  readonly treeCostUsd: number;
  readonly budgetUsd: number | null;
  /** the start job's `requires` (null: none): the default of the session's later jobs */
  readonly requires: Labels | null;
}

export interface LauncherRow {
  readonly id: string;
  readonly hostname: string | null;
  readonly projectDir: string | null;
  readonly executorType: string | null;
  readonly maxJobs: number | null;
  readonly version: string | null;
  readonly registeredAt: number;
  /** last sign of life; updated outside transactions (store.touchLauncher) */
  readonly lastSeen: number;
  readonly status: LauncherStatus;
  readonly staleAt: number | null;
  /** effective labels: what it sent plus `hostname` and `executor` */
  readonly labels: Labels;
  /** normalised project roots; empty = it serves no named directory */
  readonly roots: readonly string[];
  /** host identity for session affinity (its own key, else `hostname:<hostname>`), null if unknown */
  readonly hostId: string | null;
  readonly portable: boolean;
  readonly createdBy: string | null;
  /**
   * SHA-256 (hex) of its launcher token, when one was issued; of each of its tokens, newest
   * first and separated by spaces, when a registration sent again (`registration_key`) was
   * answered more than once: any of those answers may be the one the launcher received.
   */
  readonly tokenHash: string | null;
  /**
   * The `registration_key` it registered with, scoped to its token (`<created_by or -> <key>`),
   * while a retry of that registration is answered with this launcher: dropped when another
   * registration takes the key from it (it is stale or deregistering by then). Unique.
   */
  readonly registrationKey: string | null;
}

/**
 * A host identity bound to the token that first registered a launcher with it (authentication
 * on): launchers of that host may only register with that token while it is valid (launchers.ts).
 */
export interface HostBindingRow {
  readonly hostId: string;
  /** the token's name in AUTH_TOKENS_FILE */
  readonly tokenName: string;
  readonly boundAt: number;
}

/**
 * An `Idempotency-Key` seen on `POST /jobs` (and `/jobs/batch`) or on a stop: the request's hash,
 * the jobs it created or stopped, and for a stop what it answered (stops.ts).
 */
export interface IdempotencyRow {
  readonly key: string;
  readonly requestHash: string;
  readonly jobIds: readonly string[];
  readonly createdAt: number;
  /** a stop's answer (null or absent for a create) */
  readonly answer?: StopRecord | null;
}

/**
 * What a stop with an Idempotency-Key answered, to answer it again: a job stop's outcome and the
 * job as answered, its long texts cut (`cut`: some were; stops.ts, keptJob), answered again only
 * once history retention has deleted the job (absent in rows written before it was kept); a session stop's outcome, status and session per job of `jobIds`
 * (in order), or its refusal when there was nothing to stop (a later stop with the key must not
 * stop what started since).
 *
 * `unfinished`: a tree stop between its passes (stops.ts), with the sessions its passes have
 * stopped so far. A stop that failed after its first pass leaves it: the same key then carries
 * out the remaining passes (over the other sessions of the tree) rather than answering a part of
 * the stop as the whole. Absent once the stop is finished (and in rows of non-tree stops).
 */
export type StopRecord =
  | { readonly stop: 'job'; readonly outcome: StopOutcome; readonly job?: Job; readonly cut?: true }
  | {
      readonly stop: 'session';
      readonly stopped: ReadonlyArray<{ readonly outcome: StopOutcome; readonly status: JobStatus; readonly session_name: string }>;
      readonly unfinished?: { readonly seen: readonly string[] };
    }
  | { readonly stop: 'session'; readonly refused: { readonly code: ErrorCode; readonly message: string; readonly details?: Record<string, unknown> } };

export const ZERO_USAGE: Usage = Object.freeze({
  input_tokens: 0,
  output_tokens: 0,
  cache_read_input_tokens: 0,
  cache_creation_input_tokens: 0,
});

export function addUsage(a: Usage, b: Usage | null): Usage {
  if (!b) return a;
  return {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cache_read_input_tokens: a.cache_read_input_tokens + b.cache_read_input_tokens,
    cache_creation_input_tokens: a.cache_creation_input_tokens + b.cache_creation_input_tokens,
  };
}

/** A resume the coordinator queued to deliver child outcomes or messages (callbacks.ts), not one a client sent. */
export const isDelivery = (job: JobRow): boolean => job.callbackOf !== null || job.messageIds !== null;

export const ACTIVE_STATUSES: ReadonlySet<JobStatus> = new Set(['claimed', 'running', 'stopping']);
export const isActive = (status: JobStatus): boolean => ACTIVE_STATUSES.has(status);

/**
 * Whether a session tree has spent its root's budget: its child sessions take no new work
 * (budget.ts). Costs add up in binary floating point (0.7 + 0.2 + 0.1 is 0.9999999999999999): a
 * tree within a billionth of a dollar of its budget has spent it.
 */
export const treeSpent = (root: SessionRow | undefined): boolean =>
  root?.budgetUsd != null && root.treeCostUsd >= root.budgetUsd - COST_EPSILON_USD;
export const COST_EPSILON_USD = 1e-9;

/**
 * Whether a session holds no input that a delivery may still take: no queued child outcomes or
 * messages, or none that can ever go: a closed session takes no input, and a child session of a
 * tree that has spent its budget no new job (no API raises a budget). Retention removes those
 * with what they hold. `root`: the session's root (itself for a root).
 */
export const holdsNoInput = (s: SessionRow, root: SessionRow | undefined): boolean =>
  (s.callbacks.length === 0 && s.messages.length === 0) || !s.acceptsInput || (s.parentName !== null && treeSpent(root));

/**
 * The UTF-8 bytes of the results and errors of the child outcomes a session holds: those queued
 * for its next delivery, and those a delivery in flight carries (kept until it completes, to be
 * queued again if it does not). What MAX_QUEUED_BYTES counts of them.
 */
export function heldOutcomeBytes(s: Pick<SessionRow, 'callbacks' | 'inFlight'>): number {
  let n = 0;
  for (const list of [s.callbacks, s.inFlight?.callbacks ?? []]) for (const o of list) n += outcomeBytes(o);
  return n;
}

/**
 * The size of each outcome, measured once: a session's list is counted again at each change (a
 * child's outcome added), and the lists share their outcomes, so a flood of children with results
 * of megabytes would otherwise scan every held result again for each new one. A memo of a pure
 * function of immutable objects, weakly held: nothing in it outlives its outcome.
 */
const outcomeSizes = new WeakMap<CallbackNotification, number>();
function outcomeBytes(o: CallbackNotification): number {
  let n = outcomeSizes.get(o);
  if (n === undefined) {
    n = (o.result === null ? 0 : Buffer.byteLength(o.result, 'utf8')) + (o.error === null ? 0 : Buffer.byteLength(o.error, 'utf8'));
    outcomeSizes.set(o, n);
  }
  return n;
}

/** The UTF-8 bytes of queued messages' texts (what MAX_QUEUED_BYTES counts of them). */
export function queuedMessageBytes(messages: readonly SessionMessage[]): number {
  let n = 0;
  for (const m of messages) n += Buffer.byteLength(m.text, 'utf8');
  return n;
}
