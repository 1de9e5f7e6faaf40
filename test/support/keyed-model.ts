import type { Decision, Limiter } from "../../src/core/limiter.js";

/**
 * The reference model of a keyed registry: a plain `Map<string, Limiter>` that makes a
 * limiter the first time a key is consumed and never forgets one. `KeyedLimiter` must
 * decide exactly as this model does, whatever it evicts while idle.
 */
export class MapOfLimiters {
  readonly map = new Map<string, Limiter>();

  constructor(private readonly make: (key: string) => Limiter) {}

  private get(key: string): Limiter {
    let limiter = this.map.get(key);
    if (limiter === undefined) {
      limiter = this.make(key);
      this.map.set(key, limiter);
    }
    return limiter;
  }

  allow(key: string, cost: number): boolean {
    return this.get(key).allow(cost);
  }

  consume(key: string, cost: number): Decision {
    return this.get(key).consume(cost);
  }

  peek(key: string, cost: number): Decision {
    return this.get(key).peek(cost);
  }
}
