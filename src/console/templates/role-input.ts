/** A stored version's role, as the templates route presents it and as its content keeps it. */
export interface StoredRole {
  agent: string;
  model: string;
  vm: string;
  replicas: { max: number };
  concurrent_runs: number;
  max_iterations: number | null;
  confirmation_policy: string | null;
  memory: Record<string, unknown>;
  max_budget: number | null;
  budget_duration: string | null;
  rpm_limit: number | null;
  tpm_limit: number | null;
  skills: string[];
  mcp_servers: string[];
}

/**
 * A stored role as a version body writes it: what a person chose, without the environment values
 * the version copied when it was made (a new version copies them again). One mapping for a new
 * version made `from_version` and for the repository file an export writes.
 */
export function roleInput(r: StoredRole) {
  return {
    agent: r.agent,
    model: r.model,
    vm: r.vm,
    replicas: { max: r.replicas.max },
    concurrent_runs: r.concurrent_runs,
    max_iterations: r.max_iterations,
    confirmation_policy: r.confirmation_policy,
    memory: r.memory,
    max_budget: r.max_budget,
    budget_duration: r.budget_duration,
    rpm_limit: r.rpm_limit,
    tpm_limit: r.tpm_limit,
    skills: r.skills,
    mcp_servers: r.mcp_servers,
  };
}
