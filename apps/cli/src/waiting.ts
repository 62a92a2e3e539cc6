import type { AgentqClient } from '@agentq/client';
import { MAX_WAIT_JOB_IDS, type Job, type WaitMode } from '@agentq/protocol';
import { Reconnecting } from './reconnect.js';

/**
 * Waiting for jobs without polling: each call is one long-poll that the coordinator answers as
 * soon as the job turns terminal. A call asks to be held for one round at most, so a longer (or
 * unbounded) wait is a loop of calls until the CLI's own deadline. A coordinator that restarts
 * meanwhile does not end the wait: its calls are sent again until it is back (reconnect.ts).
 *
 * Why rounds this short (the coordinator would hold a call for an hour): a connection can die
 * without closing (a NAT or proxy that forgot it, a network that went to sleep), and then only
 * the call's own time limit (its hold and the client's slack) tells. With hour-long calls, a
 * job that ended meanwhile was seen an hour late; with rounds, within a round and the slack,
 * on a new connection (or the next coordinator URL).
 */
export const WAIT_ROUND_MS = 30_000;

export interface WaitOptions {
  /** give up after this long; undefined waits until the condition is met */
  timeoutMs: number | undefined;
  /** aborting ends the wait with the last snapshot (the jobs keep running) */
  signal?: AbortSignal | undefined;
  now: () => number;
  /** called with every snapshot the coordinator answers */
  onSnapshot?: (jobs: readonly Job[]) => void;
  /**
   * Every call must be answered within this long past its hold (a round at most, and no later
   * than the wait's deadline). A coordinator that takes calls but does not answer them (paused,
   * or cut off by the network) is then given up on by the deadline and this grace, instead of the
   * client's long-poll slack (30 s) past each call's hold: the MCP tool's caller gives up on it
   * soon after (docs/mcp.md).
   */
  answerGraceMs?: number;
  /** the longest one call is held (default WAIT_ROUND_MS; tests make it short) */
  roundMs?: number;
  /** told before each pause while the coordinator is away (reconnect.ts) */
  onRetry?: (err: unknown, waitMs: number) => void;
  /** told when the coordinator answers again after an outage, with how long it was away */
  onBack?: (outageMs: number) => void;
}

const aborted = (signal: AbortSignal | undefined) => signal?.aborted === true;

/**
 * How long an interrupted wait may spend reading the jobs once more. Its last snapshot is from
 * the last answer, which may be long ago (a long-poll answers only when a job ends): a job shown
 * `pending` may have been running for minutes. A coordinator that does not answer that fast
 * leaves the last snapshot as it is.
 */
export const FRESH_READ_MS = 2_000;

/** The jobs as they are now, for a wait cut short by its signal; the snapshots given where they cannot be read. */
async function reread(client: AgentqClient, jobs: readonly Job[]): Promise<Job[]> {
  const active = jobs.filter((j) => !j.terminal).map((j) => j.job_id);
  if (active.length === 0) return [...jobs];
  const signal = AbortSignal.timeout(FRESH_READ_MS);
  // one round that holds nothing; a coordinator that does not answer is not waited for
  const once = new Reconnecting({ deadline: 0, now: Date.now, signal });
  try {
    const { jobs: now } = await waitRound(client, active, 'all', () => 0, once, signal, () => ({}));
    const byId = new Map(now.map((j) => [j.job_id, j]));
    return jobs.map((j) => byId.get(j.job_id) ?? j);
  } catch {
    // unreachable, slow or refused: the snapshots already held are all there is
    return [...jobs];
  }
}

/** Wait for one job to turn terminal; returns the last snapshot (terminal or not). */
export async function waitForJob(
  client: AgentqClient,
  jobId: string,
  initial: Job | undefined,
  o: WaitOptions,
): Promise<Job> {
  const deadline = o.timeoutMs === undefined ? Infinity : o.now() + o.timeoutMs;
  const reconnect = new Reconnecting({ deadline, now: o.now, signal: o.signal, reached: initial !== undefined, onRetry: o.onRetry, onBack: o.onBack });
  const hold = () => Math.min(Math.max(0, deadline - o.now()), o.roundMs ?? WAIT_ROUND_MS);
  const answerBy = (): CallLimit => (o.answerGraceMs === undefined ? {} : { headersTimeoutMs: hold() + o.answerGraceMs });
  let job = initial;
  for (;;) {
    if (job && aborted(o.signal)) return (await reread(client, [job]))[0]!;
    if (job && (job.terminal || o.now() >= deadline)) return job;
    try {
      job = await reconnect.call(() => client.waitJob(jobId, hold(), { signal: o.signal, ...answerBy(), ...OWN_RETRIES }));
    } catch (err) {
      // interrupted: the next turn reads the job once more and ends
      if (!aborted(o.signal) || !job) throw err;
      continue;
    }
    o.onSnapshot?.([job]);
  }
}

export interface WaitManyOptions extends WaitOptions {
  /**
   * any: whether a job that had already ended when the wait began ends it (default true). False:
   * only one of the jobs still active at the first snapshot does (the MCP tool's default).
   */
  includeTerminal?: boolean;
  /**
   * The coordinator is known to be there (the caller has reached it before): one that cannot be
   * reached at the first call is away (restarting), and waited for, not reported at once.
   */
  reached?: boolean;
}

export interface WaitManyOutcome {
  /** the condition was met: any → a job (that counts) terminal; all → every known job terminal */
  done: boolean;
  /** last snapshot of every known job, in the order the ids were given */
  jobs: Job[];
  /** ids the coordinator does not know; ignored by the wait */
  notFound: string[];
}

/** Wait for the first (`any`) or every (`all`) job to turn terminal. */
export async function waitForJobs(
  client: AgentqClient,
  ids: readonly string[],
  mode: WaitMode,
  o: WaitManyOptions,
): Promise<WaitManyOutcome> {
  const deadline = o.timeoutMs === undefined ? Infinity : o.now() + o.timeoutMs;
  const reconnect = new Reconnecting({ deadline, now: o.now, signal: o.signal, reached: o.reached ?? false, onRetry: o.onRetry, onBack: o.onBack });
  const roundMs = o.roundMs ?? WAIT_ROUND_MS;
  // (the first call holds nothing, but may take as long as the others)
  const answerBy = (): CallLimit =>
    o.answerGraceMs === undefined ? {} : { headersTimeoutMs: Math.min(Math.max(0, deadline - o.now()), roundMs) + o.answerGraceMs };
  const unique = [...new Set(ids)];
  const latest = new Map<string, Job>();
  const notFound = new Set<string>();
  /** any without includeTerminal: the jobs still active at the first snapshot, the only ones that count */
  let counted: ReadonlySet<string> | undefined;
  const counts = (id: string) => counted === undefined || counted.has(id);
  const outcome = (): WaitManyOutcome => {
    const jobs = unique.flatMap((id) => latest.get(id) ?? []);
    const judged = jobs.filter((j) => counts(j.job_id));
    const done =
      jobs.length > 0 && (mode === 'any' ? judged.length === 0 || judged.some((j) => j.terminal) : jobs.every((j) => j.terminal));
    return { done, jobs, notFound: unique.filter((id) => notFound.has(id)) };
  };
  let first = true;
  for (;;) {
    // an ended job stays ended: later calls watch the others (and those without a snapshot yet)
    const watched = unique.filter((id) => !notFound.has(id) && !latest.get(id)?.terminal && counts(id));
    const now = outcome();
    if (!first && aborted(o.signal)) {
      for (const job of await reread(client, [...latest.values()])) latest.set(job.job_id, job);
      return outcome();
    }
    if (!first && (now.done || watched.length === 0 || o.now() >= deadline)) return now;
    // the first call only takes a snapshot: it finds unknown ids and already-terminal jobs at once
    const holdFirst = first;
    const hold = () => (holdFirst ? 0 : Math.min(Math.max(0, deadline - o.now()), roundMs));
    let res: RoundAnswer;
    try {
      res = await waitRound(client, watched, mode, hold, reconnect, o.signal, answerBy);
    } catch (err) {
      // interrupted: the next turn reads the jobs once more and ends
      if (!aborted(o.signal) || latest.size === 0) throw err;
      continue;
    }
    for (const job of res.jobs) latest.set(job.job_id, job);
    for (const id of res.notFound) {
      // a job known earlier and gone now (history retention deleted it, or a coordinator with a
      // memory store restarted): not found from now on, not "still running" as its last snapshot
      notFound.add(id);
      latest.delete(id);
    }
    if (first && mode === 'any' && o.includeTerminal === false) {
      counted = new Set(res.jobs.filter((j) => !j.terminal).map((j) => j.job_id));
    }
    first = false;
    o.onSnapshot?.(res.jobs);
  }
}

/** How long a call of a wait may take to be answered (unset: the client's own bound). */
type CallLimit = { headersTimeoutMs?: number; overloadRetries?: number };

/**
 * A wait's calls honour a Retry-After through Reconnecting, which knows the wait's deadline (and
 * gives up at once on one past it); the client's own waits for it would hold a call past the
 * deadline (twice a Retry-After of up to a minute: `--timeout 2s` ended after 8 s on a 4 s one).
 */
const OWN_RETRIES = { overloadRetries: 0 } as const;

/** What one round of a wait answered. */
interface RoundAnswer {
  /** the snapshots, read one by one when they did not fit in the answer */
  jobs: Job[];
  notFound: string[];
  /** the coordinator's verdict on these ids (any: one ended; all: every one ended) */
  done: boolean;
}

/**
 * One round of a wait: one long-poll of `ids`, or, past MAX_WAIT_JOB_IDS, one per group of that
 * many, all at once. any: the first group with a job that ended ends the round; the long-polls
 * of the others are cut, and their snapshots read again at once.
 */
async function waitRound(
  client: AgentqClient,
  ids: readonly string[],
  mode: WaitMode,
  hold: () => number,
  reconnect: Reconnecting,
  signal: AbortSignal | undefined,
  answerBy: () => CallLimit,
): Promise<RoundAnswer> {
  const poll = async (group: readonly string[], holdMs: () => number, s: AbortSignal | undefined): Promise<RoundAnswer> => {
    // any: the server's any-wait only watches jobs still active when a call arrives, so a job
    // that ended between two calls (after the snapshot, between two hour-long calls, while the
    // coordinator restarted) would be missed; include_terminal makes such a job end the next
    // call at once
    const body = mode === 'any' ? { include_terminal: true } : {};
    const res = await reconnect.call(
      () => client.waitJobs({ job_ids: [...group], mode, timeout_ms: holdMs(), ...body }, { signal: s, ...answerBy(), ...OWN_RETRIES }),
      s,
    );
    // snapshots that did not fit in the answer (MAX_ANSWER_BYTES) are read one by one
    const omitted = await reconnect.call(() => readEach(client, res.omitted ?? [], s, { ...answerBy(), ...OWN_RETRIES }), s);
    const read = new Set(omitted.map((j) => j.job_id));
    const gone = (res.omitted ?? []).filter((id) => !read.has(id));
    return { jobs: [...res.jobs, ...omitted], notFound: [...res.not_found, ...gone], done: res.done };
  };
  if (ids.length <= MAX_WAIT_JOB_IDS) return poll(ids, hold, signal);

  const groups: string[][] = [];
  for (let i = 0; i < ids.length; i += MAX_WAIT_JOB_IDS) groups.push(ids.slice(i, i + MAX_WAIT_JOB_IDS));
  const cut = new AbortController();
  const cuttable = signal ? AbortSignal.any([signal, cut.signal]) : cut.signal;
  let failure: { err: unknown } | undefined;
  const answers = await Promise.all(
    groups.map(async (group) => {
      try {
        const answer = await poll(group, hold, cuttable);
        if (mode === 'any' && answer.done) cut.abort();
        return answer;
      } catch (err) {
        // cut short by another group's end: read again below; anything else fails the round
        if (!cut.signal.aborted || signal?.aborted) {
          failure ??= { err };
          cut.abort();
        }
        return undefined;
      }
    }),
  );
  if (failure) throw failure.err;
  const all: RoundAnswer = { jobs: [], notFound: [], done: mode === 'all' };
  for (const [i, group] of groups.entries()) {
    const answer = answers[i] ?? (await poll(group, () => 0, signal));
    all.jobs.push(...answer.jobs);
    all.notFound.push(...answer.notFound);
    all.done = mode === 'any' ? all.done || answer.done : all.done && answer.done;
  }
  return all;
}

/** `GET /jobs/{id}` for each id, a few at a time; an id gone meanwhile (evicted) is skipped. */
export async function readEach(
  client: AgentqClient,
  ids: readonly string[],
  signal: AbortSignal | undefined,
  limit: CallLimit = {},
): Promise<Job[]> {
  const out: Job[] = [];
  for (let i = 0; i < ids.length; i += 4) {
    const got = await Promise.all(
      ids.slice(i, i + 4).map((id) =>
        client.getJob(id, { signal, ...limit }).catch((err: unknown) => {
          if ((err as { status?: number }).status === 404) return null;
          throw err;
        }),
      ),
    );
    for (const job of got) if (job) out.push(job);
  }
  return out;
}
