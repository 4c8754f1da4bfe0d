import { Type } from 'typebox';
import type { Db } from '../../db/database.ts';
import { writeEvents } from '../events/events.bus.ts';
import { Envelope, type ChatRouter } from '../http/server.ts';
import type { Caller } from '../users/users.service.ts';

/** A person counts as present this long after their client last said so (Zulip: 140 s). */
export const OFFLINE_THRESHOLD_SECONDS = 140;
/** A presence event is sent at most this often per person while they stay active. */
const EVENT_INTERVAL_SECONDS = 60;

const unix = (iso: string | null) => (iso ? Math.floor(new Date(iso).getTime() / 1000) : 0);

export type ChatPresenceService = ReturnType<typeof createChatPresenceService>;

export function createChatPresenceService(deps: { db: Db; afterCommit: () => void }) {
  const { db } = deps;

  /** Everyone's presence in the organization who shares it, in the legacy (by email) or modern (by id) format. */
  async function presences(caller: Caller, modern: boolean) {
    const rows = await db
      .selectFrom('chat_presence as p')
      .innerJoin('chat_users as u', 'u.id', 'p.user_id')
      .select(['u.id', 'u.email', 'p.last_active_time', 'p.last_connected_time'])
      .where('p.realm_id', '=', caller.realm.id)
      .where('u.is_active', '=', true)
      .where('u.presence_enabled', '=', true)
      .execute();
    const out: Record<string, unknown> = {};
    for (const r of rows) {
      const active = unix(r.last_active_time);
      const connected = unix(r.last_connected_time);
      if (modern) out[String(r.id)] = { active_timestamp: active, idle_timestamp: connected };
      else {
        const status = active >= connected - OFFLINE_THRESHOLD_SECONDS && active > 0 ? 'active' : 'idle';
        const entry = { client: 'website', status, timestamp: Math.max(active, connected), pushable: false };
        out[r.email] = { website: entry, aggregated: { client: 'website', status, timestamp: entry.timestamp } };
      }
    }
    return out;
  }

  return {
    presences,

    /** POST /users/me/presence: records the caller's status and answers everyone's. */
    async update(caller: Caller, v: { status: 'active' | 'idle'; pingOnly: boolean; modern: boolean }) {
      const now = new Date();
      const wrote = await db.transaction().execute(async (trx) => {
        const before = await trx.selectFrom('chat_presence').select(['last_active_time']).where('user_id', '=', caller.user.id).forUpdate().executeTakeFirst();
        const set = v.status === 'active' ? { last_active_time: now, last_connected_time: now } : { last_connected_time: now };
        await trx
          .insertInto('chat_presence')
          .values({ user_id: caller.user.id, realm_id: caller.realm.id, last_active_time: v.status === 'active' ? now : null, last_connected_time: now })
          .onConflict((oc) => oc.column('user_id').doUpdateSet(set))
          .execute();
        // News only when someone comes online or turns active after a while.
        const stale = !before || unix(before.last_active_time) < now.getTime() / 1000 - EVENT_INTERVAL_SECONDS;
        if (!caller.user.presence_enabled || !(stale && (v.status === 'active' || !before))) return false;
        const ts = Math.floor(now.getTime() / 1000);
        await writeEvents(trx, [
          {
            realmId: caller.realm.id,
            users: null,
            payload: { type: 'presence', user_id: caller.user.id, email: caller.user.email, server_timestamp: now.getTime() / 1000, presence: { website: { client: 'website', status: v.status, timestamp: ts, pushable: false } } },
          },
        ]);
        return true;
      });
      if (wrote) deps.afterCommit();
      const out: Record<string, unknown> = { server_timestamp: now.getTime() / 1000, zephyr_mirror_active: false };
      if (!v.pingOnly) out.presences = await presences(caller, v.modern);
      if (v.modern) out.presence_last_update_id = -1;
      return out;
    },
  };
}

export function chatPresenceRoutes(r: ChatRouter, deps: { presence: ChatPresenceService }) {
  const tags = ['chat-presence'];
  const Open = Type.Record(Type.String(), Type.Unknown());
  r.authed(
    {
      method: 'POST',
      url: '/users/me/presence',
      operationId: 'updatePresence',
      tags,
      response: Envelope({ server_timestamp: Type.Number(), zephyr_mirror_active: Type.Boolean(), presences: Type.Optional(Open), presence_last_update_id: Type.Optional(Type.Integer()) }),
    },
    async ({ params, caller }) => {
      const status = params.literal('status', ['active', 'idle'] as const, true);
      const pingOnly = params.bool('ping_only') ?? false;
      const modern = (params.bool('slim_presence') ?? false) || params.has('last_update_id');
      params.int('last_update_id');
      return deps.presence.update(caller, { status, pingOnly, modern });
    },
  );
  r.authed({ method: 'GET', url: '/realm/presence', operationId: 'getPresence', tags, response: Envelope({ server_timestamp: Type.Number(), presences: Open }) }, async ({ caller }) => ({
    server_timestamp: Date.now() / 1000,
    presences: await deps.presence.presences(caller, false),
  }));
}
