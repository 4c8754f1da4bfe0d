import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';

export const ENVIRONMENT_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
/** What ENVIRONMENT_NAME_PATTERN allows, in words. */
export const ENVIRONMENT_NAME_WORDS = 'lowercase letters, digits, "_" and "-", starting with a letter or digit; at most 63 characters';
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);
const Provider = Type.Union([Type.Literal('microvm'), Type.Literal('hosted'), Type.Literal('local')], {
  description:
    '`microvm` (microVMs on a host) or `hosted` (a hosted-computer service). Extension: `local`, a process tree in its own namespaces on a sandbox host (bubblewrap), for development and for hosts without KVM; it needs no image and takes no checkpoint.',
});

export const ImageFile = Type.Object({ file: Type.String(), sha256: Type.String() });

/** An agent image build, from its manifest. */
export const Image = Type.Object({
  name: Type.String(),
  version: Type.String(),
  kernel: ImageFile,
  rootfs: ImageFile,
  built_at: Type.String(),
  current: Type.Boolean({ description: 'the newest build: what a microVM boots' }),
  manifest: Type.String({ description: 'the manifest file name in SERVICE_IMAGES_DIR' }),
});
export type Image = Static<typeof Image>;

export const ImageRef = Type.Object({ name: Type.String(), version: Type.String(), built_at: Type.String() });

export const Environment = Type.Object({
  name: Type.String(),
  provider: Provider,
  profile: Nullable(Type.String()),
  vcpus: Nullable(Type.Integer()),
  memory_mib: Nullable(Type.Integer()),
  disk_gib: Nullable(Type.Integer()),
  checkpoint_id: Nullable(Type.String()),
  idle_after_seconds: Type.Integer(),
  deep_sleep_after_seconds: Type.Integer(),
  image: Nullable(ImageRef),
  used_by: Type.Integer({ description: 'current agent and template versions naming it' }),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type Environment = Static<typeof Environment>;

export const DEFAULT_IDLE_AFTER_SECONDS = 900;
export const DEFAULT_DEEP_SLEEP_AFTER_SECONDS = 86_400;

const fields = {
  provider: Provider,
  profile: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, ...matching('^[A-Za-z0-9][A-Za-z0-9._:-]*$', 'letters, digits, ".", "_", ":" and "-", starting with a letter or digit'), description: "the provider's size name" }))),
  vcpus: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 128 }))),
  memory_mib: Type.Optional(Nullable(Type.Integer({ minimum: 128, maximum: 1_048_576 }))),
  disk_gib: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 16_384 }))),
  checkpoint_id: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128, ...matching('^[A-Za-z0-9][A-Za-z0-9._:/-]*$', 'letters, digits, ".", "_", ":", "/" and "-", starting with a letter or digit'), description: 'required for hosted, refused for microvm' }))),
  idle_after_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 604_800, description: `when an idle agent is snapshotted; default ${DEFAULT_IDLE_AFTER_SECONDS}` })),
  deep_sleep_after_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_592_000, description: `when it goes into deep sleep; at least idle_after_seconds; default ${DEFAULT_DEEP_SLEEP_AFTER_SECONDS}` })),
};

export const EnvironmentCreate = Type.Object({ name: Type.String({ ...matching(ENVIRONMENT_NAME_PATTERN, ENVIRONMENT_NAME_WORDS), description: 'lowercase letters, digits, _ and -; at most 63' }), ...fields }, { additionalProperties: false });
export type EnvironmentCreate = Static<typeof EnvironmentCreate>;

export const EnvironmentPut = Type.Object({ name: Type.Optional(Type.String({ maxLength: 128, description: 'if given, the name in the path' })), ...fields }, { additionalProperties: false });
export type EnvironmentPut = Static<typeof EnvironmentPut>;

export const EnvironmentParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) });

export const Checkpoint = Type.Object({
  id: Type.String(),
  used_by: Type.Array(Type.Object({ kind: Type.String({ description: '`environment` or `team`' }), name: Type.String() })),
});
