import type { ReactNode } from 'react';
import type { SessionUser } from './api.ts';
import { AgentList } from './pages/agents/AgentList.tsx';
import { AgentNew } from './pages/agents/AgentNew.tsx';
import { AgentPage } from './pages/agents/AgentPage.tsx';
import { Account } from './pages/Account.tsx';
import { McpServers } from './pages/shared/McpServers.tsx';
import { CollectionItem, CollectionList, CollectionNew } from './pages/catalog/Collection.tsx';
import { DESTINATIONS, ENVIRONMENTS } from './pages/catalog/collections.tsx';
import { Audit } from './pages/catalog/Audit.tsx';
import { Hosts } from './pages/Hosts.tsx';
import { IntegrationList, IntegrationPage } from './pages/catalog/Integrations.tsx';
import { Secrets } from './pages/catalog/Secrets.tsx';
import { SkillList, SkillNew, SkillPage } from './pages/catalog/Skills.tsx';
import { TeamList } from './pages/teams/TeamList.tsx';
import { TeamNew } from './pages/teams/TeamNew.tsx';
import { TeamPage } from './pages/teams/TeamPage.tsx';
import { TemplateList } from './pages/templates/TemplateList.tsx';
import { TemplateNew } from './pages/templates/TemplateNew.tsx';
import { TemplatePage } from './pages/templates/TemplatePage.tsx';
import { NewTask } from './pages/runs/NewTask.tsx';
import { RunPage } from './pages/runs/RunPage.tsx';
import { RunsList } from './pages/runs/RunsList.tsx';
import { SpendPage } from './pages/spend/SpendPage.tsx';
import { Users } from './pages/Users.tsx';
import { Import } from './pages/Import.tsx';
import type { Section } from './sections.ts';
import { Page } from './ui.tsx';

export interface PageProps {
  /** The `:name` parts of the route, decoded. */
  params: Record<string, string>;
  query: URLSearchParams;
  section: Section;
  user: SessionUser;
}

export interface Route {
  /** Segments after `#/`; `:x` matches any one segment, `*x` the rest. */
  path: string;
  page: (p: PageProps) => ReactNode;
}

/**
 * Every page of the console, one line each. The first segment is the section (navigation and
 * role).
 */
export const ROUTES: Route[] = [
  { path: 'teams', page: () => <TeamList /> },
  { path: 'teams/new', page: (p) => <TeamNew template={p.query.get('template')} /> },
  { path: 'teams/:name', page: (p) => <TeamPage name={p.params.name} /> },
  { path: 'agents', page: () => <AgentList /> },
  { path: 'agents/new', page: () => <AgentNew /> },
  { path: 'agents/:name', page: (p) => <AgentPage name={p.params.name} /> },
  { path: 'team-templates', page: () => <TemplateList /> },
  { path: 'team-templates/new', page: () => <TemplateNew /> },
  { path: 'team-templates/:name', page: (p) => <TemplatePage name={p.params.name} /> },
  { path: 'destinations', page: () => <CollectionList c={DESTINATIONS} /> },
  { path: 'destinations/new', page: () => <CollectionNew c={DESTINATIONS} /> },
  { path: 'destinations/:name', page: (p) => <CollectionItem c={DESTINATIONS} name={p.params.name} /> },
  { path: 'environments', page: () => <CollectionList c={ENVIRONMENTS} /> },
  { path: 'environments/new', page: () => <CollectionNew c={ENVIRONMENTS} /> },
  { path: 'environments/:name', page: (p) => <CollectionItem c={ENVIRONMENTS} name={p.params.name} /> },
  { path: 'skills', page: () => <SkillList /> },
  { path: 'skills/new', page: () => <SkillNew /> },
  { path: 'skills/:name', page: (p) => <SkillPage name={p.params.name} /> },
  { path: 'integrations', page: () => <IntegrationList /> },
  { path: 'integrations/:kind', page: (p) => <IntegrationPage kind={p.params.kind} /> },
  { path: 'secrets', page: (p) => <Secrets preset={p.query.get('name')} /> },
  { path: 'mcp-servers', page: () => <Page title="MCP servers"><McpServers /></Page> },
  { path: 'audit', page: () => <Audit /> },
  { path: 'hosts', page: () => <Hosts /> },
  { path: 'import', page: () => <Import /> },
  { path: 'runs', page: (p) => <RunsList user={p.user} query={p.query} /> },
  { path: 'runs/new', page: (p) => <NewTask user={p.user} team={p.query.get('team') ?? ''} /> },
  { path: 'runs/:id', page: (p) => <RunPage id={p.params.id} user={p.user} /> },
  { path: 'spend', page: () => <SpendPage /> },
  { path: 'users', page: (p) => <Users section={p.section} self={p.user} /> },
  { path: 'account', page: (p) => <Account section={p.section} user={p.user} /> },
];

/** The route a hash's segments open, with its parameters; literal segments win over `:x`. */
export function matchRoute(segments: string[]): { route: Route; params: Record<string, string> } | null {
  let best: { route: Route; params: Record<string, string>; score: number } | null = null;
  for (const route of ROUTES) {
    const parts = route.path.split('/');
    const params: Record<string, string> = {};
    let score = 0;
    let ok = true;
    for (let i = 0; i < parts.length && ok; i++) {
      const p = parts[i];
      if (p.startsWith('*')) {
        if (i >= segments.length) ok = false;
        else params[p.slice(1)] = segments.slice(i).join('/');
        break;
      }
      if (i >= segments.length) ok = false;
      else if (p.startsWith(':')) params[p.slice(1)] = segments[i];
      else if (p === segments[i]) score++;
      else ok = false;
    }
    if (ok && !parts[parts.length - 1].startsWith('*') && parts.length !== segments.length) ok = false;
    if (ok && (!best || score > best.score)) best = { route, params, score };
  }
  return best;
}
