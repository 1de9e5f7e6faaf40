// Every relative link in README.md, CONTRIBUTING.md and docs/*.md resolves: to a file or
// directory of the repository, and for `#anchor` links to a heading of the target file
// (GitHub's anchor rules). The helpers are checked on small inputs first, so a checker that
// accepts everything fails here.
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "vitest";
import { anchors, isRelative, links, markdownFiles, ROOT, slug } from "./markdown.js";

/** Why `target` (written in `from`) does not resolve, or undefined when it does. */
function brokenLink(from: string, target: string): string | undefined {
  const hash = target.indexOf("#");
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = pathPart === "" ? from : normalize(join(dirname(from), pathPart));
  if (file.startsWith("..")) return `${target}: leaves the repository`;
  const absolute = join(ROOT, file);
  if (!existsSync(absolute)) return `${target}: no such file ${file}`;
  if (anchor === undefined) return undefined;
  if (statSync(absolute).isDirectory() || !file.endsWith(".md")) {
    return `${target}: an anchor into a file that is not Markdown`;
  }
  const known = anchors(readFileSync(absolute, "utf8"));
  return known.has(anchor) ? undefined : `${target}: no heading #${anchor} in ${file}`;
}

describe("markdown helpers", () => {
  it.each([
    ["Redis (`tollgate/redis`)", "redis-tollgateredis"],
    ["Many keys: `KeyedLimiter`", "many-keys-keyedlimiter"],
    ["`allOf(...limiters)`", "alloflimiters"],
    ["Reservations (Go-style)", "reservations-go-style"],
    ["node:http", "nodehttp"],
    ['How exact is "exact"?', "how-exact-is-exact"],
    ["Why `performance.now()` and not `Date.now()`?", "why-performancenow-and-not-datenow"],
    ["Bun, Deno, Hono, Workers (fetch handlers)", "bun-deno-hono-workers-fetch-handlers"],
    ["See [the docs](docs/x.md) now", "see-the-docs-now"],
  ])("slug(%j) is %j", (heading, expected) => {
    expect(slug(heading)).toBe(expected);
  });

  it("numbers repeated headings and ignores headings in code blocks", () => {
    const text = "# A\n## Options\n```sh\n# not a heading\n```\n## Options\n";
    expect([...anchors(text)]).toEqual(["a", "options", "options-1"]);
  });

  it("finds links outside code, and not in code blocks or inline code", () => {
    const text = "See [a](a.md) and ![img](b.svg).\n`[c](c.md)`\n```\n[d](d.md)\n```\n[e](e.md#x)";
    expect(links(text).map((l) => l.target)).toEqual(["a.md", "b.svg", "e.md#x"]);
  });

  it("reports a missing file, a missing heading and a link out of the repository", () => {
    expect(brokenLink("README.md", "docs/no-such-file.md")).toMatch(/no such file/);
    expect(brokenLink("README.md", "docs/semantics.md#no-such-heading")).toMatch(/no heading/);
    expect(brokenLink("README.md", "#no-such-heading")).toMatch(/no heading/);
    expect(brokenLink("docs/http.md", "../../outside.md")).toMatch(/leaves the repository/);
    expect(brokenLink("docs/http.md", "semantics.md#decision")).toBeUndefined();
  });

  it("tells relative links from URLs", () => {
    expect(isRelative("docs/http.md")).toBe(true);
    expect(isRelative("#install")).toBe(true);
    expect(isRelative("https://example.com/")).toBe(false);
    expect(isRelative("mailto:x@example.com")).toBe(false);
  });
});

describe.each(markdownFiles())("%s", (file) => {
  const text = readFileSync(join(ROOT, file), "utf8");
  const relative = links(text).filter((l) => isRelative(l.target));

  it("has only relative links that resolve", () => {
    const broken = relative.flatMap((l) => {
      const why = brokenLink(file, l.target);
      return why === undefined ? [] : [`${file}:${l.line}: ${why}`];
    });
    expect(broken).toEqual([]);
  });
});

it("the docs link to each other (the link check has links to check)", () => {
  const count = markdownFiles().reduce(
    (n, f) =>
      n + links(readFileSync(join(ROOT, f), "utf8")).filter((l) => isRelative(l.target)).length,
    0,
  );
  expect(count).toBeGreaterThan(50);
});
