import type { Registry } from 'prom-client';

/**
 * A histogram registered in a prom-client Registry, exposed exactly as prom-client's own
 * Histogram would expose the same observations (same lines, same order), but cheaper to observe.
 *
 * Why not prom-client's Histogram: its `observe` checks the label names, builds a hash string of
 * the labels and looks it up as a property name (V8 interns it first), then turns the bucket's
 * upper bound (a float) into a property name too. In CPU profiles of the one-job-per-request
 * benchmark its observations were 2-3 % of the coordinator's CPU (four requests and three job
 * histograms per job; docs/benchmarks.md). Here a label set finds its counts through one Map
 * per label (no string is made), and a bucket is an index.
 *
 * Only what the coordinator uses: observe, zero, and the registry's reads (text and JSON) and reset.
 */
export class LeanHistogram<L extends string = never> {
  readonly name: string;
  readonly help: string;
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #labelNames: readonly L[];
  readonly #bounds: readonly number[];
  /** label value -> ... -> series, one level per label name, in their order */
  #series = new Map<string, unknown>();
  /** series in the order they were first observed (prom-client's order) */
  #all: Series[] = [];

  constructor(o: { name: string; help: string; buckets: readonly number[]; labelNames?: readonly L[]; registers: readonly Registry[] }) {
    this.name = o.name;
    this.help = o.help;
    this.#labelNames = o.labelNames ?? [];
    this.#bounds = [...o.buckets].sort((a, b) => a - b);
    for (const r of o.registers) r.registerMetric(this as never);
    // a histogram without labels has its one series from the start, at 0 (as prom-client's)
    if (this.#labelNames.length === 0) this.#find({} as Record<L, string>);
  }

  /** The series of these labels at 0: made if new, set back to 0 if observed (as prom-client's). */
  zero(labels: Record<L, string>): void {
    const series = this.#find(labels);
    series.counts.fill(0);
    series.sum = 0;
    series.count = 0;
  }

  observe(labels: Record<L, string>, value: number): void;
  observe(value: number): void;
  observe(a: Record<L, string> | number, b?: number): void {
    const labels = typeof a === 'number' ? ({} as Record<L, string>) : a;
    const value = typeof a === 'number' ? a : b!;
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const series = this.#find(labels);
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    // the last slot counts what is above every bound (+Inf only)
    series.counts[i]!++;
    series.sum += value;
    series.count++;
  }

  #find(labels: Record<L, string>): Series {
    const names = this.#labelNames;
    let level: Map<string, unknown> = this.#series;
    for (let n = 0; n < names.length - 1; n++) {
      const v = labels[names[n]!];
      let next = level.get(v) as Map<string, unknown> | undefined;
      if (!next) level.set(v, (next = new Map()));
      level = next;
    }
    const last = names.length === 0 ? '' : labels[names[names.length - 1]!];
    let series = level.get(last) as Series | undefined;
    if (!series) {
      for (const key of Object.keys(labels)) if (!(names as readonly string[]).includes(key)) throw new Error(`Added label "${key}" is not included in initial labelset: ${JSON.stringify(names)}`);
      series = { labels: { ...labels }, counts: new Array<number>(this.#bounds.length + 1).fill(0), sum: 0, count: 0 };
      level.set(last, series);
      this.#all.push(series);
    }
    return series;
  }

  /** Every series gone, the one of a histogram without labels too (as prom-client's reset). */
  reset(): void {
    this.#series = new Map();
    this.#all = [];
  }

  /** What prom-client's Histogram gives the registry for its text format. */
  getForPromString(): { name: string; help: string; type: string; values: PromValue[]; aggregator: string } {
    const bucket = `${this.name}_bucket`;
    const values: PromValue[] = [];
    for (const s of this.#all) {
      let acc = 0;
      this.#bounds.forEach((le, i) => {
        acc += s.counts[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${this.name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${this.name}_count`, exemplar: undefined },
      );
    }
    // keys in prom-client's order: the registry's JSON is the same text, not only the same data
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The same, each value's labels in one object (the registry's JSON, prom-client's `get`). */
  get(): { name: string; help: string; type: string; values: unknown[]; aggregator: string } {
    const data = this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })),
    };
  }
}

interface Series {
  labels: Record<string, string>;
  /** per bucket, not cumulative; the last is above every bound */
  counts: number[];
  sum: number;
  count: number;
}

interface PromValue {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string>;
  value: number;
  metricName: string;
  exemplar: null | undefined;
}
