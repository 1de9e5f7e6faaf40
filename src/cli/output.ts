import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/**
 * Why `path` cannot be written as an output file, or undefined when it looks writable: an existing
 * file must be writable and not a directory; a new one needs an existing, writable directory.
 * Checked before the replay reads its input, so a mistyped `--svg` fails at once rather than after
 * reading the whole log. (The write itself can still fail, a full disk say; that is reported then.)
 * The output must not be `input`, the log being read (`-` for standard input), however either is
 * written (another spelling of the path, a link): the chart would replace the log.
 */
export async function outputProblem(path: string, input = "-"): Promise<string | undefined> {
  if (path === "") return "the path is empty";
  try {
    const output = await stat(path);
    if (output.isDirectory()) return "it is a directory";
    if (input !== "-") {
      const log = await stat(input).catch(() => undefined);
      if (log !== undefined && log.dev === output.dev && log.ino === output.ino) {
        return "it is the log being replayed (the chart would overwrite it)";
      }
    }
    await access(path, constants.W_OK);
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") return (error as Error).message;
  }
  const dir = dirname(resolve(path));
  try {
    if (!(await stat(dir)).isDirectory()) return `${dir} is not a directory`;
    await access(dir, constants.W_OK);
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}
