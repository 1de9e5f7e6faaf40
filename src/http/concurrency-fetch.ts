/**
 * `withConcurrencyLimit`: the fetch-handler wrapper (Bun, Deno, Workers, Hono's
 * `app.fetch`) that holds a permit for the duration of each request.
 * @module
 */
import type { Permit } from "../concurrency/permit.js";
import { describe } from "../core/errors.js";
import { timerDelay } from "../core/wait.js";
import { type CommonConcurrencyOptions, checkConcurrencyOptions, permitOf } from "./concurrency.js";
import { answer, type FetchHandler, fetchSource, withHeaders } from "./fetch.js";
import { headerRecord, type Outcome, Pipeline } from "./pipeline.js";

/** Options of {@link withConcurrencyLimit}. */
export interface FetchConcurrencyOptions<Args extends unknown[] = unknown[]>
  extends CommonConcurrencyOptions {
  /** The key of a `KeyedConcurrencyLimiter`. @default (request, clientKey) => clientKey */
  readonly key?: ((request: Request, clientKey: string) => string) | undefined;
  /** Return true to pass a request to the handler without a permit (no headers). */
  readonly skip?: ((request: Request) => boolean) | undefined;
  /** The peer address of the connection, as for `withRateLimit`. */
  readonly remoteAddress?: ((request: Request, ...args: Args) => string | undefined) | undefined;
}

const WHERE = "withConcurrencyLimit";
const OWN_OPTIONS = ["key", "skip", "remoteAddress", "maxHoldMs"] as const;

/**
 * `body` passed through, calling `done` once it ends, errors or is cancelled (the client
 * went away), so a streamed response holds its permit until its last byte. @internal
 */
export function releasingBody(
  body: ReadableStream<Uint8Array>,
  done: () => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const chunk = await reader.read();
        if (chunk.done) {
          done();
          controller.close();
        } else controller.enqueue(chunk.value);
      } catch (error) {
        done();
        controller.error(error);
      }
    },
    cancel(reason) {
      done();
      return reader.cancel(reason);
    },
  });
}

/**
 * Wraps a fetch handler so that at most `limiter.limit` handlers (per key, for a
 * `KeyedConcurrencyLimiter`) run at once. A permit is held while the handler runs (an abort of
 * `request.signal` meanwhile shortens that to `maxHoldMs`), then until the response body ends,
 * is cancelled or `request.signal` aborts, released once; one past the limit gets 429 with
 * `qu="concurrent-requests"`. See docs/http.md#concurrency-limits.
 * @throws {TypeError} For a handler that is not a function, a bad limiter, an unknown option.
 */
export function withConcurrencyLimit<
  Args extends unknown[],
  Result extends Response | undefined = Response,
>(
  handler: FetchHandler<Args, Result>,
  options: FetchConcurrencyOptions<Args>,
): (request: Request, ...args: Args) => Promise<Result | Response> {
  if (typeof handler !== "function") {
    throw new TypeError(`${WHERE}: handler must be a function, got ${describe(handler)}`);
  }
  const { config, hooks, remoteAddress, maxHoldMs } = checkConcurrencyOptions(
    WHERE,
    options,
    OWN_OPTIONS,
  );
  const pipeline = new Pipeline(WHERE, config, hooks, fetchSource(remoteAddress));
  return async (request, ...args) => {
    const outcome = pipeline.run(request, args) as Outcome; // the consumer is synchronous
    switch (outcome.kind) {
      case "skip":
        return handler(request, ...args);
      case "pass": {
        const permit = permitOf(outcome.decision);
        if (permit === undefined) return handler(request, ...args);
        const run = () => handler(request, ...args);
        return held(permit, request, run, headerRecord(config, outcome), maxHoldMs);
      }
      default: // answered here: "limited", "unavailable", "error"
        return answer(pipeline, outcome, undefined, request);
    }
  };
}

/**
 * Runs the handler holding `permit`, then hands the permit to the response body. An abort of
 * `request.signal` releases it only once the handler has settled (a client that goes away does
 * not free a permit while its work still runs), or `maxHoldMs` after the abort, if sooner.
 */
async function held<Result extends Response | undefined>(
  permit: Permit,
  request: Request,
  run: () => Result | Promise<Result>,
  headers: Record<string, string>,
  maxHoldMs: number,
): Promise<Result | Response> {
  const signal = request.signal as AbortSignal | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = () => {
    timer = setTimeout(() => permit.release(), timerDelay(maxHoldMs));
    if (typeof timer === "object" && typeof timer.unref === "function") timer.unref();
  };
  if (signal?.aborted) limit();
  else signal?.addEventListener("abort", limit, { once: true });
  let response: Result;
  try {
    response = await run();
  } catch (error) {
    permit.release();
    throw error;
  } finally {
    signal?.removeEventListener("abort", limit);
    if (timer !== undefined) clearTimeout(timer);
  }
  if (response === undefined || response === null || response.body === null || signal?.aborted) {
    permit.release();
    return withHeaders(response, headers);
  }
  const release = () => {
    permit.release();
    signal?.removeEventListener("abort", release);
  };
  let streamed: Response;
  try {
    streamed = new Response(releasingBody(response.body, release), response);
  } catch {
    release(); // a response that cannot be copied (an upgrade): hold nothing past the handler
    return withHeaders(response, headers);
  }
  signal?.addEventListener("abort", release, { once: true });
  return withHeaders(streamed, headers);
}
