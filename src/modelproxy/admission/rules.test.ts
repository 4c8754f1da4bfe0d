import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDuration } from '../durations.ts';
import { admit, settleKey, settleTeam, type KeyCounters, type KeyLimits, type TeamCounters } from './rules.ts';

const NOW = Date.parse('2026-03-10T12:00:30.000Z');
const MINUTE = Date.parse('2026-03-10T12:00:00.000Z');
const key = (over: Partial<KeyLimits & KeyCounters> = {}): KeyLimits & KeyCounters => ({
  models: [],
  maxBudget: null,
  duration: null,
  rpmLimit: null,
  tpmLimit: null,
  revoked: false,
  windowStart: NOW - 1000,
  windowSpend: 0,
  spendTotal: 0,
  reserved: 0,
  rlMinute: MINUTE,
  rlRequests: 0,
  rlTokens: 0,
  ...over,
});
const team = (over: Partial<TeamCounters> = {}): TeamCounters => ({ exists: true, budget: null, day: '2026-03-10', daySpend: 0, reserved: 0, ...over });
const ask = { model: 'fast', amount: 100, tokens: 10 };

test('admission refuses in mp_reserve\'s order, each with its retry time', () => {
  assert.deepEqual(admit(null, undefined, ask, NOW), { outcome: 'invalid_key', retryAfter: null });
  assert.equal(admit(key({ revoked: true }), undefined, ask, NOW).outcome, 'invalid_key');
  assert.equal(admit(key({ models: ['slow'] }), undefined, ask, NOW).outcome, 'model_not_allowed');
  assert.deepEqual(admit(key({ rpmLimit: 2, rlRequests: 2 }), undefined, ask, NOW), { outcome: 'rpm', retryAfter: 30 });
  // A new minute starts the counts again.
  assert.equal(admit(key({ rpmLimit: 2, rlRequests: 2, rlMinute: MINUTE - 60_000 }), undefined, ask, NOW).outcome, 'ok');
  assert.equal(admit(key({ tpmLimit: 10, rlTokens: 10 }), undefined, ask, NOW).outcome, 'tpm');
  // What is reserved counts against the budget as if spent.
  assert.equal(admit(key({ maxBudget: 1000, windowSpend: 900, reserved: 100 }), undefined, ask, NOW).outcome, 'key_budget');
  const hourly = key({ maxBudget: 1000, windowSpend: 1000, duration: parseDuration('1h'), windowStart: NOW - 3600_000 });
  assert.equal(admit(hourly, undefined, ask, NOW).outcome, 'ok', 'an expired window starts anew');
  assert.deepEqual(admit(key(), team({ budget: 500, daySpend: 450, reserved: 50 }), ask, NOW), { outcome: 'team_budget', retryAfter: 12 * 3600 - 30 });
  // Yesterday's spend does not count today.
  assert.equal(admit(key(), team({ budget: 500, daySpend: 500, day: '2026-03-09' }), ask, NOW).outcome, 'ok');
});

test('an admitted request reserves its worst case and counts itself; settling charges the real cost', () => {
  const k = key({ rlRequests: 1, rlTokens: 5, reserved: 50 });
  const t = team({ reserved: 20 });
  const a = admit(k, t, ask, NOW);
  assert.equal(a.outcome, 'ok');
  if (a.outcome !== 'ok') return;
  assert.deepEqual(a.key, { windowStart: k.windowStart, windowSpend: 0, reserved: 150, rlMinute: MINUTE, rlRequests: 2, rlTokens: 15 });
  assert.deepEqual(a.team, { day: '2026-03-10', daySpend: 0, reserved: 120 });

  const held = { amount: 100, tokens: 10, rlMinute: MINUTE };
  const after = settleKey({ ...k, ...a.key }, held, 40, 25, NOW + 1000);
  assert.equal(after.reserved, 50);
  assert.equal(after.windowSpend, 40);
  assert.equal(after.spendTotal, 40);
  assert.equal(after.rlTokens, 30, 'the 15 tokens beyond the 10 counted at admission');
  assert.deepEqual(settleTeam({ ...t, ...a.team! }, held, 40, NOW + 1000), { reserved: 20, daySpend: 40, day: '2026-03-10' });
  // Settled in the next minute: the counts start there.
  const later = settleKey({ ...k, ...a.key }, held, 40, 25, MINUTE + 60_000);
  assert.deepEqual([later.rlTokens, later.rlRequests, later.rlMinute], [25, 0, MINUTE + 60_000]);
});
