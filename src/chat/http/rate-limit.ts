export interface RateRule {
  calls: number;
  seconds: number;
}

export interface RateDecision {
  limited: boolean;
  limit: number;
  remaining: number;
  /** Seconds until the oldest call in the window leaves it. */
  secondsToFreedom: number;
}

/**
 * Zulip's per-user API limit: a sliding window holding the times of the last `calls`
 * requests; a request is refused while `calls` of them fall within `seconds`. Kept in this
 * process's memory (as Zulip's in-process backend does), so each chat process counts its own.
 */
export class RateLimiter {
  private readonly rule: RateRule;
  private readonly windows = new Map<number, number[]>();
  private sweeps = 0;

  constructor(rule: RateRule) {
    this.rule = rule;
  }

  hit(key: number, now = Date.now()): RateDecision {
    const windowMs = this.rule.seconds * 1000;
    const list = (this.windows.get(key) ?? []).filter((t) => t > now - windowMs);
    let limited = false;
    if (list.length >= this.rule.calls) limited = true;
    else list.push(now);
    this.windows.set(key, list);
    if (++this.sweeps % 10_000 === 0) this.sweep(now);
    const oldest = list[0] ?? now;
    const secondsToFreedom = limited ? Math.max(0, (oldest + windowMs - now) / 1000) : list.length ? (oldest + windowMs - now) / 1000 : 0;
    return { limited, limit: this.rule.calls, remaining: Math.max(0, this.rule.calls - list.length), secondsToFreedom: Math.round(secondsToFreedom * 1000) / 1000 };
  }

  private sweep(now: number) {
    const windowMs = this.rule.seconds * 1000;
    for (const [k, list] of this.windows) if (!list.length || list[list.length - 1] <= now - windowMs) this.windows.delete(k);
  }
}
