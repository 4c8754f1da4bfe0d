import { sql, type Kysely } from 'kysely';

// Settlements that are still waiting to be written behind their answers go first, in the same
// transaction, when a reservation of the same key or team is made: the reservation then sees
// what those calls really cost, not their estimates. Locks follow the global order of
// 0300-modelproxy (reservations, then keys, then teams, then rollup rows), taken up front for
// both halves, so this never deadlocks with batches of other processes.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create function mp_settle_reserve_batch(s jsonb, p jsonb)
    returns table (o_idx integer, o_outcome text, o_key_id text, o_team text, o_role text, o_agent text, o_reservation bigint, o_retry_after integer)
    language plpgsql as $fn$
    begin
      perform 1 from mp_reservations where id in (select (x->>'reservation')::bigint from jsonb_array_elements(s) x) order by id for update;
      perform 1 from mp_keys
       where key_id in (select x->>'key_id' from jsonb_array_elements(s) x)
          or key_hash in (select x->>'key_hash' from jsonb_array_elements(p) x)
       order by key_id for update;
      perform 1 from mp_teams
       where team in (select x->>'team' from jsonb_array_elements(s) x)
          or team in (select k.team from mp_keys k where k.key_hash in (select x->>'key_hash' from jsonb_array_elements(p) x))
       order by team for update;
      perform mp_settle_batch(s);
      return query select * from mp_reserve_batch(p);
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function mp_settle_reserve_batch(jsonb, jsonb)`.execute(db);
}
