import type { Role } from './api.ts';

export interface Section {
  /** The hash path: `#/<path>`. */
  path: string;
  label: string;
  /** The least role that may open it; the navigation hides it from others. */
  role?: Role;
  blurb: string;
}

/** The Console's sections, in navigation order. */
export const SECTIONS: Section[] = [
  { path: 'teams', label: 'Teams', blurb: 'Teams of agents made from a template, with their state, home and budget.' },
  { path: 'runs', label: 'Runs', blurb: 'Work the teams are doing and have done, newest first.' },
  { path: 'agents', label: 'Agents', blurb: 'Agent definitions and their versions.' },
  { path: 'team-templates', label: 'Team templates', blurb: 'Templates that teams are created from.' },
  { path: 'destinations', label: 'Egress destinations', blurb: 'Hosts that agents may reach, and the credentials they are given.' },
  { path: 'environments', label: 'Environments', blurb: 'Sandbox environments that agents run in.' },
  { path: 'skills', label: 'Skills', blurb: 'The platform skill catalogue.' },
  { path: 'integrations', label: 'Integrations', blurb: 'Chat, code host and issue trackers, and their status.' },
  { path: 'mcp-servers', label: 'MCP servers', blurb: 'Platform MCP servers first, then each team\u2019s.' },
  { path: 'secrets', label: 'Secrets', blurb: 'Secret references; values are written once and never shown.' },
  { path: 'users', label: 'Users', role: 'admin', blurb: 'People who may use the Console.' },
  { path: 'hosts', label: 'Hosts', role: 'operator', blurb: 'Sandbox hosts: their room, what is awake and asleep, and the runs waiting for room.' },
  { path: 'audit', label: 'Audit log', role: 'admin', blurb: 'Every write through the API, newest first.' },
  { path: 'import', label: 'Import', role: 'admin', blurb: 'Definitions from the configuration repository: the plan, its diffs, and Apply.' },
  { path: 'spend', label: 'Spend', blurb: 'Model spend of the active teams per UTC day.' },
  { path: 'account', label: 'Account', blurb: 'Your account, your API tokens and onboarding an agent.' },
];

const RANK: Record<Role, number> = { viewer: 1, operator: 2, admin: 3 };
export const mayOpen = (role: Role, s: Section) => !s.role || RANK[role] >= RANK[s.role];
