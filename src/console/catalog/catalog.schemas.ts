import { Type } from 'typebox';

export const ToolEntry = Type.Object({
  name: Type.String(),
  description: Type.String(),
  risky: Type.Boolean({ description: 'an agent with confirmation_policy confirm_risky asks a person before each call' }),
  parameters: Type.Record(Type.String(), Type.Unknown(), { description: 'JSON schema of the arguments' }),
});

export const ModelEntry = Type.Object({
  alias: Type.String({ description: 'what agents and templates name' }),
  model: Type.String({ description: 'the upstream model it points at' }),
  api: Type.String({ description: 'wire format of the upstream: openai or anthropic' }),
  upstream_host: Type.String({ description: 'host (and port) of the upstream endpoint; never credentials' }),
  local: Type.Boolean({ description: 'the upstream is on this machine or a private network' }),
  context_window: Type.Integer(),
  max_output_tokens: Type.Integer(),
  input_usd_per_mtok: Type.Number(),
  output_usd_per_mtok: Type.Number(),
  description: Type.String(),
});
