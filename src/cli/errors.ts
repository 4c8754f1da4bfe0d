/** A command used wrongly (unknown flag, missing argument, unreadable file): exit status 2. */
export class CliError extends Error {}

export interface FieldError {
  field: string;
  message: string;
}

/** A problem answer (RFC 9457) of the API: exit status 1, printed as its detail and field errors. */
export class ApiError extends Error {
  readonly status: number;
  readonly problem: { type?: string; title?: string; status?: number; detail?: string; errors?: FieldError[] };
  constructor(status: number, problem: ApiError['problem']) {
    super(problem.detail || problem.title || `the API answered ${status}`);
    this.status = status;
    this.problem = problem;
  }

  /** The lines a person reads: the detail, then one line per bad field. */
  render(): string {
    const lines = [`${this.message} (${this.status})`];
    for (const e of this.problem.errors ?? []) lines.push(`  ${e.field}: ${e.message}`);
    return lines.join('\n');
  }
}
