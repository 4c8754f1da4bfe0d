import { Type } from 'typebox';
import { chatErrors } from '../http/errors.ts';
import { Envelope, type ChatRouter } from '../http/server.ts';
import type { ChatProfileFieldsService } from './profile-fields.service.ts';

const tags = ['chat-profile-fields'];

export function chatProfileFieldsRoutes(r: ChatRouter, deps: { profileFields: ChatProfileFieldsService }) {
  const { profileFields } = deps;

  r.authed(
    {
      method: 'GET',
      url: '/realm/profile_fields',
      operationId: 'getCustomProfileFields',
      tags,
      response: Envelope({
        custom_fields: Type.Array(Type.Object({ id: Type.Integer(), name: Type.String(), hint: Type.String(), type: Type.Integer(), field_data: Type.String(), order: Type.Integer() })),
      }),
    },
    async ({ caller }) => ({ custom_fields: await profileFields.list(caller) }),
  );

  r.authed({ method: 'POST', url: '/realm/profile_fields', operationId: 'createCustomProfileField', tags, response: Envelope({ id: Type.Integer() }) }, async ({ params, caller }) => {
    const name = params.string('name', { required: true, maxLength: 1000 });
    const hint = params.string('hint', { maxLength: 80 }) ?? '';
    const fieldType = params.int('field_type', true);
    const rawData = params.string('field_data', { maxLength: 100_000 });
    let fieldData: Record<string, unknown> | undefined;
    if (rawData !== undefined) {
      try {
        fieldData = JSON.parse(rawData);
      } catch {
        throw chatErrors.bad('field_data is not valid JSON');
      }
      if (typeof fieldData !== 'object' || fieldData === null || Array.isArray(fieldData)) throw chatErrors.bad('field_data is not a dict');
    }
    return { id: await profileFields.create(caller, { name, hint, fieldType, fieldData }) };
  });

  r.authed({ method: 'PATCH', url: '/users/me/profile_data', operationId: 'updateProfileData', tags, response: Envelope() }, async ({ params, caller }) => {
    const data = params.objectList('data', true, (x, label) => {
      if (typeof x.id !== 'number' || !Number.isSafeInteger(x.id)) throw chatErrors.bad(`${label}["id"] is not an integer`);
      if (x.value === undefined) throw chatErrors.bad(`${label}["value"] field is missing`);
      return { id: x.id, value: x.value };
    })!;
    await profileFields.setOwn(caller, data);
    return {};
  });
}
