/**
 * The machine line at the top of the report: runtime, CPU model, cores. Numbers from
 * different machines are not comparable; ratios within one run are.
 * @module
 */
import os from "node:os";

/** What the report and the JSON record about the machine. */
export interface Machine {
  readonly node: string;
  readonly v8: string;
  readonly cpu: string;
  readonly cores: number;
  readonly platform: string;
  readonly arch: string;
  readonly memoryGiB: number;
}

/** Describes the current machine. */
export function machine(): Machine {
  const cpus = os.cpus();
  return {
    node: process.version,
    v8: process.versions.v8,
    cpu: cpus[0]?.model.trim() || "unknown CPU",
    cores: os.availableParallelism?.() ?? cpus.length,
    platform: os.platform(),
    arch: os.arch(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  };
}

/** `Node v20.20.2 (V8 11.3), AMD EPYC, 2 cores, linux x64, 24 GiB RAM`. */
export function machineLine(m: Machine): string {
  const v8 = m.v8.split(".").slice(0, 2).join(".");
  return `Node ${m.node} (V8 ${v8}), ${m.cpu}, ${m.cores} cores, ${m.platform} ${m.arch}, ${m.memoryGiB} GiB RAM`;
}
