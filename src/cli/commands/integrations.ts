import { readObject, type Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { block, emit, table } from '../output.ts';
import { seg, showCommand, written } from './shared.ts';

const KINDS = 'chat_a, chat_b, code_host, tracker_a or tracker_b';
const applied = (i: any) => i.status?.applied ?? i.status?.state ?? i.status;

export const integrations: Group = {
  name: 'integrations',
  summary: `Integrations (${KINDS}): settings, secret status, connection test, recent deliveries`,
  commands: [
    {
      name: 'list',
      summary: 'the integrations with their status',
      async run(ctx) {
        const body = await ctx.api().get('/integrations');
        const items: any[] = Array.isArray(body) ? body : (body.items ?? []);
        emit(ctx.out, body, () => table(items, [['KIND', (i: any) => i.kind], ['ENABLED', (i) => (i.enabled ? 'yes' : 'no')], ['APPLIED', applied], ['WEBHOOK URL', (i) => i.webhook_url]]));
      },
    },
    showCommand({ path: (k) => `/integrations/${seg(k)}`, arg: 'KIND', summary: 'one integration: settings, secrets set, status' }),
    {
      name: 'set',
      args: 'KIND',
      summary: 'change an integration\'s settings or turn it on or off (secrets: crewhouse secrets set integrations/KIND/NAME)',
      options: { enable: { type: 'boolean' }, disable: { type: 'boolean' }, setting: { type: 'string', multiple: true }, file: { type: 'string', short: 'f' } },
      help: ['--enable / --disable  turn it on or off', '--setting K=V       a setting (repeatable); K= clears it', '--file F, -f F      the body {enabled, settings} as JSON or YAML'],
      async run(ctx, [kind], flags) {
        if (flags.enable && flags.disable) throw new CliError('--enable and --disable exclude each other');
        const api = ctx.api();
        const path = `/integrations/${seg(kind)}`;
        const { body: current, etag } = await api.read(path);
        const body: Record<string, any> = flags.file ? await readObject(ctx, flags.file) : {};
        body.enabled ??= current.enabled;
        body.settings = { ...(current.settings ?? {}), ...(body.settings ?? {}) };
        if (flags.enable) body.enabled = true;
        if (flags.disable) body.enabled = false;
        for (const s of (flags.setting as string[] | undefined) ?? []) {
          const eq = s.indexOf('=');
          if (eq < 1) throw new CliError(`--setting must be KEY=VALUE, not "${s}"`);
          const value = s.slice(eq + 1);
          if (value === '') delete body.settings[s.slice(0, eq)];
          else body.settings[s.slice(0, eq)] = value;
        }
        const res = await api.request('PUT', path, { body, ifMatch: etag });
        written(ctx, res.body, 'updated integration', kind, ['kind', 'enabled', 'settings', 'status']);
      },
    },
    {
      name: 'test',
      args: 'KIND',
      summary: 'test an integration\'s connection; exit 1 unless it answers ok',
      async run(ctx, [kind]) {
        const res = await ctx.api().request('POST', `/integrations/${seg(kind)}/test`);
        emit(ctx.out, res.body, () => `${kind}: ${res.body.state}${res.body.detail ? ` - ${res.body.detail}` : ''}\n`);
        return res.body.state === 'ok' ? 0 : 1;
      },
    },
    {
      name: 'deliveries',
      args: 'KIND',
      summary: 'recent webhook deliveries of an integration',
      async run(ctx, [kind]) {
        const body = await ctx.api().get(`/integrations/${seg(kind)}/deliveries`);
        const items: any[] = Array.isArray(body) ? body : (body.items ?? []);
        emit(ctx.out, body, () => (items.length ? items.map((d) => block(d)).join('\n') : '(none)\n'));
      },
    },
  ],
};
