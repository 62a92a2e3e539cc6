/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4), for tests: it
 * throws on any line that is not a well-formed HELP, TYPE or sample line, on a sample before
 * its family's TYPE, and on a histogram whose buckets are not cumulative or whose `+Inf`
 * bucket differs from its `_count`. (The npm parsers tried mangle labelled histograms.)
 */

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  /** counters, gauges: one per label set; histograms: the `_bucket`, `_sum` and `_count` lines */
  samples: Array<Sample & { name: string }>;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?,?\\})? (\\S+)(?: -?\\d+)?$`);
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SUFFIXES = { histogram: ['_bucket', '_sum', '_count'], summary: ['_sum', '_count', ''] } as const;

/** Values are read like Prometheus reads them (Go's ParseFloat: `NaN`, `+Inf` in any case). */
function parseValue(text: string, line: string): number {
  if (/^nan$/i.test(text)) return NaN;
  const inf = /^([+-]?)inf(inity)?$/i.exec(text);
  if (inf) return inf[1] === '-' ? -Infinity : Infinity;
  const n = Number(text);
  if (text.trim() === '' || Number.isNaN(n)) throw new Error(`bad value in ${JSON.stringify(line)}`);
  return n;
}

function parseLabels(text: string | undefined): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of (text ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
  }
  return labels;
}

function familyOf(families: Map<string, Family>, sampleName: string): Family | undefined {
  const direct = families.get(sampleName);
  if (direct) return direct;
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (!sampleName.endsWith(suffix)) continue;
    const f = families.get(sampleName.slice(0, -suffix.length));
    if (f && (SUFFIXES[f.type as 'histogram' | 'summary'] as readonly string[] | undefined)?.includes(suffix)) return f;
  }
  return undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const helps = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m: RegExpMatchArray | null;
    if ((m = HELP.exec(line))) helps.set(m[1]!, m[2]!);
    else if ((m = TYPE.exec(line))) {
      if (families.has(m[1]!)) throw new Error(`TYPE given twice for ${m[1]}`);
      families.set(m[1]!, { name: m[1]!, help: helps.get(m[1]!) ?? '', type: m[2] as Family['type'], samples: [] });
    } else if (line.startsWith('#')) continue;
    else if ((m = SAMPLE.exec(line))) {
      const family = familyOf(families, m[1]!);
      if (!family) throw new Error(`sample before its TYPE line: ${JSON.stringify(line)}`);
      family.samples.push({ name: m[1]!, labels: parseLabels(m[2]), value: parseValue(m[3]!, line) });
    } else throw new Error(`not a line of the text format: ${JSON.stringify(line)}`);
  }
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}

const seriesKey = (labels: Record<string, string>) =>
  JSON.stringify(Object.entries(labels).filter(([k]) => k !== 'le').sort(([a], [b]) => a.localeCompare(b)));

function checkHistogram(f: Family): void {
  const buckets = new Map<string, Array<[number, number]>>();
  for (const s of f.samples.filter((x) => x.name === `${f.name}_bucket`)) {
    const le = s.labels.le;
    if (le === undefined) throw new Error(`${f.name}_bucket without le`);
    const list = buckets.get(seriesKey(s.labels)) ?? [];
    list.push([parseValue(le, le), s.value]);
    buckets.set(seriesKey(s.labels), list);
  }
  for (const [key, list] of buckets) {
    list.sort(([a], [b]) => a - b);
    list.forEach(([, v], i) => {
      if (i > 0 && v < list[i - 1]![1]) throw new Error(`${f.name}${key}: buckets are not cumulative`);
    });
    const inf = list.at(-1);
    const count = f.samples.find((s) => s.name === `${f.name}_count` && seriesKey(s.labels) === key);
    if (!inf || inf[0] !== Infinity || !count || count.value !== inf[1]) {
      throw new Error(`${f.name}${key}: the +Inf bucket must equal _count`);
    }
  }
}
