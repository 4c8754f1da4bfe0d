import { sql } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { ChatSurface, HookCaller } from '../../hooks.ts';
import { problems } from '../../errors/problems.ts';
import { pageOfList } from '../../db/pagination.ts';
import { isChatSurface } from '../runs/runs.rules.ts';
import { chatRoomLabel } from './teams.service.ts';
import { mustGetLiveTeam } from './teams.directory.ts';
import { presentLink } from './teams.presenters.ts';
import * as store from './teams.store.ts';

export const LINK_SURFACES = ['chat_a', 'chat_b', 'code_host', 'tracker_a', 'tracker_b'] as const;
export type LinkSurface = (typeof LINK_SURFACES)[number];
const isLinkSurface = (s: string): s is LinkSurface => (LINK_SURFACES as readonly string[]).includes(s);


/**
 * How a link is verified: a code-host repository only links once the app is installed on it
 * (verified); a tracker team or project once the tracker shows it to the agent (verified; it
 * stays unverified while the tracker is not configured); a chat room needs no verification.
 */
function verificationOf(surface: LinkSurface, tracker: 'verified' | 'unverified' | null): 'verified' | 'unverified' | 'not_applicable' {
  if (surface === 'code_host') return 'verified';
  if (surface === 'tracker_a' || surface === 'tracker_b') return tracker ?? 'unverified';
  return 'not_applicable';
}

/**
 * A link's id is `id`: without case for a repository or a tracker team or project, as work
 * arriving on them is matched (teamsOfRepository, teamsLinkedTo); exactly for a chat room.
 */
function sameId(column: 'external_id' | 'l.external_id', surface: LinkSurface, id: string) {
  return surface === 'code_host' || surface === 'tracker_a' || surface === 'tracker_b' ? sql<boolean>`lower(${sql.ref(column)}) = lower(${id})` : sql<boolean>`${sql.ref(column)} = ${id}`;
}

/**
 * A repository URL as compared with another: scheme, user and `.git` dropped, host and path in
 * lower case, so `https://host/Acme/App.git` and `https://host/acme/app` are one repository.
 */
export function sameRepositoryUrl(url: string): string | null {
  try {
    const u = new URL(url);
    return `${u.host}${u.pathname.replace(/\/+$/, '').replace(/\.git$/, '')}`.toLowerCase();
  } catch {
    return null;
  }
}

export function createLinksService(deps: { db: Db; hooks: HookCaller }) {
  const { db } = deps;

  const liveTeam = (name: string) => mustGetLiveTeam(db, name);

  return {
    async list(name: string) {
      const t = await liveTeam(name);
      return (await store.linksOf(db, [t.id])).map(presentLink);
    },

    /** A page of a team's links, in the order `list` gives them (surface, then id). */
    async page(name: string, query: { limit?: number; cursor?: string }) {
      const t = await liveTeam(name);
      return pageOfList(await store.linksOf(db, [t.id]), (l) => [l.surface, l.external_id], presentLink, query);
    },

    /** Links a surface to a team; linking again is a no-op. `created` says which. */
    async put(actor: Actor, name: string, input: { surface: LinkSurface; external_id: string; label?: string }) {
      const t = await liveTeam(name);
      // A run has one chat thread. A chat-homed team's work goes to its home room (work from a
      // tracker or the code host gets a thread there too); a room of the other chat surface would
      // need a second thread for the same run, so it is refused here, when an admin links it,
      // rather than each time a person gives work there.
      if (isChatSurface(t.home_surface) && isChatSurface(input.surface) && input.surface !== t.home_surface) {
        throw problems.conflict(
          `team "${name}" lives in a ${t.home_surface} room, and a run's progress goes to one chat thread, in that room: a ${input.surface} room cannot be linked to it. Link a ${t.home_surface} room instead, or give the ${input.surface} room a team of its own (home ${input.surface})`,
        );
      }
      if (input.surface === 'code_host') {
        if (!/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/.test(input.external_id)) {
          throw problems.validation([{ field: 'external_id', message: 'a code_host link is <owner>/<repo>' }]);
        }
        // Asked before the transaction: it calls the code host.
        const [coverage] = await deps.hooks.ask('codeHost:covers', input.external_id);
        if (!coverage?.covered) {
          const reason = coverage ? coverage.reason : `the code-host app is not installed on ${input.external_id}: the code_host integration is not configured`;
          throw problems.validation([{ field: 'external_id', message: reason }], reason);
        }
      }
      // A tracker team or project must be one the agent can see; asked before the transaction (it calls the tracker).
      let tracker: { verification: 'verified' | 'unverified'; label: string | null } | null = null;
      if (input.surface === 'tracker_a' || input.surface === 'tracker_b') {
        const [check] = await deps.hooks.ask('tracker:link', input.surface, input.external_id);
        if (check && 'refused' in check) throw problems.validation([{ field: 'external_id', message: check.refused }], check.refused);
        tracker = { verification: check?.verification ?? 'unverified', label: check && 'label' in check ? check.label : null };
      }
      // A chat room must be one the surface's bot can read and post in; its label is the channel's name.
      const room = isChatSurface(input.surface) ? await chatRoomLabel(deps.hooks, input.surface as ChatSurface, 'external_id', input.external_id) : null;
      const label = input.label ?? room ?? tracker?.label ?? input.external_id;
      return db.transaction().execute(async (trx) => {
        // A repository or tracker id in other case is the same link.
        const existing = await trx.selectFrom('team_links').selectAll().where('team_id', '=', t.id).where('surface', '=', input.surface).where(sameId('external_id', input.surface, input.external_id)).executeTakeFirst();
        if (existing) return { link: presentLink(existing), created: false };
        // Work arriving on a surface must find one team: another live team holding it is a conflict.
        const other = await trx
          .selectFrom('team_links as l')
          .innerJoin('teams as x', 'x.id', 'l.team_id')
          .select('x.name')
          .where('l.surface', '=', input.surface)
          .where(sameId('l.external_id', input.surface, input.external_id))
          .where('x.status', '<>', 'archived')
          .executeTakeFirst();
        if (other) throw problems.conflict(`${input.surface} ${input.external_id} is already linked to team "${other.name}"`);
        const row = await trx
          .insertInto('team_links')
          .values({ team_id: t.id, surface: input.surface, external_id: input.external_id, label, verification: verificationOf(input.surface, tracker?.verification ?? null) })
          .returningAll()
          .executeTakeFirstOrThrow();
        await recordAudit(trx, actor, 'team.link', { type: 'team', id: name }, { surface: input.surface, external_id: input.external_id });
        return { link: presentLink(row), created: true };
      });
    },

    /**
     * The live teams whose repository is `<owner>/<repo>` on the code host: a `code_host` link to
     * it, or a `repo_url` that is one of the repository's URLs there (names compare without case).
     */
    /** Each live team's links on a surface (a chat surface's rooms). */
    async linkedOn(surface: LinkSurface): Promise<Array<{ team: string; external_id: string }>> {
      return db
        .selectFrom('team_links as l')
        .innerJoin('teams as t', 't.id', 'l.team_id')
        .select(['t.name as team', 'l.external_id'])
        .where('l.surface', '=', surface)
        .where('t.status', '=', 'active')
        .execute();
    },

    async teamsOfRepository(repo: string, urls: string[]): Promise<string[]> {
      const linked = await db
        .selectFrom('team_links as l')
        .innerJoin('teams as t', 't.id', 'l.team_id')
        .select('t.name')
        .where('l.surface', '=', 'code_host')
        .where(sql`lower(l.external_id)`, '=', repo.toLowerCase())
        .where('t.status', '<>', 'archived')
        .execute();
      const wanted = new Set(urls.map(sameRepositoryUrl).filter((u): u is string => u !== null));
      const withUrl = wanted.size ? await db.selectFrom('teams').select(['name', 'repo_url']).where('status', '<>', 'archived').where('repo_url', 'is not', null).execute() : [];
      const byUrl = withUrl.filter((t) => wanted.has(sameRepositoryUrl(t.repo_url!) ?? '')).map((t) => t.name);
      return [...new Set([...linked.map((r) => r.name), ...byUrl])].sort();
    },

    /** The live teams holding a link of a surface to one of `externalIds` (compared without case): a tracker issue's team or project. */
    async teamsLinkedTo(surface: LinkSurface, externalIds: string[]): Promise<string[]> {
      if (!externalIds.length) return [];
      const rows = await db
        .selectFrom('team_links as l')
        .innerJoin('teams as t', 't.id', 'l.team_id')
        .select('t.name')
        .where('l.surface', '=', surface)
        .where(sql`lower(l.external_id)`, 'in', externalIds.map((x) => x.toLowerCase()))
        .where('t.status', '<>', 'archived')
        .execute();
      return [...new Set(rows.map((r) => r.name))].sort();
    },

    async remove(actor: Actor, name: string, surface: string, externalId: string) {
      const t = await liveTeam(name);
      await db.transaction().execute(async (trx) => {
        // The link as put compares its id: a repository or tracker id in other case is the same link.
        const gone = await trx
          .deleteFrom('team_links')
          .where('team_id', '=', t.id)
          .where('surface', '=', surface)
          .where(isLinkSurface(surface) ? sameId('external_id', surface, externalId) : sql<boolean>`external_id = ${externalId}`)
          .returning('surface')
          .executeTakeFirst();
        if (!gone) throw problems.notFound(`link of team "${name}"`, `${surface}/${externalId}`);
        await recordAudit(trx, actor, 'team.unlink', { type: 'team', id: name }, { surface, external_id: externalId });
      });
    },
  };
}

export type LinksService = ReturnType<typeof createLinksService>;
