import type { Kysely } from 'kysely';
import type { Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { MintKeyInput, ModelProxyClient } from '../../modelproxy/client.ts';
import type { Cipher, Sealed } from '../../secrets/cipher.ts';
import type { SpendService } from '../spend/spend.service.ts';
import { revokeKeyLater } from './jobs/revoke-key.job.ts';
import { revokeTeamKeysLater } from './jobs/revoke-team-keys.job.ts';
import { syncTeamProxyLater } from './jobs/sync-proxy.job.ts';
import { keyAad, proxyTeamOf } from './proxy-team.ts';
import { mustGetLiveTeam } from './teams.directory.ts';
import * as store from './teams.store.ts';

/** What a role's model-proxy key is minted with. */
export type KeyedRole = Pick<MintKeyInput, 'role' | 'agent' | 'max_budget' | 'budget_duration' | 'rpm_limit' | 'tpm_limit'> & { model: string };

/**
 * A team as the model proxy knows it: one key per role (sealed here, bound to the team and
 * role), the team's daily budget, and its spend. The lifecycle calls it on create, patch,
 * upgrade and archive; the jobs it queues make the proxy follow what is stored, after commit.
 */
export function createTeamProvisioning(deps: { db: Db; proxy: ModelProxyClient; spend: SpendService; cipher: Cipher }) {
  const { db, proxy, spend } = deps;

  /** Queues the revocation of keys on `q`: the transaction that drops them, or the database after a failure. */
  async function revokeKeysLater(q: Kysely<Database>, keyIds: string[], actor: Actor) {
    for (const keyId of keyIds) await revokeKeyLater(q, keyId, actor.name);
  }

  return {
    revokeKeysLater,

    /** Mints one model-proxy key per role; on failure queues the revocation of what it minted and rethrows. */
    async mintKeys(team: { name: string; id: number }, roles: KeyedRole[], actor: Actor) {
      const minted: Array<{ role: string; key_id: string; sealed: string }> = [];
      try {
        for (const r of roles) {
          const key = await proxy.mintKey(
            { team: proxyTeamOf(team), role: r.role, agent: r.agent, models: [r.model], max_budget: r.max_budget, budget_duration: r.budget_duration, rpm_limit: r.rpm_limit, tpm_limit: r.tpm_limit },
            actor.name,
          );
          minted.push({ role: r.role, key_id: key.key_id, sealed: JSON.stringify(deps.cipher.seal(key.key, keyAad(team.id, r.role))) });
        }
        return minted;
      } catch (err) {
        await revokeKeysLater(db, minted.map((m) => m.key_id), actor);
        throw err;
      }
    },

    /** The proxy takes a team's daily budget now (before the change is stored: if it cannot, nothing changes). */
    setBudget: (team: { name: string; id: number }, usdPerDay: number, actor: Actor) => proxy.setTeamBudget(proxyTeamOf(team), usdPerDay, actor.name),
    /** The proxy takes a role key's models now. */
    setKeyModels: (keyId: string, models: string[], actor: Actor) => proxy.updateKey(keyId, { models }, actor.name).then(() => undefined),
    /** Queues, on `q`, pushing the stored budget and models to the proxy after commit. */
    syncLater: (q: Kysely<Database>, teamId: number, actor: Actor) => syncTeamProxyLater(q, teamId, actor.name),
    /** Queues, on `q`, the revocation of every key of a team. */
    revokeTeamKeysLater: (q: Kysely<Database>, team: { name: string; id: number }, actor: Actor) => revokeTeamKeysLater(q, proxyTeamOf(team), actor.name),
    /** Forgets the cached spend of a team whose budget or keys changed. */
    forget: (team: { name: string; id: number }) => spend.forget(proxyTeamOf(team)),

    /** Today's spend of every team, by the team as the proxy knows it (see spentOf). */
    spentToday: () => spend.spentTodayByTeam(),
    /** A team's share of what spentToday answered. */
    spentOf: (spent: Map<string, number>, team: { name: string; id: number }) => spent.get(proxyTeamOf(team)) ?? 0,

    /**
     * Has the team spent its budget for today (UTC)? Counted as the proxy enforces it: what is
     * settled plus what calls in flight hold reserved. The proxy writes settlements behind the
     * answers, so a run that was just refused for its budget may not show the call that spent
     * it as settled yet; it is still held.
     */
    async isBudgetSpent(team: { name: string; id: number; budget_usd_per_day: number }): Promise<boolean> {
      const s = await spend.teamNow(proxyTeamOf(team), 1);
      return s.spent_today_usd + s.reserved_usd >= team.budget_usd_per_day;
    },

    /** The model-proxy key of a team's role, opened; never for a route. */
    openKey: (teamId: number, role: string, sealed: Sealed) => deps.cipher.open(sealed, keyAad(teamId, role)),

    /** The active teams' daily budgets, each with its spend's name at the proxy, for the spend overview. */
    async activeBudgets() {
      return (await store.activeBudgets(db)).map((t) => ({ name: t.name, proxyTeam: proxyTeamOf(t), budget_usd_per_day: t.budget_usd_per_day }));
    },
    /** The live team of a name's daily budget, with its spend's name at the proxy; 404 when there is none. */
    async budgetOf(name: string) {
      const t = await mustGetLiveTeam(db, name);
      return { name: t.name, proxyTeam: proxyTeamOf(t), budget_usd_per_day: t.budget_usd_per_day };
    },
  };
}

export type TeamProvisioning = ReturnType<typeof createTeamProvisioning>;
