/**
 * Reading the agent runtime's control channel (its stdout: one JSON event a line) without
 * trusting it. Everything on it comes from inside the sandbox, where the agent's tools can
 * write into the runtime's stdout too, so every line is bounded before it is held in memory
 * (a line is collected as Buffers and refused as soon as it passes the bound, never turned into
 * one huge string), and whatever is not a JSON event ends the turn. The bound fits every event
 * the runtime itself writes: tool outputs are clipped to 64 Ki characters each (stdout and
 * stderr of a shell call), a task is at most 32,000 characters, and a model reply is bounded by
 * the model's output tokens; JSON escaping at most multiplies a character by six.
 */
import type { Readable } from 'node:stream';
import { RunFailure } from './failures.ts';

/** The largest line (event) the engine reads from an agent runtime, newline excluded. */
export const MAX_EVENT_BYTES = 8 * 1024 * 1024;

/** How the bound reads in a message for people. */
export function sizeInWords(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} bytes`;
}

/**
 * The control channel carried something that is not the protocol (a line over the bound, bytes
 * that are not a JSON event): the turn is stopped and the run fails with this message, which is
 * written for people.
 */
export class ChannelViolation extends RunFailure {
  constructor(message: string) {
    super(message);
    this.name = 'ChannelViolation';
  }
}

/**
 * Splits bytes into lines of at most `maxBytes` (the newline and a trailing CR not counted).
 * Holds the unfinished line as the chunks it came in, so memory stays within the bound plus one
 * chunk, and throws ChannelViolation the moment a line cannot fit.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private held = 0;
  private readonly maxBytes: number;

  constructor(maxBytes: number = MAX_EVENT_BYTES) {
    this.maxBytes = maxBytes;
  }

  push(chunk: Buffer): Buffer[] {
    const lines: Buffer[] = [];
    let from = 0;
    for (;;) {
      const nl = chunk.indexOf(10, from);
      if (nl < 0) break;
      this.hold(chunk.subarray(from, nl), true);
      lines.push(this.take());
      from = nl + 1;
    }
    if (from < chunk.length) this.hold(chunk.subarray(from), false);
    return lines;
  }

  /** What is left when the stream ends: a last line without its newline, or null. */
  end(): Buffer | null {
    if (this.held === 0) return null;
    return this.take();
  }

  private hold(part: Buffer, complete: boolean) {
    // A CR before the newline is not part of the line.
    const size = this.held + part.length - (complete && part.length && part[part.length - 1] === 13 ? 1 : 0);
    if (size > this.maxBytes) {
      this.parts = [];
      this.held = 0;
      throw new ChannelViolation(`the agent runtime sent a message larger than ${sizeInWords(this.maxBytes)}; the run was stopped so it cannot harm the service`);
    }
    if (part.length) {
      this.parts.push(part);
      this.held += part.length;
    }
  }

  private take(): Buffer {
    let line = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts, this.held);
    this.parts = [];
    this.held = 0;
    if (line.length && line[line.length - 1] === 13) line = line.subarray(0, line.length - 1);
    return line;
  }
}

export interface LineReader {
  lines: AsyncGenerator<Buffer>;
  /**
   * From now on, a wait for more output longer than `ms` ends the reading as if the stream had
   * ended (the runtime is gone; whatever still holds its stdout is not listened to).
   */
  drain(ms: number): void;
}

/**
 * Reads `stream` as bounded lines, one chunk at a time: the stream is paused while a chunk's
 * lines are handled, so a slow consumer holds back the writer instead of buffering without
 * bound. The reading ends at the stream's end, its close (destroyed, or closed by the other
 * end) or its error (a pipe that broke is the runtime gone, not a fault of the service: what
 * the turn recorded decides), or, after `drain()`, a quiet spell.
 */
export function readLines(stream: Readable, maxBytes: number = MAX_EVENT_BYTES): LineReader {
  const splitter = new LineSplitter(maxBytes);
  const queue: Buffer[] = [];
  let done = false;
  let quietMs: number | null = null;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const onData = (c: Buffer | string) => {
    queue.push(typeof c === 'string' ? Buffer.from(c, 'utf8') : c);
    stream.pause();
    notify();
  };
  const onEnd = () => {
    done = true;
    notify();
  };
  stream.on('data', onData);
  stream.once('end', onEnd);
  stream.once('close', onEnd);
  stream.on('error', onEnd);

  async function* lines(): AsyncGenerator<Buffer> {
    try {
      for (;;) {
        const chunk = queue.shift();
        if (chunk) {
          for (const line of splitter.push(chunk)) yield line;
          if (!queue.length && !done) stream.resume();
          continue;
        }
        if (done) break;
        const waited = new Promise<boolean>((resolve) => {
          wake = () => resolve(true);
          if (quietMs !== null) {
            const t = setTimeout(() => resolve(false), quietMs);
            const prev = wake;
            wake = () => (clearTimeout(t), prev());
          }
        });
        if (!(await waited)) {
          wake = null;
          break;
        }
      }
      const last = splitter.end();
      if (last) yield last;
    } finally {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onEnd);
      // The error listener stays: a stream nobody listens to must never throw into the process.
    }
  }

  return {
    lines: lines(),
    drain(ms: number) {
      if (quietMs !== null) return;
      quietMs = ms;
      // A wait under way starts counting now.
      if (wake) {
        const w = wake;
        const t = setTimeout(() => {
          if (wake !== waiting) return;
          done = true;
          notify();
        }, ms);
        const waiting = () => (clearTimeout(t), w());
        wake = waiting;
      }
    },
  };
}
