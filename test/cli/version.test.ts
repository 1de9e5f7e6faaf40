import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { PACKAGE_JSON_CANDIDATES, packageVersion } from "../../src/cli/version.js";
import { repoRoot } from "../support/access-log.js";

const dir = mkdtempSync(join(tmpdir(), "tollgate-version-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file URL of `dir/<name>/package.json` holding `content` (or no file when undefined). */
function candidate(name: string, content: string | undefined): URL {
  mkdirSync(join(dir, name), { recursive: true });
  const path = join(dir, name, "package.json");
  if (content !== undefined) writeFileSync(path, content);
  return pathToFileURL(path);
}

const ours = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")) as {
  name: string;
  version: string;
};

describe("packageVersion", () => {
  test("from source: the repository's package.json (../../ of src/cli/version.ts)", () => {
    expect(ours.name).toBe("tollgate");
    expect(packageVersion()).toBe(ours.version);
    expect(PACKAGE_JSON_CANDIDATES.map((url) => url.href)).toEqual([
      pathToFileURL(join(repoRoot, "src/package.json")).href, // dist/cli.js → package root
      pathToFileURL(join(repoRoot, "package.json")).href, // src/cli/version.ts → root
    ]);
  });

  test.each([
    {
      name: "the first candidate wins",
      files: [
        ["a", '{"name":"tollgate","version":"1.2.3"}'],
        ["b", '{"name":"tollgate","version":"9.9.9"}'],
      ],
      want: "1.2.3",
    },
    {
      name: "a missing file is skipped",
      files: [
        ["missing", undefined],
        ["b", '{"name":"tollgate","version":"2.0.0-beta.1"}'],
      ],
      want: "2.0.0-beta.1",
    },
    {
      name: "another package's package.json is skipped (a parent project)",
      files: [
        ["other", '{"name":"my-app","version":"7.0.0"}'],
        ["b", '{"name":"tollgate","version":"0.3.0"}'],
      ],
      want: "0.3.0",
    },
    {
      name: "broken JSON, null, no version, a numeric version are skipped",
      files: [
        ["broken", '{"name":"tollgate",'],
        ["null", "null"],
        ["noversion", '{"name":"tollgate"}'],
        ["numeric", '{"name":"tollgate","version":1}'],
        ["b", '{"name":"tollgate","version":"0.4.0"}'],
      ],
      want: "0.4.0",
    },
  ])("$name", ({ files, want }) => {
    const urls = files.map(([name, content], i) => candidate(`${want}-${i}-${name}`, content));
    expect(packageVersion(urls)).toBe(want);
  });

  test("no candidate is tollgate's: an Error naming the paths tried", () => {
    const urls = [candidate("none-a", undefined), candidate("none-b", '{"name":"other"}')];
    expect(() => packageVersion(urls)).toThrow(Error);
    expect(() => packageVersion(urls)).toThrow(
      `cannot find tollgate's package.json (tried ${join(dir, "none-a", "package.json")}, ${join(dir, "none-b", "package.json")})`,
    );
  });
});
