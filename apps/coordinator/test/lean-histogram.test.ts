import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { LeanHistogram } from '../src/metrics/lean-histogram.js';

const buckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const values = [0, 0.0004, 0.001, 0.0011, 0.005, 0.02, 0.1, 0.7, 1, 3, 10, 29.9, 60, 61, 1e6];

/** The same observations into prom-client's Histogram and a LeanHistogram, each in a registry of its own. */
function pair<L extends string>(labelNames: L[]) {
  const theirs = new Registry();
  const ours = new Registry();
  const o = { name: 'agentq_test_seconds', help: 'A test histogram.', buckets, labelNames };
  const h = new Histogram<L>({ ...o, registers: [theirs] });
  const l = new LeanHistogram<L>({ ...o, registers: [ours] });
  return { theirs, ours, h, l };
}

async function assertSameExposition(theirs: Registry, ours: Registry): Promise<void> {
  assert.equal(await ours.metrics(), await theirs.metrics());
  assert.deepEqual(await ours.getMetricsAsJSON(), await theirs.getMetricsAsJSON());
  // the same text too: keys in the same order
  assert.equal(JSON.stringify(await ours.getMetricsAsJSON()), JSON.stringify(await theirs.getMetricsAsJSON()));
}

test('a labelled LeanHistogram is exposed as prom-client\'s Histogram fed the same observations (text and JSON)', async () => {
  const { theirs, ours, h, l } = pair(['method', 'route', 'status_code']);
  await assertSameExposition(theirs, ours); // nothing observed: no series
  const series = [
    { method: 'POST', route: '/jobs', status_code: '201' },
    { method: 'GET', route: '/launcher/jobs', status_code: '200' },
    { method: 'POST', route: '/jobs', status_code: '400' },
    { method: 'GET', route: 'unmatched', status_code: '404' },
  ];
  for (let i = 0; i < 200; i++) {
    const labels = series[(i * 7) % series.length]!;
    const v = values[i % values.length]!;
    h.observe(labels, v);
    l.observe(labels, v);
  }
  await assertSameExposition(theirs, ours);
  // reset empties both
  h.reset();
  l.reset();
  await assertSameExposition(theirs, ours);
});

test('a LeanHistogram without labels has its series at 0 from the start, and zero() makes a labelled one', async () => {
  const plain = pair([]);
  await assertSameExposition(plain.theirs, plain.ours);
  for (const v of values) {
    plain.h.observe(v);
    plain.l.observe(v);
  }
  await assertSameExposition(plain.theirs, plain.ours);

  const labelled = pair(['status']);
  for (const status of ['completed', 'failed', 'stopped']) {
    labelled.h.zero({ status });
    labelled.l.zero({ status });
  }
  await assertSameExposition(labelled.theirs, labelled.ours);
  labelled.h.observe({ status: 'failed' }, 3);
  labelled.l.observe({ status: 'failed' }, 3);
  await assertSameExposition(labelled.theirs, labelled.ours);
});

test('a LeanHistogram resets and zeroes as prom-client\'s: reset leaves no series, zero sets an observed series back to 0', async () => {
  const plain = pair([]);
  plain.h.observe(1);
  plain.l.observe(1);
  plain.h.reset();
  plain.l.reset();
  await assertSameExposition(plain.theirs, plain.ours);
  plain.h.observe(0.2);
  plain.l.observe(0.2);
  await assertSameExposition(plain.theirs, plain.ours);

  const labelled = pair(['status']);
  for (const status of ['completed', 'failed']) {
    labelled.h.observe({ status }, 2);
    labelled.l.observe({ status }, 2);
  }
  labelled.h.zero({ status: 'completed' });
  labelled.l.zero({ status: 'completed' });
  await assertSameExposition(labelled.theirs, labelled.ours);
});

test('label values with quotes, backslashes, newlines and the registry\'s default labels are exposed as prom-client\'s', async () => {
  const { theirs, ours, h, l } = pair(['method', 'route']);
  for (const r of [theirs, ours]) r.setDefaultLabels({ instance: 'a"b' });
  for (const route of ['say "hi"', 'back\\slash', 'new\nline', '', 'ü']) {
    h.observe({ method: 'GET', route }, 0.02);
    l.observe({ method: 'GET', route }, 0.02);
  }
  // the labels in another order: the same series
  h.observe({ route: '', method: 'GET' }, 7);
  l.observe({ route: '', method: 'GET' }, 7);
  await assertSameExposition(theirs, ours);
});

test('a LeanHistogram refuses what prom-client refuses: a value that is not a finite number, a label it was not given', () => {
  const { l } = pair(['status']);
  assert.throws(() => l.observe({ status: 'x' }, Number.NaN), TypeError);
  assert.throws(() => l.observe({ status: 'x', other: 'y' } as unknown as { status: string }, 1), /not included in initial labelset/);
});
