/** The first entry of `npm pack --json`'s report, out of its stdout (build log first). */
export function packReportOf(stdout: string): {
  filename: string;
  files: { path: string }[];
  entryCount: number;
  size: number;
};
