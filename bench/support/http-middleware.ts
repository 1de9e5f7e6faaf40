/**
 * The CPU cost of `tollgate/http`'s node middleware per request, without sockets or a load
 * generator: a diagnostic beside the autocannon rows, whose noise on a small machine is
 * larger than the middleware itself. Each timed call builds a fresh `ServerResponse` (as
 * node:http does per request) and runs the middleware; the baseline row does the same
 * with a handler that only calls `next()`, so the difference is the middleware's cost.
 * @module
 */
import { IncomingMessage, ServerResponse } from "node:http";
import { Socket } from "node:net";
import { TokenBucket } from "../../src/algorithms/token-bucket.js";
import { rateLimit } from "../../src/http/index.js";
import { KeyedLimiter } from "../../src/keyed/keyed-limiter.js";
import type { TimedTask } from "./measure.js";

/** Calls per timed batch: a `ServerResponse` costs about a microsecond. */
const HTTP_BATCH = 100;

/** A request from `10.0.0.1` for `GET /`. */
function request(): IncomingMessage {
  const socket = new Socket();
  Object.defineProperty(socket, "remoteAddress", { value: "10.0.0.1" });
  const req = new IncomingMessage(socket);
  req.method = "GET";
  req.url = "/";
  return req;
}

type Handler = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

function task(id: string, name: string, handler: () => Handler): TimedTask {
  return {
    id,
    name,
    batch: HTTP_BATCH,
    prepare: () => {
      const req = request();
      const run = handler();
      let passed = 0;
      let total = 0;
      const next = () => {
        passed++;
      };
      return {
        run: () => {
          for (let i = 0; i < HTTP_BATCH; i++) run(req, new ServerResponse(req), next);
          total += HTTP_BATCH;
        },
        check: () => (passed === total ? undefined : `${total - passed} of ${total} not passed on`),
      };
    },
  };
}

/** Baseline and middleware rows (one client key, every request allowed). */
export function middlewareTasks(): TimedTask[] {
  return [
    task(
      "http.baseline",
      "new ServerResponse + next() (baseline)",
      () => (_req, _res, next) => next(),
    ),
    task("http.middleware", "new ServerResponse + rateLimit(KeyedLimiter(TokenBucket))", () =>
      rateLimit({
        limiter: new KeyedLimiter(new TokenBucket({ capacity: 1e12, refillPerSecond: 1e-3 })),
        windowSeconds: 60,
      }),
    ),
  ];
}
