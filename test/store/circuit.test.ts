import { describe, expect, test } from "vitest";
import { type Admission, Circuit, type CircuitState } from "../../src/store/circuit.js";

// The circuit's transitions, step by step, on a hand-moved clock.

type Step =
  | { do: "admit"; want: Admission }
  | { do: "fail"; probe?: boolean; opened: boolean }
  | { do: "succeed"; closedAfter: number | undefined }
  | { do: "settle" }
  | { do: "policy" }
  | { do: "wait"; ms: number };

interface Case {
  name: string;
  steps: (Step & { state?: CircuitState; pending?: number })[];
}

const cases: Case[] = [
  {
    name: "opens at the third consecutive failure, probes after the cool-down, closes on an answer",
    steps: [
      { do: "admit", want: "send", pending: 1 },
      { do: "fail", opened: false, state: "closed", pending: 0 },
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "fail", opened: true, state: "open" },
      { do: "admit", want: "circuit-open" },
      { do: "wait", ms: 99 },
      { do: "admit", want: "circuit-open" },
      { do: "wait", ms: 1 },
      { do: "admit", want: "probe", state: "half-open" },
      { do: "admit", want: "circuit-open", state: "half-open" },
      { do: "succeed", closedAfter: 0, state: "closed" },
      { do: "admit", want: "send" },
    ],
  },
  {
    name: "a failed probe re-opens without reporting; the next probe's answer closes",
    steps: [
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "policy" },
      { do: "fail", opened: true, state: "open" },
      { do: "wait", ms: 100 },
      { do: "admit", want: "probe" },
      { do: "policy" },
      { do: "fail", probe: true, opened: false, state: "open" },
      { do: "wait", ms: 50 },
      { do: "admit", want: "circuit-open" },
      { do: "policy" },
      { do: "wait", ms: 50 },
      { do: "admit", want: "probe" },
      { do: "succeed", closedAfter: 3, state: "closed" },
    ],
  },
  {
    name: "an answer between failures resets the count",
    steps: [
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "succeed", closedAfter: undefined },
      { do: "admit", want: "send" },
      { do: "fail", opened: false },
      { do: "admit", want: "send" },
      { do: "fail", opened: false, state: "closed" },
    ],
  },
  {
    name: "the pending cap refuses a call until one settles",
    steps: [
      { do: "admit", want: "send" },
      { do: "admit", want: "send" },
      { do: "admit", want: "pending-cap", pending: 2 },
      { do: "settle", pending: 1 },
      { do: "admit", want: "send", pending: 2 },
    ],
  },
];

describe("Circuit", () => {
  test.each(cases)("$name", ({ steps }) => {
    let now = 1000;
    const circuit = new Circuit("n1", {
      failuresToOpen: 3,
      coolDownMs: 100,
      maxPendingCalls: 2,
      clock: () => now,
    });
    steps.forEach((step, i) => {
      const at = `step ${i}: ${JSON.stringify(step)}`;
      switch (step.do) {
        case "admit":
          expect(circuit.admit(), at).toBe(step.want);
          break;
        case "fail":
          expect(circuit.failed(step.probe ?? false), at).toBe(step.opened);
          circuit.settled();
          break;
        case "succeed":
          expect(circuit.succeeded(), at).toBe(step.closedAfter);
          circuit.settled();
          break;
        case "settle":
          circuit.settled();
          break;
        case "policy":
          circuit.answeredByPolicy();
          break;
        case "wait":
          now += step.ms;
          break;
      }
      if (step.state !== undefined) expect(circuit.state, at).toBe(step.state);
      if (step.pending !== undefined) expect(circuit.pendingCalls, at).toBe(step.pending);
    });
  });

  test("the snapshot shows the state, counts and when it opened", () => {
    let now = 5;
    const circuit = new Circuit(undefined, {
      failuresToOpen: 1,
      coolDownMs: 10,
      maxPendingCalls: 5,
      clock: () => now,
    });
    expect(circuit.snapshot()).toEqual({
      node: undefined,
      state: "closed",
      consecutiveFailures: 0,
      pendingCalls: 0,
      failedCalls: 0,
      openedAtMs: undefined,
    });
    circuit.admit();
    circuit.admit();
    now = 7;
    circuit.failed(false);
    circuit.answeredByPolicy();
    expect(circuit.snapshot()).toEqual({
      node: undefined,
      state: "open",
      consecutiveFailures: 1,
      pendingCalls: 2,
      failedCalls: 1,
      openedAtMs: 7,
    });
  });
});
