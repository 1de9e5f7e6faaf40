/**
 * The store errors, kept under their `tollgate/redis` path: the classes live in
 * src/store/errors.ts, shared by every store.
 * @module
 */
export { RateLimitStoreError, StoreTimeoutError, StoreUnavailableError } from "../store/errors.js";
