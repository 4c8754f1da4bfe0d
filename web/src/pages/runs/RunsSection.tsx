import type { SessionUser } from '../../api.ts';
import { useHash } from '../../hash.ts';
import { NewTask } from './NewTask.tsx';
import { RunPage } from './RunPage.tsx';
import { RunsList } from './RunsList.tsx';

/** `#/runs`, `#/runs/new?team=NAME` and `#/runs/<id>`: the part after `#/runs` picks the page. */
export function RunsSection({ user }: { user: SessionUser }) {
  const hash = useHash();
  const m = /^#\/runs(?:\/([^?]*))?(?:\?(.*))?$/.exec(hash);
  const sub = m?.[1] ? decodeURIComponent(m[1]) : '';
  const query = new URLSearchParams(m?.[2] ?? '');
  if (sub === 'new') return <NewTask user={user} team={query.get('team') ?? ''} />;
  if (sub) return <RunPage key={sub} id={sub} user={user} />;
  return <RunsList user={user} query={query} />;
}
