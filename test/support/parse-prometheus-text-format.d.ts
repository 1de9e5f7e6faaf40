// Types of the devDependency parse-prometheus-text-format, which ships none.
declare module "parse-prometheus-text-format" {
  /** One parsed metric family. */
  interface ParsedFamily {
    name: string;
    help: string;
    type: string;
    metrics: { value: string; labels?: Record<string, string> }[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
