/**
 * The timing groups of `npm run bench`, by id. Each group runs in its own child process
 * (bench/support/worker.ts), so the JIT sees one limiter implementation per process.
 * @module
 */
import {
  ALGORITHMS,
  algorithmTasks,
  allOfTasks,
  coarseClockTasks,
  floorTasks,
  mixedAllOfTasks,
  policyFunctionTasks,
} from "../algorithms.bench.js";
import { PEER_GROUPS, peerTasks } from "../peers.js";
import { middlewareTasks } from "./http-middleware.js";
import type { TimedTask } from "./measure.js";

/** A group: the section it belongs to and its tasks (built inside the child). */
export interface Group {
  readonly id: string;
  readonly section: "floors" | "algorithms" | "peers" | "http";
  tasks(quick: boolean): TimedTask[];
}

/** The HTTP middleware diagnostic, run with the HTTP section (not with sections 1-3). */
export const MIDDLEWARE_GROUP: Group = {
  id: "http.middleware",
  section: "http",
  tasks: middlewareTasks,
};

/** Every timing group of sections 1-3, in run order. */
export const GROUPS: readonly Group[] = [
  { id: "floors", section: "floors", tasks: floorTasks },
  ...ALGORITHMS.map(
    (a): Group => ({
      id: a.name,
      section: "algorithms",
      tasks: (quick) => algorithmTasks(a.name, quick),
    }),
  ),
  { id: "TokenBucket.coarse", section: "algorithms", tasks: coarseClockTasks },
  { id: "TokenBucket.fn", section: "algorithms", tasks: policyFunctionTasks },
  { id: "TokenBucket.allOf", section: "algorithms", tasks: allOfTasks },
  { id: "allOf.TokenBucket+FixedWindow", section: "algorithms", tasks: mixedAllOfTasks },
  ...PEER_GROUPS.map(
    (id): Group => ({ id: `peer.${id}`, section: "peers", tasks: (quick) => peerTasks(id, quick) }),
  ),
];

/** The group with this id. @throws {Error} If there is none. */
export function group(id: string): Group {
  const found = [...GROUPS, MIDDLEWARE_GROUP].find((g) => g.id === id);
  if (found === undefined) throw new Error(`unknown bench group ${id}`);
  return found;
}
