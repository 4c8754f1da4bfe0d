import { Type } from 'typebox';
import type { App } from '../../http/kernel.ts';
import { budgetStateOf, SPEND_CACHE_MS, type SpendService } from './spend.service.ts';

const DaySpend = Type.Object({ date: Type.String({ description: 'UTC day, YYYY-MM-DD' }), spend_usd: Type.Number(), tokens: Type.Integer(), requests: Type.Integer() });
const Totals = Type.Object({ spend_usd: Type.Number(), tokens: Type.Integer(), requests: Type.Integer() });
const State = Type.Union([Type.Literal('normal'), Type.Literal('warning'), Type.Literal('exceeded')]);
const Days = Type.Object({ days: Type.Optional(Type.Integer({ minimum: 1, maximum: 366, default: 7, description: 'UTC days ending today (default 7)' })) }, { additionalProperties: false });

const Spend = Type.Object({
  days: Type.Integer(),
  series: Type.Array(DaySpend, { description: 'all active teams summed per UTC day, oldest first' }),
  totals: Totals,
  budget_usd_per_day: Type.Number({ description: 'sum of active teams\' daily budgets' }),
  teams: Type.Array(Type.Object({ team: Type.String(), budget_usd_per_day: Type.Number(), state: State, series: Type.Array(DaySpend), totals: Totals })),
});

const Budget = Type.Object({
  team: Type.String(),
  budget_usd_per_day: Type.Number(),
  spent_today_usd: Type.Number(),
  state: State,
  days: Type.Integer(),
  series: Type.Array(DaySpend, { description: 'per UTC day, oldest first' }),
  totals: Totals,
});

const cacheNote = `Answers are cached for ${SPEND_CACHE_MS / 1000} s. 503 without the model proxy, 502 when it fails.`;

/** GET /spend and GET /teams/{name}/budget: the model proxy's spend in the spec's shapes. */
/** A team's daily budget, with the name its spend has at the model proxy (the teams' provisioning answers). */
interface TeamBudget {
  name: string;
  proxyTeam: string;
  budget_usd_per_day: number;
}

export function spendRoutes(app: App, deps: { spend: SpendService; teams: { activeBudgets(): Promise<TeamBudget[]>; budgetOf(name: string): Promise<TeamBudget> } }) {
  const { spend, teams } = deps;

  app.get('/spend', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getSpend', summary: 'Get the spend of active teams', problems: { 502: 'the model proxy failed', 503: 'the model proxy is not configured or not answering' }, tags: ['teams'], description: `Spend of active teams per UTC day. ${cacheNote}`, querystring: Days, response: { 200: Spend } },
    handler: async (req) => {
      const days = req.query.days ?? 7;
      const [all, active] = await Promise.all([spend.all(days), teams.activeBudgets()]);
      const byTeam = new Map(all.teams.map((t) => [t.team, t]));
      const emptySeries = all.series.map((d) => ({ date: d.date, spend_usd: 0, tokens: 0, requests: 0 }));
      const rows = active.map((t) => {
        const s = byTeam.get(t.proxyTeam);
        return {
          team: t.name,
          budget_usd_per_day: t.budget_usd_per_day,
          state: budgetStateOf(s?.spent_today_usd ?? 0, t.budget_usd_per_day),
          series: s?.series ?? emptySeries,
          totals: s?.totals ?? { spend_usd: 0, tokens: 0, requests: 0 },
        };
      });
      const series = all.series.map((d, i) => ({
        date: d.date,
        spend_usd: rows.reduce((sum, r) => sum + (r.series[i]?.spend_usd ?? 0), 0),
        tokens: rows.reduce((sum, r) => sum + (r.series[i]?.tokens ?? 0), 0),
        requests: rows.reduce((sum, r) => sum + (r.series[i]?.requests ?? 0), 0),
      }));
      const totals = {
        spend_usd: rows.reduce((s, r) => s + r.totals.spend_usd, 0),
        tokens: rows.reduce((s, r) => s + r.totals.tokens, 0),
        requests: rows.reduce((s, r) => s + r.totals.requests, 0),
      };
      return { days, series, totals, budget_usd_per_day: active.reduce((s, t) => s + t.budget_usd_per_day, 0), teams: rows };
    },
  });

  app.get('/teams/:name/budget', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getTeamBudget',
      summary: 'Get a team\'s budget and spend',
      problems: { 502: 'the model proxy failed', 503: 'the model proxy is not configured or not answering' },
      tags: ['teams'],
      description: `The team's budget and spend per UTC day. 404 for an unknown team. ${cacheNote}`,
      params: Type.Object({ name: Type.String({ maxLength: 63 }) }),
      querystring: Days,
      response: { 200: Budget },
    },
    handler: async (req) => {
      const team = await teams.budgetOf(req.params.name);
      const days = req.query.days ?? 7;
      const s = await spend.team(team.proxyTeam, days);
      return {
        team: team.name,
        budget_usd_per_day: team.budget_usd_per_day,
        spent_today_usd: s.spent_today_usd,
        state: budgetStateOf(s.spent_today_usd, team.budget_usd_per_day),
        days,
        series: s.series,
        totals: s.totals,
      };
    },
  });
}
