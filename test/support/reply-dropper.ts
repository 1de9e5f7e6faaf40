import { connect, createServer, type Server, type Socket } from "node:net";

/**
 * A TCP proxy to a Redis on `port` that, once armed, drops the connection as the next reply
 * comes through (both sockets closed, the reply never delivered): the call ran on the
 * server and its client lost the answer. ioredis then sends the call again on its next
 * connection (`autoResendUnfulfilledCommands`, on by default).
 */
export interface ReplyDropper {
  readonly server: Server;
  /** The port to connect the client to. */
  readonly port: number;
  /** Drops the connection at the next reply. */
  arm(): void;
  /** Connections dropped so far. */
  dropped(): number;
}

/** Starts a {@link ReplyDropper} on loopback, in front of the Redis on `port`. */
export function replyDropper(port: number): Promise<ReplyDropper> {
  let armed = false;
  let dropped = 0;
  const server = createServer((client: Socket) => {
    const up = connect(port, "127.0.0.1");
    client.on("data", (d) => up.write(d));
    up.on("data", (d) => {
      if (armed) {
        armed = false;
        dropped++;
        client.destroy();
        up.destroy();
        return;
      }
      client.write(d);
    });
    for (const [a, b] of [
      [client, up],
      [up, client],
    ] as const) {
      a.on("error", () => b.destroy());
      a.on("close", () => b.destroy());
    }
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve({
        server,
        port: typeof address === "object" && address !== null ? address.port : 0,
        arm: () => {
          armed = true;
        },
        dropped: () => dropped,
      });
    }),
  );
}
