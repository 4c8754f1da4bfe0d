import readline from 'node:readline/promises';
import { intArg, seg } from '../client.ts';
import { LIMIT_HELP, LIMIT_OPTION, type Command, type Ctx } from '../command.ts';
import { block, emit, table, type Column } from '../output.ts';

/** `list`: every item of a list route as a table (or the items as JSON). */
export function listCommand<T>(opts: { path: string; summary: string; columns: Array<Column<T>>; filters?: Record<string, string> }): Command {
  const filters = opts.filters ?? {};
  return {
    name: 'list',
    summary: opts.summary,
    options: { ...LIMIT_OPTION, ...Object.fromEntries(Object.keys(filters).map((f) => [f, { type: 'string' as const }])) },
    help: [LIMIT_HELP, ...Object.entries(filters).map(([f, h]) => `--${f} V`.padEnd(20) + h)],
    async run(ctx, _args, flags) {
      const query = Object.fromEntries(Object.keys(filters).map((f) => [f, flags[f]]));
      const items = await ctx.api().list<T>(opts.path, query, intArg('--limit', flags.limit));
      emit(ctx.out, items, () => table(items, opts.columns));
    },
  };
}

/** `show NAME`: one resource as a key-value block of the fields named (all when none). */
export function showCommand(opts: { path: (name: string) => string; summary: string; arg?: string; fields?: string[]; render?: (body: any) => string }): Command {
  return {
    name: 'show',
    args: opts.arg ?? 'NAME',
    summary: opts.summary,
    async run(ctx, [name]) {
      const body = await ctx.api().get(opts.path(name));
      emit(ctx.out, body, () => (opts.render ? opts.render(body) : block(body, opts.fields)));
    },
  };
}

/** `delete NAME`: with If-Match from a fresh read, so a changed resource is not removed unseen. */
export function deleteCommand(opts: { path: (name: string) => string; summary: string; arg?: string; name?: string; done?: string; /** Asked on a terminal unless --yes: the question, naming what is lost. */ confirm?: (name: string) => string }): Command {
  return {
    name: opts.name ?? 'delete',
    args: opts.arg ?? 'NAME',
    summary: opts.summary,
    ...(opts.confirm ? { options: { yes: { type: 'boolean' as const, short: 'y' } }, help: ['--yes, -y           do not ask first (for scripts; without a terminal nothing is asked)'] } : {}),
    async run(ctx, [name], flags) {
      if (opts.confirm && ctx.stdin.isTTY && !flags.yes) {
        const rl = readline.createInterface({ input: ctx.stdin, output: process.stderr, terminal: true });
        const said = await rl.question(`${opts.confirm(name)} [y/N] `).finally(() => rl.close());
        if (!/^y(es)?$/i.test(said.trim())) {
          ctx.out.progress('nothing done\n');
          return 1;
        }
      }
      await ctx.api().write('DELETE', opts.path(name));
      emit(ctx.out, { deleted: name }, () => `${opts.done ?? 'deleted'} ${name}\n`);
    },
  };
}

/** A secret's name keeps its slashes (they are part of the route); each segment is encoded. */
export const pathOf = (name: string) => name.split('/').map(seg).join('/');

/** Prints a written resource. */
export function written(ctx: Ctx, body: any, verb: string, what: string, fields?: string[]): void {
  emit(ctx.out, body, () => `${verb} ${what}\n${fields ? block(body, fields) : ''}`);
}

export { seg };
