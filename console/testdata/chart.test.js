// Unit tests of chart.js's model. Run by console/js_test.go.
import test from 'node:test';
import assert from 'node:assert/strict';
import { chartModel, sparkArea, sparkPath } from './chart.js';

const t0 = Date.parse('2026-08-01T10:00:00Z');

test('the model scales to the stock and ticks the clock', () => {
  const m = chartModel({
    series: [{ name: 'units', cls: 'series-0', points: [[t0, 60], [t0 + 30000, 30], [t0 + 60000, 0]] }],
    t0, t1: t0 + 60000, width: 640, height: 200, yMax: 60,
  });
  assert.deepEqual(m.yTicks.map((t) => t.label), ['0', '20', '40', '60']);
  assert.ok(m.xTicks.length >= 2, 'time ticks');
  assert.equal(m.xTicks[0].label, '10:00');
  const [first, last] = [m.paths[0].d.split(' ')[0], m.paths[0].d.split('L').pop()];
  assert.equal(first, `M${m.left.toFixed(1)}`);
  assert.ok(last.startsWith((m.left + m.w).toFixed(1)), `ends at the right edge: ${last}`);
});

test('a null value breaks the line; points before t0 are left out', () => {
  const m = chartModel({
    series: [{ name: 'u', cls: 's', points: [[t0 - 1000, 5], [t0, 5], [t0 + 1000, null], [t0 + 2000, 4], [t0 + 3000, 3]] }],
    t0, t1: t0 + 3000,
  });
  assert.equal((m.paths[0].d.match(/M/g) || []).length, 2);
});

test('sparklines', () => {
  assert.equal(sparkPath([], 10), '');
  const d = sparkPath([10, 5, 0], 10, 120, 28);
  assert.equal(d, 'M0.0 1.0 L60.0 14.0 L120.0 27.0');
  assert.equal(sparkArea(d), 'M0.0 1.0 L60.0 14.0 L120.0 27.0 L120.0 28 L0.0 28 Z');
  assert.equal(sparkArea(sparkPath([1, null, 1], 1)), '', 'no area under a broken line');
});
