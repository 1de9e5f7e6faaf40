/**
 * Runs a TypeScript bench file in a fresh Node process (through tsx) and collects its
 * result over IPC. The child's stdout and stderr go to this process's stderr, so the
 * Markdown report on stdout stays clean.
 * @module
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";

/** What a child sends: a task starting, or its final result. */
export type WorkerMessage =
  | { readonly type: "task"; readonly index: number; readonly total: number; readonly name: string }
  | { readonly type: "result"; readonly payload: unknown };

/** Options of {@link runChild}. */
export interface ChildOptions {
  /** Extra Node flags, for example `--expose-gc`. */
  readonly nodeFlags?: readonly string[];
  /** Called for every `task` message. */
  readonly onTask?: (message: Extract<WorkerMessage, { type: "task" }>) => void;
}

/**
 * Starts `file` (a path relative to bench/) with `args` and resolves with the payload of
 * its `result` message.
 * @throws {Error} If the child exits without a result or with a non-zero status; the
 *   message holds the tail of its stderr.
 */
export function runChild(
  file: string,
  args: readonly string[],
  options: ChildOptions = {},
): Promise<unknown> {
  const path = fileURLToPath(new URL(`../${file}`, import.meta.url));
  return new Promise((resolve, reject) => {
    const child = fork(path, [...args], {
      execArgv: [...(options.nodeFlags ?? []), "--import", "tsx"],
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    });
    let stderrTail = "";
    child.stdout?.on("data", (chunk: Buffer) => process.stderr.write(chunk));
    child.stderr?.on("data", (chunk: Buffer) => {
      stderrTail = (stderrTail + chunk.toString()).slice(-4000);
    });
    let result: { payload: unknown } | undefined;
    child.on("message", (message: WorkerMessage) => {
      if (message.type === "task") options.onTask?.(message);
      else result = { payload: message.payload };
    });
    child.on("error", reject);
    child.on("exit", (code, signal) => {
      if (code === 0 && result !== undefined) resolve(result.payload);
      else {
        const how = signal === null ? `status ${code}` : `signal ${signal}`;
        reject(new Error(`${file} ${args.join(" ")} exited with ${how}\n${stderrTail.trim()}`));
      }
    });
  });
}
