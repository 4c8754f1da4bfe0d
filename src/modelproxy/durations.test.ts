import assert from 'node:assert/strict';
import { test } from 'node:test';
import { utcDay } from './durations.ts';

test('utcDay names the UTC day of any moment, whichever day it named last', () => {
  const at = (iso: string) => Date.parse(iso);
  // Asked in an order that crosses days back and forth: the day kept must never answer for another.
  const cases: Array<[number, number, string]> = [
    [0, at('2026-11-27T23:59:59.999Z'), '2026-11-27'],
    [0, at('2026-11-28T00:00:00.000Z'), '2026-11-28'],
    [0, at('2026-11-27T00:00:00.000Z'), '2026-11-27'],
    [1, at('2026-11-27T12:00:00.000Z'), '2026-11-28'],
    [-1, at('2026-11-27T12:00:00.000Z'), '2026-11-26'],
    [-29, at('2026-03-01T00:00:00.000Z'), '2026-01-31'],
    [0, at('1969-12-31T23:59:59.999Z'), '1969-12-31'],
    [0, at('1970-01-01T00:00:00.000Z'), '1970-01-01'],
    [0, at('2028-02-29T08:00:00.000Z'), '2028-02-29'],
  ];
  for (const [offset, now, day] of cases) assert.equal(utcDay(offset, now), day, `utcDay(${offset}, ${new Date(now).toISOString()})`);
  // Every 7 h 13 min 1.5 s over four years: each moment of the day comes up, near midnight included.
  for (let now = at('2025-01-01T00:00:00Z'); now < at('2029-01-01T00:00:00Z'); now += 25_981_500) {
    assert.equal(utcDay(0, now), new Date(now).toISOString().slice(0, 10));
  }
  assert.equal(utcDay(), new Date().toISOString().slice(0, 10));
});
