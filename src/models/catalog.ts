import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { Value } from 'typebox/value';
import { Type, type Static } from 'typebox';
import { ConfigError } from '../config.ts';

/**
 * A model alias: the name templates and agents use, and the upstream it points at. The model
 * proxy forwards to `base_url` with the credential in the secret `api_key_secret` (none for a
 * local server) and prices each request with the per-million-token prices.
 */
export const ModelAlias = Type.Object(
  {
    alias: Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' }),
    model: Type.String({ minLength: 1, maxLength: 200, description: 'the upstream model name' }),
    api: Type.Union([Type.Literal('openai'), Type.Literal('anthropic')], { description: 'wire format of the upstream' }),
    base_url: Type.String({ minLength: 1, maxLength: 2000 }),
    api_key_secret: Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()], { description: 'name of the secret holding the upstream key' }),
    input_usd_per_mtok: Type.Number({ minimum: 0 }),
    output_usd_per_mtok: Type.Number({ minimum: 0 }),
    context_window: Type.Integer({ minimum: 1 }),
    max_output_tokens: Type.Integer({ minimum: 1 }),
    description: Type.String({ maxLength: 500 }),
  },
  { additionalProperties: false },
);
export type ModelAlias = Static<typeof ModelAlias>;

/** The aliases a deployment has when SERVICE_MODELS is not set. */
export const DEFAULT_MODELS: ModelAlias[] = [
  {
    alias: 'smart',
    model: 'claude-sonnet-4-5',
    api: 'anthropic',
    base_url: 'https://api.anthropic.com',
    api_key_secret: 'models/anthropic',
    input_usd_per_mtok: 3,
    output_usd_per_mtok: 15,
    context_window: 200_000,
    max_output_tokens: 64_000,
    description: 'strong coding model for leads and reviewers',
  },
  {
    alias: 'fast',
    model: 'gpt-4.1-mini',
    api: 'openai',
    base_url: 'https://api.openai.com/v1',
    api_key_secret: 'models/openai',
    input_usd_per_mtok: 0.4,
    output_usd_per_mtok: 1.6,
    context_window: 1_000_000,
    max_output_tokens: 32_768,
    description: 'quick and cheap, for routine roles',
  },
  {
    alias: 'local',
    model: 'llama3.1',
    api: 'openai',
    base_url: 'http://127.0.0.1:11434/v1',
    api_key_secret: null,
    input_usd_per_mtok: 0,
    output_usd_per_mtok: 0,
    context_window: 128_000,
    max_output_tokens: 8_192,
    description: 'a local OpenAI-compatible server (Ollama, vLLM, llama.cpp)',
  },
];

export interface ModelCatalog {
  aliases: ModelAlias[];
  get(alias: string): ModelAlias | undefined;
}

/**
 * Reads SERVICE_MODELS: a path to a JSON or YAML file, or inline JSON, holding an array of
 * aliases (or `{models: [...]}`). Unset: the default set.
 */
export function loadModelCatalog(source: string | null): ModelCatalog {
  let aliases = DEFAULT_MODELS;
  if (source) {
    let text = source.trim();
    if (!text.startsWith('[') && !text.startsWith('{')) {
      try {
        text = fs.readFileSync(source, 'utf8');
      } catch (err) {
        throw new ConfigError(`SERVICE_MODELS: cannot read ${source}: ${(err as Error).message}`);
      }
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new ConfigError(`SERVICE_MODELS is not JSON or YAML: ${(err as Error).message}`);
    }
    const list = Array.isArray(doc) ? doc : (doc as { models?: unknown })?.models;
    if (!Array.isArray(list) || list.length === 0) throw new ConfigError('SERVICE_MODELS must hold a non-empty list of model aliases');
    aliases = list.map((entry, i) => {
      const withDefaults = { api: 'openai', api_key_secret: null, input_usd_per_mtok: 0, output_usd_per_mtok: 0, context_window: 128_000, max_output_tokens: 8_192, description: '', ...(entry as object) };
      if (!Value.Check(ModelAlias, withDefaults)) {
        const first = [...Value.Errors(ModelAlias, withDefaults)][0];
        throw new ConfigError(`SERVICE_MODELS entry ${i}: ${first ? `${first.instancePath || '(entry)'} ${first.message}` : 'invalid'}`);
      }
      return withDefaults as ModelAlias;
    });
    const seen = new Set<string>();
    for (const a of aliases) {
      if (seen.has(a.alias)) throw new ConfigError(`SERVICE_MODELS names alias "${a.alias}" twice`);
      seen.add(a.alias);
    }
  }
  const byAlias = new Map(aliases.map((a) => [a.alias, a]));
  return { aliases, get: (alias) => byAlias.get(alias) };
}
