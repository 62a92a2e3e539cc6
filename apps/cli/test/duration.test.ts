import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatDuration, parseDuration } from '../src/index.js';

describe('parseDuration', () => {
  it('reads each unit', () => {
    assert.equal(parseDuration('500ms'), 500);
    assert.equal(parseDuration('30s'), 30_000);
    assert.equal(parseDuration('5m'), 300_000);
    assert.equal(parseDuration('1h'), 3_600_000);
  });

  it('reads plain numbers as milliseconds', () => {
    assert.equal(parseDuration('1500'), 1500);
    assert.equal(parseDuration('0'), 0);
    assert.equal(parseDuration(' 250 '), 250);
  });

  it('reads combinations and fractions of units', () => {
    assert.equal(parseDuration('1h30m'), 5_400_000);
    assert.equal(parseDuration('1m30s500ms'), 90_500);
    assert.equal(parseDuration('1.5s'), 1500);
    assert.equal(parseDuration('0.5h'), 1_800_000);
  });

  it('rejects what is not a duration', () => {
    for (const bad of ['', ' ', 'abc', '5x', '-5s', '5 s', 's', '1.5', '5mm', '1h 30m', 'ms', '1e3', '30S']) {
      assert.equal(parseDuration(bad), null, `'${bad}' should be rejected`);
    }
  });

  it('rejects numbers too large to be exact', () => {
    assert.equal(parseDuration('99999999999999999999'), null);
  });
});

describe('formatDuration', () => {
  it('picks a short human form', () => {
    assert.equal(formatDuration(850), '850ms');
    assert.equal(formatDuration(12_000), '12s');
    assert.equal(formatDuration(245_000), '4m 05s');
    assert.equal(formatDuration(7_380_000), '2h 03m');
  });
});
