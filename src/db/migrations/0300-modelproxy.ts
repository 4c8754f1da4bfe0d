import { sql, type Kysely } from 'kysely';

/**
 * The model proxy's tables: virtual keys (hashed), team daily budgets, open reservations,
 * the request log and the daily spend rollup; plus the two functions that make enforcement
 * one round trip each: mp_reserve (authenticate, check limits, reserve) and mp_settle
 * (release the reservation, charge the real cost, log, roll up).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table mp_keys (
      key_id text primary key,
      key_hash text not null unique,
      key_prefix text not null,
      team text not null,
      role text not null,
      agent text not null,
      models text[] not null default '{}',
      max_budget numeric,
      budget_duration text,
      budget_interval interval,
      window_started_at timestamptz not null default now(),
      window_spend numeric not null default 0,
      spend_total numeric not null default 0,
      reserved numeric not null default 0,
      rpm_limit integer,
      tpm_limit integer,
      rl_minute timestamptz not null default 'epoch',
      rl_requests integer not null default 0,
      rl_tokens bigint not null default 0,
      last_used_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      row_version bigint not null default nextval('row_version_seq')
    )`.execute(db);
  await sql`create index mp_keys_team on mp_keys (team, key_id)`.execute(db);

  await sql`
    create table mp_teams (
      team text primary key,
      budget_usd_per_day numeric,
      day date not null default (now() at time zone 'utc')::date,
      day_spend numeric not null default 0,
      reserved numeric not null default 0,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      row_version bigint not null default nextval('row_version_seq')
    )`.execute(db);

  await sql`
    create table mp_reservations (
      id bigserial primary key,
      key_id text not null,
      team text not null,
      amount numeric not null,
      tokens integer not null,
      rl_minute timestamptz not null,
      created_at timestamptz not null default now(),
      expires_at timestamptz not null
    )`.execute(db);
  await sql`create index mp_reservations_expires on mp_reservations (expires_at)`.execute(db);

  await sql`
    create table mp_request_log (
      id bigserial primary key,
      at timestamptz not null default now(),
      team text,
      role text,
      key_id text,
      model text,
      stream boolean not null default false,
      tokens_in integer not null default 0,
      tokens_out integer not null default 0,
      cost_usd numeric not null default 0,
      status integer not null,
      latency_ms integer not null default 0,
      upstream_request_id text,
      request_id text,
      error text
    )`.execute(db);
  await sql`create index mp_request_log_team on mp_request_log (team, id)`.execute(db);

  await sql`
    create table mp_spend_daily (
      team text not null,
      day date not null,
      role text not null,
      key_id text not null,
      spend_usd numeric not null default 0,
      tokens_in bigint not null default 0,
      tokens_out bigint not null default 0,
      requests bigint not null default 0,
      primary key (team, day, role, key_id)
    )`.execute(db);
  await sql`create index mp_spend_daily_day on mp_spend_daily (day, team)`.execute(db);

  // Admission rule: a request is let through while what is spent plus what is reserved is
  // below the limit, and then reserves its own worst case. Locks are taken key first, then
  // team, in every function, so concurrent callers never deadlock.
  await sql`
    create function mp_reserve(p_key_hash text, p_model text, p_amount numeric, p_tokens integer, p_ttl_seconds integer)
    returns table (o_outcome text, o_key_id text, o_team text, o_role text, o_agent text, o_reservation bigint, o_retry_after integer)
    language plpgsql as $fn$
    declare
      k mp_keys%rowtype;
      t mp_teams%rowtype;
      v_now timestamptz := clock_timestamp();
      v_minute timestamptz := date_trunc('minute', clock_timestamp());
      v_today date := (clock_timestamp() at time zone 'utc')::date;
      v_res bigint;
    begin
      select * into k from mp_keys where key_hash = p_key_hash for update;
      if not found then
        return query select 'invalid_key'::text, null::text, null::text, null::text, null::text, null::bigint, null::integer;
        return;
      end if;
      if k.revoked_at is not null then
        return query select 'invalid_key'::text, k.key_id, k.team, k.role, k.agent, null::bigint, null::integer;
        return;
      end if;
      if cardinality(k.models) > 0 and not (p_model = any (k.models)) then
        return query select 'model_not_allowed'::text, k.key_id, k.team, k.role, k.agent, null::bigint, null::integer;
        return;
      end if;
      if k.budget_interval is not null and v_now >= k.window_started_at + k.budget_interval then
        k.window_spend := 0;
        k.window_started_at := v_now;
      end if;
      if k.rl_minute <> v_minute then
        k.rl_minute := v_minute;
        k.rl_requests := 0;
        k.rl_tokens := 0;
      end if;
      if k.rpm_limit is not null and k.rl_requests >= k.rpm_limit then
        return query select 'rpm'::text, k.key_id, k.team, k.role, k.agent, null::bigint,
          greatest(1, ceil(extract(epoch from (v_minute + interval '1 minute' - v_now)))::integer);
        return;
      end if;
      if k.tpm_limit is not null and k.rl_tokens >= k.tpm_limit then
        return query select 'tpm'::text, k.key_id, k.team, k.role, k.agent, null::bigint,
          greatest(1, ceil(extract(epoch from (v_minute + interval '1 minute' - v_now)))::integer);
        return;
      end if;
      if k.max_budget is not null and k.window_spend + k.reserved >= k.max_budget then
        return query select 'key_budget'::text, k.key_id, k.team, k.role, k.agent, null::bigint,
          case when k.budget_interval is null then null::integer
               else greatest(1, ceil(extract(epoch from (k.window_started_at + k.budget_interval - v_now)))::integer) end;
        return;
      end if;
      select * into t from mp_teams where team = k.team for update;
      if found then
        if t.day <> v_today then
          t.day := v_today;
          t.day_spend := 0;
        end if;
        if t.budget_usd_per_day is not null and t.day_spend + t.reserved >= t.budget_usd_per_day then
          return query select 'team_budget'::text, k.key_id, k.team, k.role, k.agent, null::bigint,
            greatest(1, ceil(extract(epoch from ((v_today + 1)::timestamp at time zone 'utc' - v_now)))::integer);
          return;
        end if;
        update mp_teams set day = t.day, day_spend = t.day_spend, reserved = t.reserved + p_amount where team = k.team;
      end if;
      update mp_keys
         set window_started_at = k.window_started_at, window_spend = k.window_spend, reserved = k.reserved + p_amount,
             rl_minute = k.rl_minute, rl_requests = k.rl_requests + 1, rl_tokens = k.rl_tokens + p_tokens, last_used_at = v_now
       where key_id = k.key_id;
      insert into mp_reservations (key_id, team, amount, tokens, rl_minute, expires_at)
        values (k.key_id, k.team, p_amount, p_tokens, v_minute, v_now + make_interval(secs => p_ttl_seconds))
        returning id into v_res;
      return query select 'ok'::text, k.key_id, k.team, k.role, k.agent, v_res, null::integer;
    end
    $fn$`.execute(db);

  // Releases a reservation (when it is still open: a sweeper may have released it already)
  // and charges the real cost and tokens; then the request log row and the day's rollup.
  await sql`
    create function mp_settle(p_reservation bigint, p_key_id text, p_team text, p_role text, p_model text, p_stream boolean,
                              p_cost numeric, p_tokens_in integer, p_tokens_out integer, p_status integer, p_latency_ms integer,
                              p_upstream_request_id text, p_request_id text, p_error text, p_count boolean)
    returns void
    language plpgsql as $fn$
    declare
      v_now timestamptz := clock_timestamp();
      v_minute timestamptz := date_trunc('minute', clock_timestamp());
      v_today date := (clock_timestamp() at time zone 'utc')::date;
      v_amount numeric := 0;
      v_tokens integer := 0;
      v_res_minute timestamptz;
      v_open boolean := false;
      v_used integer := p_tokens_in + p_tokens_out;
    begin
      if p_reservation is not null then
        delete from mp_reservations where id = p_reservation returning amount, tokens, rl_minute into v_amount, v_tokens, v_res_minute;
        v_open := found;
      end if;
      if p_key_id is not null and (v_open or p_cost > 0 or v_used > 0) then
        update mp_keys set
          reserved = greatest(reserved - v_amount, 0),
          window_spend = case when budget_interval is not null and v_now >= window_started_at + budget_interval then p_cost else window_spend + p_cost end,
          window_started_at = case when budget_interval is not null and v_now >= window_started_at + budget_interval then v_now else window_started_at end,
          spend_total = spend_total + p_cost,
          rl_tokens = case when rl_minute = v_minute
                           then rl_tokens + case when v_res_minute = v_minute then greatest(v_used - v_tokens, 0) else v_used end
                           else v_used end,
          rl_requests = case when rl_minute = v_minute then rl_requests else 0 end,
          rl_minute = v_minute
        where key_id = p_key_id;
        update mp_teams set
          reserved = greatest(reserved - v_amount, 0),
          day_spend = case when day = v_today then day_spend + p_cost else p_cost end,
          day = v_today
        where team = p_team;
      end if;
      insert into mp_request_log (at, team, role, key_id, model, stream, tokens_in, tokens_out, cost_usd, status, latency_ms, upstream_request_id, request_id, error)
        values (v_now, p_team, p_role, p_key_id, p_model, p_stream, p_tokens_in, p_tokens_out, p_cost, p_status, p_latency_ms, p_upstream_request_id, p_request_id, p_error);
      if p_count and p_key_id is not null then
        insert into mp_spend_daily as d (team, day, role, key_id, spend_usd, tokens_in, tokens_out, requests)
          values (p_team, v_today, p_role, p_key_id, p_cost, p_tokens_in, p_tokens_out, 1)
        on conflict (team, day, role, key_id) do update
          set spend_usd = d.spend_usd + excluded.spend_usd, tokens_in = d.tokens_in + excluded.tokens_in,
              tokens_out = d.tokens_out + excluded.tokens_out, requests = d.requests + 1;
      end if;
    end
    $fn$`.execute(db);

  // Reserves for many requests in one transaction, in arrival order; keys then teams locked
  // up front in sorted order (the global lock order below).
  await sql`
    create function mp_reserve_batch(p jsonb)
    returns table (o_idx integer, o_outcome text, o_key_id text, o_team text, o_role text, o_agent text, o_reservation bigint, o_retry_after integer)
    language plpgsql as $fn$
    declare
      r record;
    begin
      perform 1 from mp_keys where key_hash in (select x->>'key_hash' from jsonb_array_elements(p) x) order by key_id for update;
      perform 1 from mp_teams where team in (select k.team from mp_keys k where k.key_hash in (select x->>'key_hash' from jsonb_array_elements(p) x)) order by team for update;
      for r in select * from jsonb_to_recordset(p) as x(idx integer, key_hash text, model text, amount numeric, tokens integer, ttl integer) order by idx loop
        return query select r.idx, m.* from mp_reserve(r.key_hash, r.model, r.amount, r.tokens, r.ttl) m;
      end loop;
    end
    $fn$`.execute(db);

  // Settles many requests in one transaction (one commit). Locks in the global order every
  // function keeps: reservations, then keys, then teams (then rollup rows, sorted), so batches
  // of different processes, single reserves and the sweeper never deadlock.
  await sql`
    create function mp_settle_batch(p jsonb) returns void
    language plpgsql as $fn$
    declare
      r record;
    begin
      perform 1 from mp_reservations where id in (select (x->>'reservation')::bigint from jsonb_array_elements(p) x) order by id for update;
      perform 1 from mp_keys where key_id in (select x->>'key_id' from jsonb_array_elements(p) x) order by key_id for update;
      perform 1 from mp_teams where team in (select x->>'team' from jsonb_array_elements(p) x) order by team for update;
      for r in select * from jsonb_to_recordset(p) as x(reservation bigint, key_id text, team text, role text, model text, stream boolean, cost numeric,
                 tokens_in integer, tokens_out integer, status integer, latency_ms integer, upstream_request_id text, request_id text, error text, count boolean)
               order by team, role, key_id loop
        perform mp_settle(r.reservation, r.key_id, r.team, r.role, r.model, r.stream, r.cost, r.tokens_in, r.tokens_out, r.status, r.latency_ms,
                          r.upstream_request_id, r.request_id, r.error, r.count);
      end loop;
    end
    $fn$`.execute(db);

  // A reservation whose process died before settling: released by any proxy's sweeper.
  await sql`
    create function mp_release(p_reservation bigint) returns boolean
    language plpgsql as $fn$
    declare
      v_key text; v_team text; v_amount numeric;
    begin
      delete from mp_reservations where id = p_reservation returning key_id, team, amount into v_key, v_team, v_amount;
      if not found then return false; end if;
      update mp_keys set reserved = greatest(reserved - v_amount, 0) where key_id = v_key;
      update mp_teams set reserved = greatest(reserved - v_amount, 0) where team = v_team;
      return true;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop function mp_release(bigint)`.execute(db);
  await sql`drop function mp_settle_batch(jsonb)`.execute(db);
  await sql`drop function mp_reserve_batch(jsonb)`.execute(db);
  await sql`drop function mp_settle(bigint, text, text, text, text, boolean, numeric, integer, integer, integer, integer, text, text, text, boolean)`.execute(db);
  await sql`drop function mp_reserve(text, text, numeric, integer, integer)`.execute(db);
  for (const t of ['mp_spend_daily', 'mp_request_log', 'mp_reservations', 'mp_teams', 'mp_keys']) await db.schema.dropTable(t).execute();
}
