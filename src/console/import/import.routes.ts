import { actorOf } from '../../http/auth.ts';
import type { App } from '../../http/kernel.ts';
import { ImportPlan, ImportRequest } from './import.schemas.ts';
import type { ImportService } from './import.service.ts';

export function importRoutes(app: App, deps: { imports: ImportService }) {
  app.post('/import', {
    // No body at all is the dry run with the defaults, as `{}` is.
    config: { auth: { role: 'admin' }, optionalBody: true },
    schema: {
      operationId: 'importConfiguration',
      summary: 'Import from the configuration repository',
      tags: ['import'],
      description:
        'Reads the configuration repository (SERVICE_IMPORT_REPOSITORY: agents/, templates/, policies/, skills/) and answers the plan: per definition create, update (with a diff), unchanged or skip (with why), what the repository leaves alone, and every problem with its file and line. A dry run by default: nothing is written. With dry_run false the whole plan is applied in one transaction, all or nothing, and audited once with the commit; an apply with problems writes nothing (422). A changed agent or template gets a new version, an unchanged one none. force overwrites skills edited through the API; prune deletes what the repository does not name. Two imports wait for each other, and the later never undoes the earlier: an import (dry run or apply) during which another applied a different commit (for a directory that is not a git checkout: during which another applied at all) answers 409 and writes nothing; import again to plan against what was applied.',
      body: ImportRequest,
      response: { 200: ImportPlan },
      problems: { 409: 'another import applied a different commit while this one read the repository; nothing was written, import again', 502: 'the configuration repository could not be fetched' },
    },
    handler: async (req) => {
      const body = req.body;
      return deps.imports.run(actorOf(req), { dryRun: body.dry_run ?? true, force: body.force ?? false, prune: body.prune ?? false });
    },
  });
}
