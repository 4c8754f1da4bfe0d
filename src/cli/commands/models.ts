import type { Group } from '../command.ts';
import { emit, table } from '../output.ts';

export const models: Group = {
  name: 'models',
  summary: 'Model aliases: what agents and templates name, and the model each points at',
  commands: [
    {
      name: '',
      summary: 'the model aliases of this deployment (SERVICE_MODELS, or the built-in smart, fast and local); a local one needs no key',
      async run(ctx) {
        const list = await ctx.api().list('/models');
        emit(ctx.out, list, () =>
          table(list, [
            ['ALIAS', (m: any) => m.alias],
            ['MODEL', (m) => m.model],
            ['API', (m) => m.api],
            ['UPSTREAM', (m) => m.upstream_host],
            ['ON THIS MACHINE', (m) => (m.local ? 'yes (no key)' : 'no')],
            ['USD PER MTOK IN/OUT', (m) => `${m.input_usd_per_mtok}/${m.output_usd_per_mtok}`],
            ['DESCRIPTION', (m) => m.description],
          ]),
        );
      },
    },
  ],
};
