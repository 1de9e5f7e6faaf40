export { TokenBucket, type TokenBucketOptions } from "./algorithms/token-bucket.js";
export { RateLimitError } from "./errors.js";
export {
  type Clock,
  type Decision,
  type Limiter,
  type Reservation,
  type ReserveOptions,
  systemClock,
  type WaitOptions,
} from "./limiter.js";
