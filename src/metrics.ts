/** A small Prometheus text registry: counters and histograms with labels. */
type Labels = Record<string, string>;

const key = (labels: Labels) =>
  Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labels[k].replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',');

export class Counter {
  readonly values = new Map<string, number>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }
  inc(labels: Labels = {}, by = 1) {
    const k = key(labels);
    this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  /** `inc` for one set of labels, their key made once (for a caller that counts the same series often). */
  seriesOf(labels: Labels): (by?: number) => void {
    const k = key(labels);
    return (by = 1) => void this.values.set(k, (this.values.get(k) ?? 0) + by);
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines.join('\n');
  }
}

export class Histogram {
  readonly name: string;
  readonly help: string;
  readonly buckets: number[];
  readonly series = new Map<string, { counts: number[]; sum: number; count: number }>();
  constructor(name: string, help: string, buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]) {
    this.name = name;
    this.help = help;
    this.buckets = buckets;
  }
  observe(labels: Labels, value: number) {
    this.observeKey(key(labels), value);
  }
  /** `observe` for one set of labels, their key made once. */
  seriesOf(labels: Labels): (value: number) => void {
    const k = key(labels);
    return (value) => this.observeKey(k, value);
  }
  private observeKey(k: string, value: number) {
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]) s.counts[i]++;
    s.sum += value;
    s.count++;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const [k, s] of this.series) {
      const sep = k ? `${k},` : '';
      this.buckets.forEach((b, i) => lines.push(`${this.name}_bucket{${sep}le="${b}"} ${s.counts[i]}`));
      lines.push(`${this.name}_bucket{${sep}le="+Inf"} ${s.count}`);
      lines.push(`${this.name}_sum${k ? `{${k}}` : ''} ${s.sum}`);
      lines.push(`${this.name}_count${k ? `{${k}}` : ''} ${s.count}`);
    }
    return lines.join('\n');
  }
}

/** A gauge with labels whose whole set of values is replaced at once (a snapshot read elsewhere). */
export class LabelledGauge {
  values = new Map<string, number>();
  readonly name: string;
  readonly help: string;
  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }
  replace(entries: Array<[Labels, number]>) {
    this.values = new Map(entries.map(([labels, v]) => [key(labels), v]));
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    for (const [k, v] of this.values) lines.push(`${this.name}${k ? `{${k}}` : ''} ${v}`);
    return lines.join('\n');
  }
}

export class Registry {
  readonly metrics: Array<Counter | Histogram | LabelledGauge | { render(): string }> = [];
  counter(name: string, help: string) {
    const c = new Counter(name, help);
    this.metrics.push(c);
    return c;
  }
  histogram(name: string, help: string, buckets?: number[]) {
    const h = new Histogram(name, help, buckets);
    this.metrics.push(h);
    return h;
  }
  labelledGauge(name: string, help: string) {
    const g = new LabelledGauge(name, help);
    this.metrics.push(g);
    return g;
  }
  /** A metric made elsewhere (by a service that counts without a registry of its own), rendered with the rest. */
  add(metric: Counter | Histogram | LabelledGauge) {
    this.metrics.push(metric);
  }
  /** A value read when scraped. */
  gauge(name: string, help: string, read: () => number) {
    this.metrics.push({ render: () => `# HELP ${name} ${help}\n# TYPE ${name} gauge\n${name} ${read()}` });
  }
  render(): string {
    return this.metrics.map((m) => m.render()).join('\n') + '\n';
  }
}
