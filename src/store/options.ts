import {
  checkClock,
  checkInteger,
  checkNumber,
  checkOptionNames,
  checkOptions,
  describe,
  hasMethods,
  mustBe,
} from "../core/errors.js";
import { systemClock } from "../core/limiter.js";
import type { CircuitSettings } from "./circuit.js";
import type {
  FailurePolicy,
  FallbackLimiter,
  StoreFailureEvent,
  StoreRecoveryEvent,
} from "./policy.js";

/** The circuit breaker's options (the `circuit` option of a store-backed limiter). */
export interface CircuitOptions {
  /** Consecutive failures (errors or timeouts) of a node that open its circuit, an integer from 1 to 2^31 - 1. @default 5 */
  readonly failuresToOpen?: number | undefined;
  /**
   * How long an open circuit answers every call by the failure policy before one probe
   * call goes out, in milliseconds (>= 0). @default 1000
   */
  readonly coolDownMs?: number | undefined;
  /**
   * Most calls in flight per circuit, an integer from 1 to 2^31 - 1: a call beyond it is
   * answered by the failure policy at once. A command that timed out stays in flight until
   * the store or the client settles it, so this bounds the client's queue during a stall.
   * @default 1000
   */
  readonly maxPendingCalls?: number | undefined;
  /** The circuit's monotonic clock in milliseconds, for tests. @default performance.now */
  readonly clock?: (() => number) | undefined;
}

/** The options every store-backed limiter takes besides its store's and its algorithm's. */
export interface StoreLimiterOptions {
  /**
   * Longest wait for the store per call, in milliseconds (> 0, at most 2^31 - 1); then
   * the call counts as a failure and the policy answers it. @default 1000
   */
  readonly timeoutMs?: number | undefined;
  /** What to do when the store cannot answer; see {@link FailurePolicy}. @default 'local' */
  readonly failure?: FailurePolicy | undefined;
  /** Called once when a circuit opens (not for every failed call), before the policy answers. */
  readonly onError?: ((event: StoreFailureEvent) => void) | undefined;
  /** Called once when an open circuit closes again. */
  readonly onRecover?: ((event: StoreRecoveryEvent) => void) | undefined;
  /** The circuit breaker; see {@link CircuitOptions}. */
  readonly circuit?: CircuitOptions | undefined;
}

/** The option names of {@link StoreLimiterOptions}. */
export const STORE_OPTIONS = [
  "timeoutMs",
  "failure",
  "onError",
  "onRecover",
  "circuit",
] as const satisfies readonly (keyof StoreLimiterOptions)[];

const CIRCUIT_OPTIONS = [
  "failuresToOpen",
  "coolDownMs",
  "maxPendingCalls",
  "clock",
] as const satisfies readonly (keyof CircuitOptions)[];

/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const MAX_COUNT = 2 ** 31 - 1;

/** The validated {@link StoreLimiterOptions}. */
export interface StoreCommon {
  readonly timeoutMs: number;
  readonly failure: FailurePolicy;
  readonly onError: ((event: StoreFailureEvent) => void) | undefined;
  readonly onRecover: ((event: StoreRecoveryEvent) => void) | undefined;
  readonly circuit: CircuitSettings;
}

/**
 * Validates the store options, in the order of {@link STORE_OPTIONS}.
 * @throws {TypeError} For a wrong type or an unknown circuit option; {RangeError} for a
 *   number out of range or an unknown policy name.
 */
export function checkStoreOptions(where: string, o: StoreLimiterOptions): StoreCommon {
  const timeoutMs = checkNumber(where, "timeoutMs", o.timeoutMs, 0, false, 1000);
  if (timeoutMs > MAX_TIMER_MS)
    throw mustBe(where, "timeoutMs", `at most ${MAX_TIMER_MS}`, timeoutMs);
  const failure = checkFailure(where, o.failure);
  const onError = checkHook<(event: StoreFailureEvent) => void>(where, "onError", o.onError);
  const onRecover = checkHook<(event: StoreRecoveryEvent) => void>(where, "onRecover", o.onRecover);
  return { timeoutMs, failure, onError, onRecover, circuit: checkCircuit(where, o.circuit) };
}

function checkCircuit(where: string, options: CircuitOptions | undefined): CircuitSettings {
  const at = `${where}: circuit`;
  const o = options === undefined ? {} : checkOptions<CircuitOptions>(at, options);
  checkOptionNames(at, o, CIRCUIT_OPTIONS);
  return {
    failuresToOpen: checkInteger(at, "failuresToOpen", o.failuresToOpen, 1, MAX_COUNT, 5),
    coolDownMs: checkNumber(at, "coolDownMs", o.coolDownMs, 0, true, 1000),
    maxPendingCalls: checkInteger(at, "maxPendingCalls", o.maxPendingCalls, 1, MAX_COUNT, 1000),
    clock: checkClock(at, o.clock, systemClock),
  };
}

/**
 * Checks the `failure` option: undefined means `'local'`.
 * @throws {RangeError} For another string; {TypeError} for anything else.
 */
export function checkFailure(where: string, failure: unknown): FailurePolicy {
  if (failure === undefined) return "local";
  if (failure === "local" || failure === "open" || failure === "closed" || failure === "throw") {
    return failure;
  }
  if (hasMethods(failure, "consume", "peek", "reset")) return failure as FallbackLimiter;
  const message = `${where}: failure must be 'local', 'open', 'closed', 'throw' or a fallback limiter (consume, peek, reset), got ${describe(failure)}`;
  throw typeof failure === "string" ? new RangeError(message) : new TypeError(message);
}

/** Checks an optional hook. @throws {TypeError} for a non-function. */
export function checkHook<T>(where: string, name: string, hook: unknown): T | undefined {
  if (hook === undefined || typeof hook === "function") return hook as T | undefined;
  throw mustBe(where, name, "a function", hook, TypeError);
}
