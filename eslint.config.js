import path from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const SRC = path.join(import.meta.dirname, 'src');

/**
 * The module a file belongs to: a resource folder under src/console/ or src/runtime/, else the
 * top folder under src/ (src/chat is one module: its folders share src/chat/chat.tables.ts).
 */
function moduleOf(file) {
  const parts = path.relative(SRC, file).split(path.sep);
  if (parts[0] === '..') return null;
  if (parts.length < 2) return '.';
  if ((parts[0] === 'console' || parts[0] === 'runtime') && parts.length > 2) return `${parts[0]}/${parts[1]}`;
  return parts[0];
}

/** A module's store and tables are its own: others go through its service (db/schema.ts composes the table types). */
const ownTablesOnly = {
  meta: { type: 'problem', schema: [], messages: { foreign: '{{target}} belongs to module "{{owner}}": call its service instead of reading its store or tables' } },
  create(context) {
    const file = context.filename;
    const mine = moduleOf(file);
    if (mine === null) return {};
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !/\.(store|tables)\.ts$/.test(spec) || !spec.startsWith('.')) return;
      const target = path.resolve(path.dirname(file), spec);
      const owner = moduleOf(target);
      if (owner !== null && owner !== mine) context.report({ node, messageId: 'foreign', data: { target: path.relative(SRC, target), owner } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'data/**', 'web/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', Buffer: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly', fetch: 'readonly', AbortController: 'readonly', TextEncoder: 'readonly', TextDecoder: 'readonly', structuredClone: 'readonly', performance: 'readonly', setImmediate: 'readonly', queueMicrotask: 'readonly', AbortSignal: 'readonly', Blob: 'readonly', Response: 'readonly', Request: 'readonly', Headers: 'readonly', crypto: 'readonly', document: 'readonly', window: 'readonly', localStorage: 'readonly', navigator: 'readonly', location: 'readonly', FormData: 'readonly', URLSearchParams: 'readonly', ReadableStream: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
      'no-console': 'error',
      'no-restricted-syntax': ['error', { selector: "MemberExpression[object.name='process'][property.name='env']", message: 'read configuration in src/config.ts only' }],
    },
  },
  { files: ['src/**/*.ts'], ignores: ['src/db/schema.ts', '**/*.test.ts', '**/*.testkit.ts'], plugins: { crewhouse: { rules: { 'own-tables-only': ownTablesOnly } } }, rules: { 'crewhouse/own-tables-only': 'error' } },
  // The agent runtime is its own program inside a sandbox: its entry point reads the sandbox's environment.
  { files: ['src/config.ts', 'src/main.ts', 'src/agent/main.ts', 'test/**', 'bench/**', 'scripts/**', '**/*.test.ts', 'web/**'], rules: { 'no-restricted-syntax': 'off', 'no-console': 'off' } },
);
