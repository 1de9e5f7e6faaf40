// The blocks a reader pastes and runs print what the text says: every `<!-- run -->` block of
// docs/*.md, and every README block that states its output, runs from source here (bundled
// once, as tsx compiles it; test/support/bundle.ts) and must exit 0, write nothing to stderr
// and print exactly the lines its `//=>` comments claim (`//~>`: numbers vary), in order.
// pack-check runs the same blocks against the installed tarball with the same comparison
// (scripts/readme-check.mjs); this catches a wrong claim in a moment, without packing.
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  claimedOutput,
  docBlocks,
  importedPackages,
  outputMismatch,
  RUN_LANGS,
  readmeBlocks,
} from "../../scripts/readme-blocks.mjs";
import { bundle } from "../support/bundle.js";
import { useRedis } from "../support/redis-server.js";
import { markdownFiles, ROOT } from "./markdown.js";

const redis = useRedis();

interface Run {
  readonly where: string;
  readonly code: string;
  readonly redis: boolean;
}

const runs: Run[] = markdownFiles().flatMap((doc) => {
  const text = readFileSync(join(ROOT, doc), "utf8");
  const blocks = doc.startsWith("docs/")
    ? docBlocks(text).filter((b) => b.mark === "run")
    : readmeBlocks(text).filter(
        (b) =>
          RUN_LANGS.has(b.lang) &&
          b.lang !== "sh" &&
          b.lang !== "bash" &&
          b.skip === undefined &&
          claimedOutput(b.code).length > 0,
      );
  return blocks.map((b) => ({
    where: `${doc}:${b.line}`,
    code: b.code,
    redis: importedPackages(b.code).includes("ioredis"),
  }));
});

/** Runs a block as a file of its own beside the repository's node_modules. */
function run(block: Run) {
  const file = join(ROOT, `.block-${block.where.replace(/[/.:]/g, "-")}.${process.pid}.mjs`);
  writeFileSync(file, bundle(block.code));
  try {
    return spawnSync(process.execPath, [file], {
      cwd: ROOT,
      encoding: "utf8",
      // A hang guard only (a spawnSync cannot be interrupted); every block ends in a second.
      timeout: 60_000,
      env: { ...process.env, NO_COLOR: "1", REDIS_URL: redis.url() },
    });
  } finally {
    rmSync(file, { force: true });
  }
}

describe("the blocks a reader runs", () => {
  it("include the docs' run blocks and the README's blocks that claim output", () => {
    expect(runs.filter((r) => r.where.startsWith("docs/")).length).toBeGreaterThanOrEqual(6);
    expect(runs.filter((r) => r.where.startsWith("README.md")).length).toBeGreaterThanOrEqual(1);
  });

  describe.each(runs)("$where", (block) => {
    it.runIf(!block.redis || redis.available)(
      "runs and prints what its //=> comments say",
      () => {
        const r = run(block);
        expect(r.stderr, `${block.where} wrote to stderr`).toBe("");
        expect(r.status, `${block.where} exit status`).toBe(0);
        expect(outputMismatch(block.code, r.stdout), `${block.where}:\n${r.stdout}`).toBe(
          undefined,
        );
      },
      60_000,
    );
  });
});
