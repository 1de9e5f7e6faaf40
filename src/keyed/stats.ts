/** Counters of a {@link KeyedLimiter}, since it was created (`clear()` keeps them). */
export interface KeyedLimiterStats {
  /** Keys whose state was created (a key dropped and used again counts again). */
  readonly created: number;
  /** Keys dropped because their state was fresh again: lossless, no decision changed. */
  readonly evictedIdle: number;
  /**
   * Keys pushed out while still in use (`whenFull: "evict"`), because `maxKeys` or `maxBytes`
   * was reached and none of the keys looked at was idle: the one idle soonest went, leaving a
   * trace, so its next request is decided no fresher than had it been kept
   * (docs/keyed.md#the-trace-table). Always 0 on the generic path, which refuses instead.
   */
  readonly evictedLossy: number;
  /** Slots allocated in the fast path's state slab (it never shrinks); 0 on the generic path. */
  readonly slots: number;
  /**
   * Accounted bytes now: key strings, slots, logs and the trace table on the fast path;
   * key strings and an estimate per limiter on the generic path. Never above `maxBytes`.
   */
  readonly bytes: number;
  /** Requests of new keys refused because the registry was full and could not make room. */
  readonly refused: number;
  /**
   * New keys that started from a trace entry (a key in use was dropped at the bound, and
   * this key's entry says it is busy until later): conservatively, never fresher.
   */
  readonly restored: number;
  /** Keys kept now per plan, by name, on a registry built from plans (`{ plans, plan }`) only. */
  readonly plans?: Readonly<Record<string, number>>;
}

/** Calls between two incremental sweep steps. */
export const SWEEP_EVERY = 64;
/** Entries one incremental sweep step looks at. */
export const SWEEP_CHUNK = 16;
/**
 * Keys the slab looks at, when full, for idle ones or else the one to push out: 8 (32 cost
 * 40% more per new key at the bound, measured, for a victim only slightly better chosen).
 */
export const EVICT_SCAN = 8;

/**
 * The counters of {@link KeyedLimiterStats} that both paths keep (the slab engine, the
 * generic path's map), since creation. @internal
 */
export abstract class KeyCounters {
  protected created = 0;
  protected evictedIdle = 0;
  protected evictedLossy = 0;
  protected refused = 0;
  protected restored = 0;

  /** The stats of these counters with the path's `slots` and `bytes` now. */
  protected statsWith(slots: number, bytes: number): KeyedLimiterStats {
    const { created, evictedIdle, evictedLossy, refused, restored } = this;
    return { created, evictedIdle, evictedLossy, slots, bytes, refused, restored };
  }
}
