import path from 'node:path';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { ownTablesOnly } from './eslint-rules/own-tables-only.js';
import { layers } from './eslint-rules/layers.js';

const SRC = path.join(import.meta.dirname, 'src');

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
  { files: ['src/**/*.ts'], ignores: ['src/db/schema.ts', 'src/db/migrations/**', '**/*.test.ts', '**/*.testkit.ts'], plugins: { crewhouse: { rules: { 'own-tables-only': ownTablesOnly(SRC), layers: layers(SRC) } } }, rules: { 'crewhouse/own-tables-only': 'error', 'crewhouse/layers': 'error' } },
  // The agent runtime is its own program inside a sandbox: its entry point reads the sandbox's environment.
  { files: ['src/config.ts', 'src/main.ts', 'src/agent/main.ts', 'test/**', 'bench/**', 'scripts/**', '**/*.test.ts', 'web/**'], rules: { 'no-restricted-syntax': 'off', 'no-console': 'off' } },
);
