import type { MetricSpec } from "./jobs";

// The job report's application I/O section (internal/jobs/report IO).
export interface IOFS {
  mountpoint: string;
  fstype: string;
  read_bytes: number;
  write_bytes: number;
  calls: Record<string, number>;
  read_seconds: number;
  write_seconds: number;
  meta_seconds: number;
  sequential: number;
  random: number;
  read_sizes: number[];
  write_sizes: number[];
}

export interface JobIO {
  buckets: string[];
  fs: IOFS[];
  read_sizes: number[];
  write_sizes: number[];
  sequential: number;
  random: number;
  read_seconds: number;
  write_seconds: number;
  meta_seconds: number;
  // The job's top files from the server's per-file record store.
  files?: IOFiles | null;
}

// IOFile is one file of the job on one node (internal/jobs/report IOFile).
export interface IOFile {
  path: string;
  node: string;
  mountpoint: string;
  read_bytes: number;
  write_bytes: number;
  reads: number;
  writes: number;
  meta_ops: number;
  seconds: number;
  small_writes: number;
}

export type FileRanking = "bytes" | "calls" | "time";

export interface IOFiles {
  by_bytes: IOFile[];
  by_calls: IOFile[];
  by_time: IOFile[];
}

// validFiles keeps the lists' well-formed entries, at most 100 each.
export function validFiles(x: unknown): IOFiles | null {
  const fs = x as Partial<IOFiles> | null | undefined;
  if (!fs || typeof fs !== "object") return null;
  const list = (l: unknown): IOFile[] =>
    Array.isArray(l) ? l.filter((f) => f && typeof f.path === "string" && typeof f.node === "string").slice(0, 100) : [];
  const out = { by_bytes: list(fs.by_bytes), by_calls: list(fs.by_calls), by_time: list(fs.by_time) };
  return out.by_bytes.length + out.by_calls.length + out.by_time.length > 0 ? out : null;
}

// filesBy is the list of a ranking.
export function filesBy(fs: IOFiles, by: FileRanking): IOFile[] {
  return by === "calls" ? fs.by_calls : by === "time" ? fs.by_time : fs.by_bytes;
}

// fileCalls is a file's reads, writes and metadata calls.
export function fileCalls(f: IOFile): number {
  return num(f.reads) + num(f.writes) + num(f.meta_ops);
}

// ioMetrics are the report's application I/O series, charted when present.
export const ioMetrics: MetricSpec[] = [
  { key: "appio_bytes", title: "Application I/O (read + written)", unit: "bytes/s" },
  { key: "appio_meta", title: "Metadata calls/s", unit: "none" },
];

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

// validIO keeps a report's io section when it has the expected shape (the
// server is trusted for types, not for sizes: at most 64 file systems and
// 16 buckets are shown).
export function validIO(x: unknown): JobIO | null {
  const io = x as JobIO | null | undefined;
  if (!io || !Array.isArray(io.fs) || !Array.isArray(io.buckets)) return null;
  const fs = io.fs.filter((f) => f && typeof f.mountpoint === "string").slice(0, 64);
  const files = validFiles(io.files);
  if (fs.length === 0 && !files) return null;
  return { ...io, fs, files, buckets: io.buckets.slice(0, 16).map(String) };
}

export interface HistRow {
  label: string; // upper bound, "≤ 1 KiB", or "> 1 GiB" for the last
  reads: number;
  writes: number;
  readShare: number; // of all reads, 0..1
  writeShare: number;
}

// sizeLabel names a bucket's upper bound in binary units ("1 KiB").
export function sizeLabel(le: string, prev: string | undefined): string {
  const fmt = (b: number) => {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < units.length - 1 && b % 1024 === 0) { b /= 1024; i++; }
    return `${b} ${units[i]}`;
  };
  const v = Number(le);
  if (le === "+Inf" || !Number.isFinite(v)) return prev !== undefined && Number.isFinite(Number(prev)) ? "> " + fmt(Number(prev)) : "larger";
  return "≤ " + fmt(v);
}

// histogram is the access-size histogram of io as rows with each bucket's
// share of the reads and of the writes.
export function histogram(io: JobIO): HistRow[] {
  const n = io.buckets.length;
  const r = Array.from({ length: n }, (_, i) => num(io.read_sizes?.[i]));
  const w = Array.from({ length: n }, (_, i) => num(io.write_sizes?.[i]));
  const tr = r.reduce((a, b) => a + b, 0), tw = w.reduce((a, b) => a + b, 0);
  return io.buckets.map((le, i) => ({
    label: sizeLabel(le, io.buckets[i - 1]), reads: r[i], writes: w[i],
    readShare: tr > 0 ? r[i] / tr : 0, writeShare: tw > 0 ? w[i] / tw : 0,
  }));
}

// ioShares are the sequential share of accesses and the metadata share of
// the time in I/O, null when unknown.
export function ioShares(io: JobIO): { sequential: number | null; meta: number | null } {
  const acc = num(io.sequential) + num(io.random);
  const t = num(io.read_seconds) + num(io.write_seconds) + num(io.meta_seconds);
  return { sequential: acc > 0 ? num(io.sequential) / acc : null, meta: t > 0 ? num(io.meta_seconds) / t : null };
}

// callsOf sums a file system's calls of the given ops.
export function callsOf(f: IOFS, ...ops: string[]): number {
  return ops.reduce((a, op) => a + num(f.calls?.[op]), 0);
}
