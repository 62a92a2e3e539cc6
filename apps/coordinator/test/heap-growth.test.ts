import assert from 'node:assert/strict';
import { test } from 'node:test';
import { spawnCoordinatorProcess } from './coordinator-process.js';

/*
 * HEAP_GROWTH_PERCENT is applied by the coordinator program (main.ts) as V8's
 * --heap-growing-percent; its "coordinator ready" line says what is in effect.
 */

test('the coordinator program caps heap growth at HEAP_GROWTH_PERCENT (20 by default; 0 leaves V8 its own)', async (t) => {
  const byDefault = await spawnCoordinatorProcess(t, { DATABASE_URL: 'memory:' });
  const ready = await byDefault.waitFor((l) => l.msg === 'coordinator ready');
  assert.equal(ready['heap_growth_percent'], 20);
  const off = await spawnCoordinatorProcess(t, { DATABASE_URL: 'memory:', HEAP_GROWTH_PERCENT: '0' });
  assert.equal((await off.waitFor((l) => l.msg === 'coordinator ready'))['heap_growth_percent'], 'v8 default');
  const set = await spawnCoordinatorProcess(t, { DATABASE_URL: 'memory:', HEAP_GROWTH_PERCENT: '35' });
  assert.equal((await set.waitFor((l) => l.msg === 'coordinator ready'))['heap_growth_percent'], 35);
});
