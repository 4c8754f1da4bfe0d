/**
 * An error whose message is written for people: it may become a run's failure reason as is.
 * Anything else that stops a run (a database error, a bug) is logged with the run's id, and the
 * reason a person reads says the log has the details.
 */
export class RunFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RunFailure';
  }
}
