import { expect, test } from "vitest";
import { packReportOf } from "../../scripts/pack-json.mjs";

const report = `[
  {
    "id": "tollgate@0.1.0",
    "filename": "tollgate-0.1.0.tgz",
    "files": [{ "path": "dist/index.js" }],
    "entryCount": 1,
    "size": 10
  }
]
`;

// Regression: pack:check took the first "[" of stdout as the JSON, and in CI prepack's
// coloured build log ("\\x1b[34mCLI\\x1b[39m Building entry ...") came first.
test("npm pack's JSON is found after a coloured build log", () => {
  const log = '\x1b[34mCLI\x1b[39m Building entry: {"index":"src/index.ts"}\n[cli] done\n';
  expect(packReportOf(log + report).filename).toBe("tollgate-0.1.0.tgz");
  expect(packReportOf(report).files).toEqual([{ path: "dist/index.js" }]);
});

test("stdout without the JSON is an error that shows it", () => {
  expect(() => packReportOf("npm error code E404\n")).toThrow(
    "npm pack --json printed no JSON:\nnpm error code E404",
  );
});
