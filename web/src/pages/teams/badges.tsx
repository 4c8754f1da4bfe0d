const STATE_TONE: Record<string, string> = { running: 'good', waiting: 'warn', sleeping: '', idle: '', archived: 'bad' };
const BUDGET_TONE: Record<string, string> = { normal: 'good', warning: 'warn', exceeded: 'bad' };

/** A team's state in words and colour (provisioning shown while it lasts). */
export function StateBadge({ team }: { team: { state: string; status: string } }) {
  if (team.status === 'provisioning') return <span className="badge warn">provisioning</span>;
  return <span className={`badge ${STATE_TONE[team.state] ?? ''}`}>{team.state}</span>;
}

/** Budget state as colour and text: colour alone would say nothing to some readers. */
export function BudgetBadge({ state }: { state: string }) {
  const words: Record<string, string> = { normal: 'within budget', warning: 'near its budget', exceeded: 'budget spent' };
  return <span className={`badge ${BUDGET_TONE[state] ?? ''}`}>{words[state] ?? state}</span>;
}
