import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader } from '../../http/schemas.ts';
import { User, UserCreate, UserIdParams, UserPatch, UserWithSetup } from './users.schemas.ts';
import { presentUser, type UsersService } from './users.service.ts';

export function usersRoutes(app: App, deps: { users: UsersService }) {
  const { users } = deps;
  const tags = ['users'];

  app.get('/users', {
    config: { auth: { role: 'admin' } },
    schema: { operationId: 'listUsers', summary: 'List users', tags, querystring: ListQuery, response: { 200: Page(User) } },
    handler: (req) => users.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/users', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createUser',
      summary: 'Create a user',
      etag: true,
      location: true,
      problems: { 409: 'a user with that name or email exists', 422: false },
      tags,
      description: 'Creates an account without a password; the answer carries a one-time setup_token and its setup link. There is no mail.',
      body: UserCreate,
      response: { 201: UserWithSetup },
    },
    handler: async (req, reply) => {
      const { row, setup } = await users.create(actorOf(req), req.body);
      setEtag(reply, row.row_version);
      return reply.status(201).header('location', `/api/v1/users/${row.id}`).send({ ...presentUser(row), ...setup });
    },
  });

  app.get('/users/:id', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getUser', summary: 'Get a user', etag: true, problems: { 403: 'only an admin may read another user' }, tags, description: 'Admins read anyone; a user may read their own record.', params: UserIdParams, response: { 200: User } },
    handler: async (req, reply) => {
      const row = await users.get(actorOf(req), req.params.id);
      setEtag(reply, row.row_version);
      return presentUser(row);
    },
  });

  app.patch('/users/:id', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'updateUser',
      summary: 'Update a user',
      etag: true,
      problems: { 409: 'the name or email is taken, or the change would leave no enabled admin', 422: false },
      tags,
      description: 'Changes name, email, role or the disabled flag. 409 if it would leave no enabled admin; disabling revokes the user\'s sessions and tokens.',
      params: UserIdParams,
      headers: IfMatchHeader,
      body: UserPatch,
      response: { 200: User },
    },
    handler: async (req, reply) => {
      const row = await users.patch(actorOf(req), req.params.id, await requireIfMatch(req, () => users.get(actorOf(req), req.params.id)), req.body);
      setEtag(reply, row.row_version);
      return presentUser(row);
    },
  });

  app.post('/users/:id/setup-token', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createUserSetupToken',
      summary: 'Issue a new setup token for a user',
      tags,
      description: 'Issues a fresh one-time setup token; earlier unused ones stop working.',
      params: UserIdParams,
      response: { 201: UserWithSetup },
    },
    handler: async (req, reply) => {
      const { row, setup } = await users.issueSetupToken(actorOf(req), req.params.id);
      // The setup token has no address of its own: it is the user's, and the user is where it is read.
      return reply.status(201).header('location', `/api/v1/users/${row.id}`).send({ ...presentUser(row), ...setup });
    },
  });
}

