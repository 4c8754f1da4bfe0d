import { sql, type Kysely } from 'kysely';

/**
 * mp_write_ledger takes its four parts as four `json` values instead of one `jsonb`. The
 * embedded database runs this write on the proxy's event loop: a `jsonb` argument is parsed
 * into its binary form and each part then extracted from it, where `json_to_recordset` reads a
 * `json` text once, row by row. Measured on PGlite with 80 and 400 log lines a write, this costs
 * about half as much (docs/benchmarks.md, "Model proxy"). Same statements, same order.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`drop function mp_write_ledger(jsonb)`.execute(db);
  await sql`
    create function mp_write_ledger(keys json, teams json, log json, rollup json) returns void
    language plpgsql as $fn$
    begin
      update mp_keys k
         set window_started_at = x.window_started_at, window_spend = x.window_spend, spend_total = x.spend_total,
             reserved = x.reserved, rl_minute = x.rl_minute, rl_requests = x.rl_requests, rl_tokens = x.rl_tokens,
             last_used_at = x.last_used_at
        from json_to_recordset(keys) as x(key_id text, window_started_at timestamptz, window_spend numeric, spend_total numeric,
             reserved numeric, rl_minute timestamptz, rl_requests integer, rl_tokens bigint, last_used_at timestamptz)
       where k.key_id = x.key_id;
      update mp_teams t
         set day = x.day, day_spend = x.day_spend, reserved = x.reserved
        from json_to_recordset(teams) as x(team text, day date, day_spend numeric, reserved numeric)
       where t.team = x.team;
      insert into mp_request_log (at, team, role, key_id, model, stream, tokens_in, tokens_out, cost_usd, status, latency_ms, upstream_request_id, request_id, error)
        select x.at, x.team, x.role, x.key_id, x.model, x.stream, x.tokens_in, x.tokens_out, x.cost_usd, x.status, x.latency_ms, x.upstream_request_id, x.request_id, x.error
          from json_to_recordset(log) as x(at timestamptz, team text, role text, key_id text, model text, stream boolean, tokens_in integer,
               tokens_out integer, cost_usd numeric, status integer, latency_ms integer, upstream_request_id text, request_id text, error text, seq bigint)
         order by x.seq;
      insert into mp_spend_daily as d (team, day, role, key_id, spend_usd, tokens_in, tokens_out, requests)
        select x.team, x.day, x.role, x.key_id, x.spend_usd, x.tokens_in, x.tokens_out, x.requests
          from json_to_recordset(rollup) as x(team text, day date, role text, key_id text, spend_usd numeric, tokens_in bigint, tokens_out bigint, requests bigint)
         order by x.team, x.day, x.role, x.key_id
      on conflict (team, day, role, key_id) do update
        set spend_usd = d.spend_usd + excluded.spend_usd, tokens_in = d.tokens_in + excluded.tokens_in,
            tokens_out = d.tokens_out + excluded.tokens_out, requests = d.requests + excluded.requests;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function mp_write_ledger(json, json, json, json)`.execute(db);
  const { up: previous } = await import('./0301-modelproxy-ledger.ts');
  await previous(db);
}
