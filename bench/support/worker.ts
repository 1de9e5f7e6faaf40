/**
 * Child-process entry of one timing group: `node --import tsx bench/support/worker.ts
 * <group> [--quick]`. Reports each task as it starts and then all timings over IPC; exits
 * with a non-zero status (and the error on stderr) if any task fails.
 * @module
 */

import type { WorkerMessage } from "./child.js";
import { group } from "./groups.js";
import { budget, timeTasks } from "./measure.js";

const [id] = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const quick = process.argv.includes("--quick");

function send(message: WorkerMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    if (process.send === undefined) {
      reject(new Error("worker.ts must be started with an IPC channel (child.ts)"));
      return;
    }
    process.send(message, (error: Error | null) => (error ? reject(error) : resolve()));
  });
}

try {
  const tasks = group(id ?? "").tasks(quick);
  const timings = await timeTasks(tasks, budget(quick), (index, task) => {
    void send({ type: "task", index, total: tasks.length, name: task.name });
  });
  await send({ type: "result", payload: timings });
  process.exit(0);
} catch (error) {
  console.error(error);
  process.exit(1);
}
