import { Type } from 'typebox';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import type { ChatPlaygroundsService } from './playgrounds.service.ts';

const tags = ['chat-playgrounds'];

export function chatPlaygroundsRoutes(r: ChatRouter, deps: { playgrounds: ChatPlaygroundsService }) {
  const { playgrounds } = deps;

  r.authed({ method: 'POST', url: '/realm/playgrounds', operationId: 'addCodePlayground', tags, response: Envelope({ id: Type.Integer() }) }, async ({ params, caller }) => {
    const name = params.string('name', { required: true, maxLength: 60 });
    const pygmentsLanguage = params.string('pygments_language', { required: true, maxLength: 40 });
    const urlTemplate = params.string('url_template', { required: true, maxLength: 2048 });
    return { id: await playgrounds.add(caller, { name, pygmentsLanguage, urlTemplate }) };
  });

  r.authed(
    {
      method: 'GET',
      url: '/realm/playgrounds',
      operationId: 'getCodePlaygrounds',
      tags,
      response: Envelope({ playgrounds: Type.Array(Type.Object({ id: Type.Integer(), name: Type.String(), pygments_language: Type.String(), url_template: Type.String() })) }),
    },
    async ({ caller }) => ({ playgrounds: await playgrounds.list(caller) }),
  );

  r.authed({ method: 'DELETE', url: '/realm/playgrounds/:playground_id', operationId: 'removeCodePlayground', tags, response: Envelope() }, async ({ req, caller }) => {
    await playgrounds.remove(caller, pathId((req.params as { playground_id: string }).playground_id));
    return {};
  });
}
