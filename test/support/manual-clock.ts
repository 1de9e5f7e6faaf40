/**
 * The tests' clock is the one tollgate/testing gives users: time moves only when told to
 * (`set`, `advance`, backwards too, to test how limiters cope).
 */
export { type ManualClock, manualClock } from "../../src/testing/index.js";
