import { h } from "./dom";
import { formatNumber, formatValue } from "./format";

// The job report's Lustre section (internal/jobs/report/lustre.go): what
// the Lustre servers counted for the job, per file system.
export interface LustreFS {
  fs: string;
  read_bytes: number;
  write_bytes: number;
  reads: number; // OST read requests
  writes: number; // OST write requests
  metadata_ops: number; // MDT operations
  ost_ops: number; // other OST operations (punch, setattr, sync, …)
  osts: number;
  mdts: number;
}

// The server lists at most 64 file systems; more is not its answer.
const maxFS = 64;

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

// validLustre keeps the file systems that have a name; values that are
// not finite and positive count as 0; null when none is left.
export function validLustre(x: unknown): LustreFS[] | null {
  if (!Array.isArray(x)) return null;
  const out = x.filter((f) => f && typeof f === "object" && typeof f.fs === "string" && f.fs !== "").slice(0, maxFS)
    .map((f): LustreFS => ({
      fs: f.fs, read_bytes: num(f.read_bytes), write_bytes: num(f.write_bytes), reads: num(f.reads), writes: num(f.writes),
      metadata_ops: num(f.metadata_ops), ost_ops: num(f.ost_ops), osts: Math.floor(num(f.osts)), mdts: Math.floor(num(f.mdts)),
    }));
  return out.length ? out : null;
}

export const lustreColumns = ["file system", "read", "written", "read RPCs", "write RPCs", "metadata ops", "OST ops", "targets"];

// lustreRow is one file system's cells, in lustreColumns' order.
export function lustreRow(f: LustreFS): string[] {
  const targets = [f.osts ? `${f.osts} OST${f.osts === 1 ? "" : "s"}` : "", f.mdts ? `${f.mdts} MDT${f.mdts === 1 ? "" : "s"}` : ""]
    .filter((s) => s).join(", ");
  return [f.fs, formatValue(f.read_bytes, "bytes"), formatValue(f.write_bytes, "bytes"), formatNumber(f.reads),
    formatNumber(f.writes), formatNumber(f.metadata_ops), formatNumber(f.ost_ops), targets || "–"];
}

// lustreSection: a table with a row per file system, busiest first as the
// server sends them.
export function lustreSection(fs: LustreFS[] | null): HTMLElement | null {
  if (!fs) return null;
  return h("div.job-lustre", null, h("h3", null, "Lustre"),
    h("p.muted", null, "Counted by the Lustre servers (job_stats): all the job's nodes, page cache and readahead included."),
    h("table.data", null,
      h("thead", null, h("tr", null, lustreColumns.map((c) => h("th", null, c)))),
      h("tbody", null, fs.map((f) => h("tr", { "data-fs": f.fs },
        lustreRow(f).map((c, i) => h(i === 0 || i === lustreColumns.length - 1 ? "td" : "td.num", null, c)))))));
}
