/**
 * How big a key's lease should be: the key's observed local demand over the lease
 * horizon, capped (by `maxLeaseTokens` and `maxLeaseShare x capacity`), and at least one
 * unit (or the cap, when the cap is below one).
 *
 * Demand is counted in fixed windows of `windowMs`: `rate` is the last full window's units
 * per ms (or the current window's, when it is busier), so a key that cools down gets
 * smaller leases within one window, and a cold key asks for one unit at a time.
 */
export class RateWindow {
  /** Units asked for in the current window. */
  private units = 0;
  /** Start of the current window (ms). */
  private startMs: number;
  /** Units per ms of the last full window. */
  private lastRate = 0;

  constructor(
    nowMs: number,
    private readonly windowMs: number,
  ) {
    this.startMs = nowMs;
  }

  /** Records `cost` units asked for at `nowMs`. */
  observe(cost: number, nowMs: number): void {
    if (nowMs - this.startMs >= this.windowMs) this.roll(nowMs);
    this.units += cost;
  }

  /** Units per ms at `nowMs`. */
  rate(nowMs: number): number {
    if (nowMs - this.startMs >= this.windowMs) this.roll(nowMs);
    const elapsed = nowMs - this.startMs;
    // A partial window counts as a whole one: one request just after a roll is not a burst.
    const current = elapsed > 0 ? this.units / this.windowMs : 0;
    return current > this.lastRate ? current : this.lastRate;
  }

  private roll(nowMs: number): void {
    const elapsed = nowMs - this.startMs;
    // A window followed by silence counts as that window's units over the whole gap.
    this.lastRate = elapsed > 0 ? this.units / elapsed : 0;
    this.units = 0;
    this.startMs = nowMs;
  }
}

/** The sizing policy: target lease and refill threshold. */
export class LeaseSizing {
  constructor(
    /** Most tokens one lease holds. */
    readonly cap: number,
    /** Time a lease should last at the observed rate (ms). */
    readonly horizonMs: number,
    /** Refill below this share of the target. */
    readonly lowWaterShare: number,
  ) {}

  /** The target lease for a demand of `ratePerMs` units per ms. */
  target(ratePerMs: number): number {
    const wanted = ratePerMs * this.horizonMs;
    const floor = this.cap < 1 ? this.cap : 1;
    if (!(wanted > floor)) return floor;
    return wanted < this.cap ? wanted : this.cap;
  }

  /**
   * The refill threshold for a target: `lowWaterShare` of it, or more when the demand
   * during two lease delays (`delayMs`, batch window plus round trip, as measured) is
   * larger, so that the refill lands before the lease runs out; at most 3/4 of the target.
   */
  lowWater(target: number, ratePerMs: number, delayMs: number): number {
    const share = target * this.lowWaterShare;
    const inFlight = ratePerMs * delayMs * 2;
    const most = target * 0.75;
    const wanted = inFlight > share ? inFlight : share;
    return wanted < most ? wanted : most;
  }
}
