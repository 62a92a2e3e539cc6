/** Numbers for the tables: percentiles, medians and their formatting. */

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const median = (xs: readonly number[]): number => percentile([...xs].sort((a, b) => a - b), 50);

export interface Latency {
  p50: number;
  p90: number;
  p99: number;
  max: number;
  samples: number;
}

export function latencyOf(samples: readonly number[]): Latency {
  const s = [...samples].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? Number.NaN, samples: s.length };
}

export const ms = (x: number, digits = 2): string => `${x.toFixed(digits)} ms`;
export const rate = (x: number): string => Math.round(x).toLocaleString('en-US');
export const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
export const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KB`;
export const env = (name: string, fallback: number): number => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name}: expected a positive number, got ${JSON.stringify(raw)}`);
  return n;
};
