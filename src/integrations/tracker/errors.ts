/**
 * A call to an issue tracker that failed: `message` is one line for people, without secrets;
 * `status` is the tracker's HTTP status (0 when it could not be reached).
 */
export class TrackerError extends Error {
  override name = 'TrackerError';
  readonly status: number;
  constructor(message: string, status: number) {
    super(message);
    this.status = status;
  }
  /** Worth trying again later: unreachable, rate-limited or a server error. */
  get transient(): boolean {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }
}
