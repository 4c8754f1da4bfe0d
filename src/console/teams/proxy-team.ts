/**
 * The team as the model proxy knows it: name and id, so a new team that takes an archived
 * team's name starts with no spend and no budget history of the old one.
 */
export const proxyTeamOf = (t: { name: string; id: number }) => `${t.name}.${t.id}`;

/** What a role's sealed model-proxy key is bound to: the team's id and the role. */
export const keyAad = (teamId: number, role: string) => `crewhouse-team-key:${teamId}/${role}`;
