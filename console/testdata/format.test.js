// Unit tests of format.js. Run by console/js_test.go (go test ./console).
import test from 'node:test';
import assert from 'node:assert/strict';
import { ago, codeName, fromUTCInput, niceTicks, perSecond, span, thousands, tickLabel, timeTicks, toUTCInput } from './format.js';

test('thousands and rates', () => {
  assert.equal(thousands(1234567), '1,234,567');
  assert.equal(thousands(null), '–');
  assert.equal(perSecond(0), '0');
  assert.equal(perSecond(0.44), '0.4');
  assert.equal(perSecond(12.4), '12');
  assert.equal(perSecond(1250), '1,250');
});

test('ago and span', () => {
  assert.equal(ago(1000, 1500), 'just now');
  assert.equal(ago(0, 12000), '12 s ago');
  assert.equal(ago(0, 180000), '3 min ago');
  assert.equal(span(45), '45 s');
  assert.equal(span(125), '2 min 5 s');
  assert.equal(span(120), '2 min');
  assert.equal(span(3840), '1 h 4 min');
});

test('niceTicks covers the range with round steps', () => {
  assert.deepEqual(niceTicks(0, 60, 4), { ticks: [0, 20, 40, 60], max: 60 });
  assert.deepEqual(niceTicks(0, 10000, 4), { ticks: [0, 5000, 10000], max: 10000 });
  const { ticks, max } = niceTicks(0, 7.3, 4);
  assert.deepEqual(ticks, [0, 2, 4, 6, 8]);
  assert.equal(max, 8);
  assert.deepEqual(niceTicks(0, 0, 4).ticks, [0, 0.5, 1]);
});

test('timeTicks fall on whole steps of the clock', () => {
  const t0 = Date.parse('2026-08-01T10:00:03Z');
  const ticks = timeTicks(t0, t0 + 57000, 5);
  assert.deepEqual(ticks.map(tickLabel), ['10:00:15', '10:00:30', '10:00:45', '10:01']);
  const long = timeTicks(t0, t0 + 15 * 60000, 5);
  assert.ok(long.every((t) => t % 300000 === 0), 'five-minute ticks over a quarter of an hour');
  assert.ok(long.length >= 2 && long.length <= 5, `${long.length} ticks`);
});

test('the UTC field reads and writes UTC', () => {
  assert.equal(toUTCInput('2026-08-01T10:00:00Z'), '2026-08-01 10:00:00');
  assert.equal(fromUTCInput('2026-08-01 10:00'), '2026-08-01T10:00:00Z');
  assert.equal(fromUTCInput('2026-08-01T10:00:05'), '2026-08-01T10:00:05Z');
  assert.equal(fromUTCInput('2026-08-01 12:00:00+02:00'), '2026-08-01T10:00:00Z');
  assert.equal(fromUTCInput(''), '');
  assert.equal(fromUTCInput('tomorrow'), null);
  assert.equal(fromUTCInput('2026-13-01 10:00'), null);
});

test('codes are named for a person', () => {
  assert.equal(codeName('sold_out'), 'sold out');
  assert.equal(codeName('some_new_code'), 'some new code');
});
