import type { AgentqClient } from '@agentq/client';
import type { JobOutput } from '@agentq/protocol';
import { Reconnecting } from './reconnect.js';

/** How long one follow call may be held by the coordinator while no new output comes. */
export const FOLLOW_WAIT_MS = 30_000;

export interface FollowOptions {
  /** called with each piece of new text, in order (including `[… N bytes dropped …]` notes) */
  onText: (text: string) => void;
  /** ends the follow early (the job keeps running); the answer so far is returned */
  signal?: AbortSignal | undefined;
  /** milliseconds clock (default Date.now) */
  now?: () => number;
}

export interface Followed {
  /** the last answer of the coordinator (its `terminal`, `status` and `next_offset` are current) */
  last: JobOutput;
  /** everything passed to onText */
  text: string;
  /** the job's own bytes that were read, without the notes */
  output: string;
  /** bytes the coordinator dropped (per-job cap) before they could be read */
  dropped: number;
}

/**
 * Follow a job's output from `from` (an answer already read, or an offset to start at) until
 * the job is terminal and every byte is read. Each call long-polls with offset + wait_ms: the
 * coordinator answers as soon as there is new output or the job ends, so nothing sleeps. The
 * caller has reached the coordinator already (it read `from`, or created the job): a restart of
 * it is waited out (reconnect.ts), with no deadline but the outage limit.
 */
export async function followOutput(
  client: AgentqClient,
  jobId: string,
  from: JobOutput | { offset: number },
  o: FollowOptions,
): Promise<Followed> {
  const pieces: string[] = [];
  const bytes: string[] = [];
  let dropped = 0;
  const emit = (text: string) => {
    if (text === '') return;
    pieces.push(text);
    o.onText(text);
  };
  const read = (text: string) => {
    bytes.push(text);
    emit(text);
  };
  let last: JobOutput | undefined;
  if ('job_id' in from) {
    last = from;
    read(from.output);
  }
  let offset = 'job_id' in from ? from.next_offset : from.offset;
  const reconnect = new Reconnecting({ deadline: Infinity, now: o.now ?? Date.now, signal: o.signal, reached: true });
  while (!(last && last.terminal && last.next_offset >= last.total_bytes) && !o.signal?.aborted) {
    let res: JobOutput;
    try {
      res = await reconnect.call(() => client.getOutput(jobId, { offset, wait_ms: FOLLOW_WAIT_MS }, { signal: o.signal }));
    } catch (err) {
      if (o.signal?.aborted && last) break;
      throw err;
    }
    if (res.offset > offset) {
      // the coordinator dropped bytes we had not read yet (per-job cap): say so, don't hide it
      dropped += res.offset - offset;
      emit(`[… ${res.offset - offset} bytes dropped by the coordinator …]\n`);
    }
    read(res.output);
    offset = res.next_offset;
    last = res;
  }
  if (!last) throw o.signal?.reason ?? new Error('the output follow ended before any answer');
  return { last, text: pieces.join(''), output: bytes.join(''), dropped };
}
