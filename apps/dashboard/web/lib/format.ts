import type { Usage } from '@agentq/protocol';

/** "12 s", "4 min", "3 h", "2 d": how long ago, for an ISO timestamp. */
export function ago(iso: string | null, now: number): string {
  if (iso === null) return '—';
  const ms = now - Date.parse(iso);
  return ms < 1000 ? 'just now' : `${span(ms)} ago`;
}

/** A duration, coarse: "850 ms", "12 s", "4 min 3 s", "3 h 5 min", "2 d 1 h". */
export function span(ms: number): string {
  if (!Number.isFinite(ms)) return '—';
  const v = Math.max(0, ms);
  if (v < 1000) return `${Math.round(v)} ms`;
  const s = Math.floor(v / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m} min ${s % 60} s` : `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** How long a job has run (or ran): start (or creation) to end (or now). */
export function runTime(job: { created_at: string; started_at: string | null; completed_at: string | null }, now: number): string {
  if (job.started_at === null) return '—';
  const end = job.completed_at === null ? now : Date.parse(job.completed_at);
  return span(end - Date.parse(job.started_at));
}

/** Local date and time, to the second. */
export function clock(iso: string | null): string {
  if (iso === null) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { hour12: false });
}

export function count(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(n < 10_000_000 ? 1 : 0)}M`;
}

export function usd(n: number | null): string {
  if (n === null) return '—';
  if (n === 0) return '$0';
  return n < 0.01 ? `$${n.toFixed(4)}` : `$${n.toFixed(2)}`;
}

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** "1.2k in · 3.4k out" (cache reads too, when there are any); "—" when nothing was used. */
export function tokens(u: Usage | null): string {
  if (u === null) return '—';
  const total = u.input_tokens + u.output_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens;
  if (total === 0) return '—';
  const cache = u.cache_read_input_tokens + u.cache_creation_input_tokens;
  return `${count(u.input_tokens)} in · ${count(u.output_tokens)} out${cache ? ` · ${count(cache)} cache` : ''}`;
}

/** Tokens and cost together; "none reported" when the executor reported neither. */
export function usageText(u: Usage | null, cost: number | null): string {
  const t = tokens(u);
  if (t === '—' && (cost === null || cost === 0)) return 'none reported';
  return `${t} · ${usd(cost)}`;
}

/** Time of day with milliseconds, for timelines. */
export function timeOfDay(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toLocaleTimeString(undefined, { hour12: false })}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** `500ms`, `30s`, `5m`, `1h30m` or plain milliseconds (as the CLI takes them); null if unreadable. */
export function parseDuration(text: string): number | null {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  let total = 0;
  let matched = 0;
  for (let m = re.exec(t); m !== null; m = re.exec(t)) {
    total += Number(m[1]) * unit[m[2]!]!;
    matched = re.lastIndex;
  }
  return matched === t.length && t.length > 0 ? Math.round(total) : null;
}

/** `key=value, key=value` into labels; throws naming the part it cannot read. */
export function parseLabels(text: string): Record<string, string> | null {
  const parts = text.split(/[,\n]/).map((p) => p.trim()).filter(Boolean);
  if (parts.length === 0) return null;
  const labels: Record<string, string> = {};
  for (const p of parts) {
    const eq = p.indexOf('=');
    if (eq <= 0 || eq === p.length - 1) throw new Error(`"${p}" is not key=value`);
    labels[p.slice(0, eq).trim()] = p.slice(eq + 1).trim();
  }
  return labels;
}
