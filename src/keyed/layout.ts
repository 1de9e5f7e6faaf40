/**
 * The slab engine's name for the one seam between an algorithm and the state it decides:
 * {@link Kernel} (src/algorithms/kernel.ts). A slot layout is a kernel.
 * @module
 */
export type { Kernel as SlotLayout } from "../algorithms/kernel.js";
