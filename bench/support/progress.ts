/**
 * Progress of a long run on stderr, one self-overwriting line, only when stderr is a
 * terminal (so logs and CI output stay clean).
 * @module
 */

/** Writes progress lines when enabled; every method is a no-op otherwise. */
export class Progress {
  private readonly enabled: boolean;
  private readonly started = performance.now();

  constructor(enabled = process.stderr.isTTY === true) {
    this.enabled = enabled;
  }

  /** Replaces the current progress line with `text`, prefixed by the elapsed seconds. */
  update(text: string): void {
    if (!this.enabled) return;
    const seconds = ((performance.now() - this.started) / 1000).toFixed(0).padStart(4);
    const columns = process.stderr.columns ?? 100;
    const line = `[${seconds} s] ${text}`.slice(0, Math.max(20, columns - 1));
    process.stderr.write(`\r\x1b[K${line}`);
  }

  /** Clears the progress line. */
  done(): void {
    if (this.enabled) process.stderr.write("\r\x1b[K");
  }
}
