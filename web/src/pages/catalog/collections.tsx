import { PagedTable, usePaged } from '../../ui.tsx';
import type { Collection } from './Collection.tsx';

export const DESTINATIONS: Collection = {
  route: 'destinations',
  api: 'destinations',
  title: 'Egress destinations',
  singular: 'destination',
  blurb: 'Hosts that agents may reach through the gateway, and the credential the gateway injects for each. Built-ins cannot be changed.',
  columns: ['name', 'host', 'what', 'methods', 'inject_secret', 'builtin', 'dev_only'],
  fields: ['host', 'methods', 'paths', 'header_allowlist', 'inject_secret', 'git_push_ref_globs', 'what', 'github_scope', 'dev_only', 'policy_name'],
  sample: { name: 'example-api', host: 'api.example.com', methods: ['GET', 'POST'], paths: ['/v1/*'], header_allowlist: ['content-type'], inject_secret: null, git_push_ref_globs: [], what: 'what agents use it for' },
  schemas: { create: 'DestinationCreate', replace: 'DestinationPut' },
  omit: ['builtin'],
  writeRole: 'admin',
  locked: (row) => (row.builtin ? 'A built-in destination: defined by the service, it cannot be replaced or deleted.' : null),
  emptyText: 'No destinations yet besides the built-ins. A destination lets agents reach a host, with a credential the gateway adds.',
};

export const ENVIRONMENTS: Collection = {
  route: 'environments',
  api: 'environments',
  title: 'Environments',
  singular: 'environment',
  blurb: 'Sandbox profiles that template roles run in: the provider, the size, and when an idle agent sleeps.',
  columns: ['name', 'provider', 'profile', 'vcpus', 'memory_mib', 'disk_gib', 'idle_after_seconds', 'deep_sleep_after_seconds', 'used_by'],
  fields: ['provider', 'profile', 'vcpus', 'memory_mib', 'disk_gib', 'checkpoint_id', 'idle_after_seconds', 'deep_sleep_after_seconds'],
  // `local` runs on any sandbox host (no KVM, no image); a microVM needs both.
  sample: { name: 'small', provider: 'local', vcpus: 1, memory_mib: 1024, disk_gib: 2, idle_after_seconds: 900, deep_sleep_after_seconds: 86400 },
  schemas: { create: 'EnvironmentCreate', replace: 'EnvironmentPut' },
  writeRole: 'admin',
  extra: () => <Images />,
  emptyText: 'No environments yet. Template roles name an environment to run in; create one before the first template.',
};

/** The agent image builds a microVM boots (the newest is current), and checkpoints in use. */
function Images() {
  const images = usePaged<Record<string, unknown>>('/images');
  const checkpoints = usePaged<Record<string, unknown>>('/checkpoints');
  return (
    <>
      <div className="part">
        <h2>Images</h2>
        <p className="muted">Built with crewhouse images build; a microVM boots the current one.</p>
        <PagedTable list={images} label="images" columns={['name', 'version', 'built_at', 'current', 'manifest']} empty="No images built yet." />
      </div>
      <div className="part">
        <h2>Checkpoints</h2>
        <PagedTable list={checkpoints} label="checkpoints" empty="No checkpoints in use." />
      </div>
    </>
  );
}
