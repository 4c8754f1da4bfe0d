import type { Role } from '../../auth/roles.ts';

const MAY: Record<Role, string> = {
  viewer: 'You may only read: every write answers 403, so do not retry one.',
  operator:
    'You may read everything, create, change and archive teams, link them, set budgets, give tasks, reply to and cancel runs, and manage a team\'s documents and MCP servers; agents, templates, environments, destinations, secrets, users and integration settings answer 403.',
  admin: 'You may read and change everything, including agents, team templates, environments, destinations, secrets, platform skills, users and integration settings.',
};

/** The onboarding text for a role of this deployment. It never holds a token; the caller adds one. */
export function onboardingFor(role: Role, consoleUrl: string) {
  const api = `${consoleUrl}/api/v1`;
  const openapi = `${api}/openapi.json`;
  const prompt =
    `You operate the Crewhouse deployment at ${consoleUrl} through its Console API at ${api}, whose contract is served at ${openapi}. ` +
    `Send every request with the header "Authorization: Bearer <token>" using the token you were given, and call GET ${api}/me first to learn who you are.`;
  const instructions = [
    '## Crewhouse Console API',
    `- Base URL: ${api}; contract: ${openapi} (OpenAPI 3.1).`,
    '- Authenticate with `Authorization: Bearer <token>`; `GET /me` answers who the token is.',
    `- Your role is **${role}**. ${MAY[role]}`,
    '- Lists answer `{items, next_cursor}`; pass `next_cursor` back as `cursor` for the next page.',
    '- To change an existing resource, GET it first and send its `ETag` as `If-Match`; 412 means it changed meanwhile: read it again and retry once.',
    '- Errors are `application/problem+json`: read `detail` and `errors[]`, which names each bad field.',
  ].join('\n');
  return { role, console_url: consoleUrl, api_base_url: api, openapi_url: openapi, prompt, instructions };
}
