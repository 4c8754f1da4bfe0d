export { createDocumentsService, documentsForRole, CONTEXT_DIR, type DocumentsService, type RoleDocument } from './documents.service.ts';
export { documentRoutes } from './documents.routes.ts';
export type { DocumentScope } from './documents.tables.ts';
