/** The core reads time only through a Clock, so tests can drive staleness, leases and retention. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that moves only when told to. */
export class ManualClock implements Clock {
  constructor(private current = Date.parse('2026-01-01T00:00:00.000Z')) {}
  now(): number {
    return this.current;
  }
  advance(ms: number): void {
    this.current += ms;
  }
}

/**
 * Milliseconds as an ISO 8601 string. The last few results are kept: a transaction stamps every
 * row it writes with the same `now`, and a job's wire view repeats its timestamps in each event
 * and answer, so most calls format a time just formatted (toISOString was a few percent of the
 * coordinator's time under load).
 */
export function iso(ms: number): string {
  for (let i = 0; i < ISO_CACHE; i++) if (isoMs[i] === ms) return isoText[i]!;
  const text = new Date(ms).toISOString();
  isoMs[isoNext] = ms;
  isoText[isoNext] = text;
  isoNext = (isoNext + 1) % ISO_CACHE;
  return text;
}
const ISO_CACHE = 8;
const isoMs: number[] = new Array<number>(ISO_CACHE).fill(Number.NaN);
const isoText: string[] = new Array<string>(ISO_CACHE).fill('');
let isoNext = 0;

export const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms));
