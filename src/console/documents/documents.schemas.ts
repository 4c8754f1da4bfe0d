import { Type, type Static } from 'typebox';

export const DOCUMENT_NAME_PATTERN = '^[a-z0-9][a-z0-9._-]{0,62}$';
/** What DOCUMENT_NAME_PATTERN allows, in words. */
export const DOCUMENT_NAME_WORDS = 'lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; at most 63 characters';
export const DOCUMENT_MEDIA_TYPES = ['text/markdown', 'text/plain', 'text/csv', 'application/json', 'application/yaml'] as const;
export const DOCUMENT_LIMITS = {
  contentBytes: 256 * 1024,
  descriptionChars: 200,
  perOwner: 20,
  totalBytes: 384 * 1024,
};

const Scope = Type.Union([Type.Literal('agent'), Type.Literal('team')]);
/** The text types a context document may have; binary files are not context. */
export const DocumentMediaType = Type.Enum(DOCUMENT_MEDIA_TYPES);

export const DocumentSummary = Type.Object({
  scope: Scope,
  owner: Type.String({ description: "the agent's or team's name" }),
  name: Type.String({ description: 'the file name under /workspace/context in the sandbox' }),
  media_type: Type.String(),
  description: Type.String(),
  size_bytes: Type.Integer(),
  sha256: Type.String(),
  created_by: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type DocumentSummary = Static<typeof DocumentSummary>;

export const DocumentSchema = Type.Object({ ...DocumentSummary.properties, content: Type.String() });
export type DocumentOut = Static<typeof DocumentSchema>;

// The media type and the description length are the schema's (400 naming the field); the
// content's limits are the service's (422 naming the field and the limit), since the byte size
// of UTF-8 is not a JSON-schema length, so the schema bounds it loosely.
export const DocumentPut = Type.Object(
  {
    media_type: DocumentMediaType,
    description: Type.Optional(Type.String({ maxLength: DOCUMENT_LIMITS.descriptionChars, description: 'shown to the model in an index' })),
    content: Type.String({ maxLength: 2 * DOCUMENT_LIMITS.contentBytes, description: 'UTF-8 text without NUL, 1 byte to 256 KiB' }),
  },
  { additionalProperties: false },
);
export type DocumentPut = Static<typeof DocumentPut>;

export const DocumentParams = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 128 }),
  // The name's rule is checked by the service with the document's other rules (a 422 naming it); the contract says it in words.
  doc: Type.String({ minLength: 1, maxLength: 128, description: `the document's name: ${DOCUMENT_NAME_WORDS}` }),
});
export const OwnerParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) });
