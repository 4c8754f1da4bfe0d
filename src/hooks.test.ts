import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Transaction } from 'kysely';
import { systemActor } from './audit/audit.ts';
import { createReferences } from './references.ts';
import type { Database } from './db/schema.ts';
import { createHooks } from './hooks.ts';

// Reactions here never touch the database: the transaction is only handed through.
const trx = {} as Transaction<Database>;

describe('hooks: the one way modules ask about and react to each other', () => {
  test('a kind nobody answers has no members and no uses', async () => {
    const references = createReferences(createHooks());
    assert.deepEqual(await references.unknown('skill', ['a', 'b', 'a']), ['a', 'b']);
    assert.equal(await references.uses('skill', 'a'), 0);
    assert.deepEqual(await references.unknown('skill', []), []);
  });

  test('names are asked once each; a name is known when an answerer knows it; uses add up over every counter', async () => {
    const hooks = createHooks();
    const asked: string[][] = [];
    hooks.on('unknown:agent', async (names) => {
      asked.push(names);
      return names.filter((n) => n !== 'known');
    });
    const counted: string[][] = [];
    hooks.on('uses:agent', async (names) => {
      counted.push(names);
      return new Map(names.filter((n) => n !== 'ghost').map((n) => [n, n === 'known' ? 2 : 1]));
    });
    hooks.on('uses:agent', async (names) => new Map(names.map((n) => [n, n === 'known' ? 3 : 0])));
    const references = createReferences(hooks);
    assert.deepEqual(await references.unknown('agent', ['known', 'ghost', 'ghost']), ['ghost']);
    assert.deepEqual(asked, [['known', 'ghost']]);
    assert.equal(await references.uses('agent', 'known'), 5);
    assert.equal(await references.uses('agent', 'ghost'), 0);
    // Many names: each counter is asked once, with each distinct name once; a name a counter leaves out counts 0 there.
    counted.length = 0;
    const many = await references.usesMany('agent', ['known', 'ghost', 'other', 'known']);
    assert.deepEqual(counted, [['known', 'ghost', 'other']]);
    assert.deepEqual([...many], [['known', 5], ['ghost', 0], ['other', 1]]);
    assert.deepEqual([...(await references.usesMany('agent', []))], []);
  });

  test('reactions run in the order they were wired, with what the change passed; the first failure fails the change', async () => {
    const hooks = createHooks();
    const seen: string[] = [];
    hooks.on('teamArchived', async (_trx, actor, team) => seen.push(`first ${team.name}/${team.id} by ${actor.name}`));
    hooks.on('teamArchived', async () => {
      seen.push('second');
      throw new Error('cannot remove');
    });
    hooks.on('teamArchived', async () => seen.push('third'));
    await assert.rejects(hooks.react('teamArchived', trx, systemActor('test'), { id: 7, name: 'alpha' }), /cannot remove/);
    assert.deepEqual(seen, ['first alpha/7 by test', 'second']);
    // A reaction nobody wired is nothing to do.
    await hooks.react('secretRemoved', trx, systemActor('test'), 'x');
  });

  test('questions gather every answer', async () => {
    const hooks = createHooks();
    hooks.on('checkpointUses', async () => [{ checkpoint_id: 'c1', kind: 'environment', name: 'small' }]);
    hooks.on('checkpointUses', async () => [{ checkpoint_id: 'c1', kind: 'team', name: 'alpha/lead' }]);
    assert.deepEqual((await hooks.ask('checkpointUses')).flat().map((u) => u.name), ['small', 'alpha/lead']);
    assert.deepEqual(await hooks.ask('lock:team', {} as Transaction<Database>, 'alpha'), []);
  });
});
