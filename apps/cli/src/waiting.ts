import type { AgentqClient } from '@agentq/client';
import type { Job, WaitMode } from '@agentq/protocol';

/**
 * Waiting for jobs without polling: each call is one long-poll that the coordinator answers as
 * soon as the job turns terminal. The server holds a call for at most an hour, so a longer (or
 * unbounded) wait is a loop of calls until the CLI's own deadline.
 */
export const MAX_SERVER_WAIT_MS = 3_600_000;

export interface WaitOptions {
  /** give up after this long; undefined waits until the condition is met */
  timeoutMs: number | undefined;
  /** aborting ends the wait with the last snapshot (the jobs keep running) */
  signal?: AbortSignal | undefined;
  now: () => number;
  /** called with every snapshot the coordinator answers */
  onSnapshot?: (jobs: readonly Job[]) => void;
}

const aborted = (signal: AbortSignal | undefined) => signal?.aborted === true;

/** Wait for one job to turn terminal; returns the last snapshot (terminal or not). */
export async function waitForJob(
  client: AgentqClient,
  jobId: string,
  initial: Job | undefined,
  o: WaitOptions,
): Promise<Job> {
  const deadline = o.timeoutMs === undefined ? Infinity : o.now() + o.timeoutMs;
  let job = initial;
  for (;;) {
    if (job && (job.terminal || o.now() >= deadline || aborted(o.signal))) return job;
    const hold = Math.min(Math.max(0, deadline - o.now()), MAX_SERVER_WAIT_MS);
    try {
      job = await client.waitJob(jobId, hold, { signal: o.signal });
    } catch (err) {
      if (aborted(o.signal) && job) return job;
      throw err;
    }
    o.onSnapshot?.([job]);
  }
}

export interface WaitManyOutcome {
  /** the condition was met: any → at least one job terminal; all → every known job terminal */
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
  o: WaitOptions,
): Promise<WaitManyOutcome> {
  const deadline = o.timeoutMs === undefined ? Infinity : o.now() + o.timeoutMs;
  const unique = [...new Set(ids)];
  const latest = new Map<string, Job>();
  const notFound = new Set<string>();
  const outcome = (): WaitManyOutcome => {
    const jobs = unique.flatMap((id) => latest.get(id) ?? []);
    const done = jobs.length > 0 && (mode === 'any' ? jobs.some((j) => j.terminal) : jobs.every((j) => j.terminal));
    return { done, jobs, notFound: unique.filter((id) => notFound.has(id) && !latest.has(id)) };
  };
  let first = true;
  for (;;) {
    const watched = unique.filter((id) => !notFound.has(id));
    const now = outcome();
    if (!first && (now.done || watched.length === 0 || o.now() >= deadline || aborted(o.signal))) return now;
    // the first call only takes a snapshot: it finds unknown ids and already-terminal jobs at once
    const hold = first ? 0 : Math.min(Math.max(0, deadline - o.now()), MAX_SERVER_WAIT_MS);
    first = false;
    let res;
    try {
      // any: the server's any-wait  only watches jobs still active when a call arrives,
      // so a job that ended between two calls (after the snapshot, between two hour-long calls)
      // would be missed; include_terminal makes such a job end the next call at once
      const body = mode === 'any' ? { include_terminal: true } : {};
      res = await client.waitJobs({ job_ids: watched, mode, timeout_ms: hold, ...body }, { signal: o.signal });
    } catch (err) {
      if (aborted(o.signal) && latest.size > 0) return outcome();
      throw err;
    }
    // snapshots that did not fit in the answer (MAX_ANSWER_BYTES) are read one by one
    const jobs = [...res.jobs, ...(await readEach(client, res.omitted ?? [], o.signal))];
    for (const job of jobs) latest.set(job.job_id, job);
    for (const id of res.not_found) notFound.add(id);
    o.onSnapshot?.(jobs);
  }
}

/** `GET /jobs/{id}` for each id, a few at a time; an id gone meanwhile (evicted) is skipped. */
export async function readEach(client: AgentqClient, ids: readonly string[], signal: AbortSignal | undefined): Promise<Job[]> {
  const out: Job[] = [];
  for (let i = 0; i < ids.length; i += 4) {
    const got = await Promise.all(
      ids.slice(i, i + 4).map((id) =>
        client.getJob(id, { signal }).catch((err: unknown) => {
          if ((err as { status?: number }).status === 404) return null;
          throw err;
        }),
      ),
    );
    for (const job of got) if (job) out.push(job);
  }
  return out;
}
