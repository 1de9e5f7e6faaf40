/** The store errors (src/store/errors.ts, shared by every store) under `tollgate/redis`. @module */
export { RateLimitStoreError, StoreTimeoutError, StoreUnavailableError } from "../store/errors.js";
