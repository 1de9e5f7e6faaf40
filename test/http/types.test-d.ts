import { expectTypeOf, test } from "vitest";
import type { FailureInfo, FailureKind, KeyedConsumer } from "../../src/http/core.js";
import { withRateLimit } from "../../src/http/fetch.js";
import { rateLimit } from "../../src/http/node.js";

declare const limiter: KeyedConsumer;

test("a handler that always answers gives a wrapper that always answers (Bun.serve's fetch type)", () => {
  const wrapped = withRateLimit((_request: Request) => new Response("ok"), { limiter });
  expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<Response>>();
});

test("a handler that may return undefined (Bun after server.upgrade) keeps undefined", () => {
  const wrapped = withRateLimit((_request: Request): Response | undefined => undefined, {
    limiter,
  });
  expectTypeOf(wrapped).returns.toEqualTypeOf<Promise<Response | undefined>>();
});

test("extra runtime arguments pass through in the type", () => {
  const wrapped = withRateLimit(
    async (_request: Request, info: { remoteAddr: { hostname: string } }) =>
      new Response(info.remoteAddr.hostname),
    { limiter },
  );
  expectTypeOf(wrapped).parameters.toEqualTypeOf<[Request, { remoteAddr: { hostname: string } }]>();
});

test("onError is told which kind of failure it was", () => {
  expectTypeOf<FailureInfo["kind"]>().toEqualTypeOf<"outage" | "programming">();
  expectTypeOf<FailureKind>().toEqualTypeOf<FailureInfo["kind"]>();
});

test("an async onLimited is accepted (its rejection is handled as a programming error)", () => {
  expectTypeOf(rateLimit).toBeCallableWith({
    limiter,
    onLimited: async () => {
      throw new Error("bug");
    },
  });
});
