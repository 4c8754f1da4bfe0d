import { bodyOf, FILE_HELP, FILE_OPTION, flagsOf, type Group } from '../command.ts';
import { emit, table } from '../output.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';

const FIELDS = { provider: 'string', profile: 'nullable', vcpus: 'int', memory_mib: 'int', disk_gib: 'int', checkpoint_id: 'nullable', idle_after_seconds: 'int', deep_sleep_after_seconds: 'int' } as const;
const WRITABLE = ['name', ...Object.keys(FIELDS)];
const SHOWN = ['name', 'provider', 'profile', 'vcpus', 'memory_mib', 'disk_gib', 'idle_after_seconds', 'deep_sleep_after_seconds'];
const HELP = [FILE_HELP, '--provider P        microvm, hosted or local', '--profile N         the provider\'s size name', '--vcpus N  --memory-mib N  --disk-gib N', '--checkpoint-id C', '--idle-after-seconds N  --deep-sleep-after-seconds N'];

export const environments: Group = {
  name: 'environments',
  summary: 'Environments: where a role\'s sandbox runs (provider, size, sleep times); agent images',
  commands: [
    listCommand({ path: '/environments', summary: 'list environments', columns: [['NAME', (e: any) => e.name], ['PROVIDER', (e) => e.provider], ['PROFILE', (e) => e.profile], ['VCPUS', (e) => e.vcpus], ['MEMORY MIB', (e) => e.memory_mib], ['DISK GIB', (e) => e.disk_gib], ['USED BY', (e) => e.used_by?.length ?? e.used_by]] }),
    showCommand({ path: (n) => `/environments/${seg(n)}`, summary: 'show an environment' }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create an environment',
      options: { ...FILE_OPTION, ...flagsOf(FIELDS) },
      help: HELP,
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, FIELDS);
        const res = await ctx.api().request('POST', '/environments', { body: { ...body, name } });
        written(ctx, res.body, 'created environment', name, SHOWN);
      },
    },
    {
      name: 'update',
      args: 'NAME',
      summary: 'change an environment: the fields given replace those it has',
      options: { ...FILE_OPTION, ...flagsOf(FIELDS) },
      help: HELP,
      async run(ctx, [name], flags) {
        const api = ctx.api();
        const path = `/environments/${seg(name)}`;
        const { body: current, etag } = await api.read(path);
        const changes = await bodyOf(ctx, flags, FIELDS);
        const body = Object.fromEntries(WRITABLE.filter((k) => k in current).map((k) => [k, current[k]]));
        const res = await api.request('PUT', path, { body: { ...body, ...changes }, ifMatch: etag });
        written(ctx, res.body, 'updated environment', name, SHOWN);
      },
    },
    deleteCommand({ path: (n) => `/environments/${seg(n)}`, summary: 'delete an environment (refused while an agent or template names it)' }),
    {
      name: 'images',
      summary: 'agent images built on the hosts, newest first',
      async run(ctx) {
        const items = await ctx.api().list('/images');
        emit(ctx.out, items, () => table(items, [['NAME', (i: any) => i.name], ['VERSION', (i) => i.version], ['CURRENT', (i) => (i.current ? 'yes' : '')], ['BUILT', (i) => i.built_at]]));
      },
    },
    {
      name: 'checkpoints',
      summary: 'checkpoint ids in use and what uses them',
      async run(ctx) {
        const items = await ctx.api().list('/checkpoints');
        emit(ctx.out, items, () => table(items, [['ID', (c: any) => c.id], ['USED BY', (c) => c.used_by]]));
      },
    },
  ],
};
