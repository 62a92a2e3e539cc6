/**
 * Durations on the command line: `500ms`, `30s`, `5m`, `1h`, combinations such as `1h30m`, or a
 * plain number of milliseconds (`1500`). Fractions are allowed on units (`1.5s`), not on plain
 * milliseconds. The result is whole milliseconds.
 */
const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
type Unit = keyof typeof UNIT_MS;

const PART = /(\d+(?:\.\d+)?)(ms|s|m|h)/y;

/** Parse a duration; returns null when `text` is not one. */
export function parseDuration(text: string): number | null {
  const s = text.trim();
  if (/^\d+$/.test(s)) return toSafe(Number(s));
  if (s === '') return null;
  let total = 0;
  PART.lastIndex = 0;
  while (PART.lastIndex < s.length) {
    const at = PART.lastIndex;
    const m = PART.exec(s);
    if (!m || m.index !== at) return null;
    total += Number(m[1]) * UNIT_MS[m[2] as Unit];
  }
  return toSafe(Math.round(total));
}

function toSafe(n: number): number | null {
  return Number.isSafeInteger(n) ? n : null;
}

/** Short human form: `850ms`, `12s`, `4m 05s`, `2h 03m`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const totalSeconds = Math.floor(ms / 1000);
  const h = Math.floor(totalSeconds / 3600);
  const m = Math.floor((totalSeconds % 3600) / 60);
  const sec = totalSeconds % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, '0')}m`;
  if (m > 0) return `${m}m ${String(sec).padStart(2, '0')}s`;
  return `${sec}s`;
}
