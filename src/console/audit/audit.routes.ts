import type { AuditLog } from '../../audit/audit.ts';
import type { App } from '../../http/kernel.ts';
import { Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { AuditEntry, AuditQuery } from './audit.schemas.ts';

/** The audit log for admins in the Console (the CLI's `crewhouse audit` reads the same table). */
export function auditRoutes(app: App, deps: { audit: AuditLog }) {
  app.get('/audit', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'listAudit',
      summary: 'List the audit log',
      tags: ['audit'],
      description: 'Every write of the API, newest first; filter by `action` and `target_type`. Details never hold a secret.',
      querystring: AuditQuery,
      response: { 200: Page(AuditEntry) },
    },
    handler: (req) => deps.audit.list({ limit: limitOf(req.query), cursor: req.query.cursor, action: req.query.action, targetType: req.query.target_type }),
  });
}
