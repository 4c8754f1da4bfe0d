import { intArg } from '../client.ts';
import type { Group } from '../command.ts';
import { emit, table } from '../output.ts';

const usd = (n: number) => (typeof n === 'number' ? n.toFixed(2) : '-');

export const spend: Group = {
  name: 'spend',
  summary: 'Spend: per team and in total, per UTC day, against the budgets',
  commands: [
    {
      name: '',
      args: '[TEAM]',
      summary: 'spend of every active team (or one team\'s, per day) against its budget',
      options: { days: { type: 'string' } },
      help: ['--days N            UTC days ending today'],
      async run(ctx, [team], flags) {
        const days = intArg('--days', flags.days);
        const api = ctx.api();
        if (team) {
          const b = await api.get(`/teams/${encodeURIComponent(team)}/budget`, { days });
          emit(ctx.out, b, () => `team ${b.team}: ${usd(b.spent_today_usd)} of ${usd(b.budget_usd_per_day)} USD today (${b.state})\n\n` + table(b.series, [['DAY', (d: any) => d.date], ['SPEND USD', (d) => usd(d.spend_usd)], ['TOKENS', (d) => d.tokens], ['REQUESTS', (d) => d.requests]]));
          return;
        }
        const s = await api.get('/spend', { days });
        emit(ctx.out, s, () =>
          `all active teams, last ${s.days} days: ${usd(s.totals.spend_usd)} USD, ${s.totals.tokens} tokens, ${s.totals.requests} requests; budgets ${usd(s.budget_usd_per_day)} USD a day\n\n` +
          table(s.teams, [['TEAM', (t: any) => t.team], ['SPEND USD', (t) => usd(t.totals.spend_usd)], ['TOKENS', (t) => t.totals.tokens], ['REQUESTS', (t) => t.totals.requests], ['BUDGET USD/DAY', (t) => usd(t.budget_usd_per_day)], ['STATE', (t) => t.state]]),
        );
      },
    },
  ],
};
