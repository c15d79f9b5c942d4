// Pure helpers of the Jobs view and the job page: the list's URL state,
// filtering and sorting by efficiency, and the report's series laid out
// for uPlot (median, p10–p90 band, one line per node).
import type { Job, JobSummary, Points, ReportSeries } from "./api";
import { formatValue } from "./format";
import type { AlignedData } from "./series";

export const jobStates = ["pending", "running", "completed", "failed", "cancelled", "timeout", "oom", "node_fail", "ended"];

// Sort keys: efficiency ascending (the most wasteful first) or, with a
// leading "-", descending; "" keeps the index's order (newest first).
export const sortKeys = ["", "cpu", "-cpu", "mem", "-mem"] as const;
export type SortKey = (typeof sortKeys)[number];

export interface JobsQuery {
  user: string;
  state: string;
  partition: string;
  since: string; // a duration ("7d"); "" = the index's default
  sort: SortKey;
}

const maxField = 200; // a hostile link must not make a huge request

function field(p: URLSearchParams, k: string): string {
  return (p.get(k) ?? "").trim().slice(0, maxField);
}

// parseJobsQuery reads #/jobs?user=&state=&partition=&since=&sort=; unknown
// states and sort keys are dropped.
export function parseJobsQuery(p: URLSearchParams): JobsQuery {
  const state = field(p, "state");
  const sort = field(p, "sort");
  return {
    user: field(p, "user"),
    state: jobStates.includes(state) ? state : "",
    partition: field(p, "partition"),
    since: /^\d+(ms|s|m|h|d|w)$/.test(field(p, "since")) ? field(p, "since") : "",
    sort: (sortKeys as readonly string[]).includes(sort) ? (sort as SortKey) : "",
  };
}

// jobsParams writes q back for the URL; empty fields are left out, so a
// link carries only what was chosen.
export function jobsParams(q: JobsQuery): URLSearchParams {
  const p = new URLSearchParams();
  for (const k of ["user", "state", "partition", "since", "sort"] as const) if (q[k]) p.set(k, q[k]);
  return p;
}

// apiParams is what the index is asked for (sorting is done here).
export function apiParams(q: JobsQuery, limit = 500): URLSearchParams {
  const p = jobsParams(q);
  p.delete("sort");
  p.set("limit", String(limit));
  return p;
}

// matches re-checks the filters on the answer: a server that ignores one
// (an older index) must not show jobs the user filtered out.
export function matches(j: Job, q: JobsQuery): boolean {
  if (q.user && j.user !== q.user) return false;
  if (q.partition && j.partition !== q.partition) return false;
  if (q.state && j.state !== q.state) return false;
  return true;
}

// efficiency reads one figure of a job's summary, null when unknown (no
// summary yet, or memory asked unknown).
export function efficiency(j: Job, which: "cpu" | "mem"): number | null {
  const s = j.summary;
  if (!s) return null;
  const v = which === "cpu" ? s.cpu_efficiency : s.mem_efficiency;
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  if (which === "mem" && v === 0 && !j.mem_bytes) return null;
  return v;
}

// sortJobs returns the jobs in the order of key; jobs without the figure go
// last whatever the direction, and ties keep the index's order.
export function sortJobs(jobs: Job[], key: SortKey): Job[] {
  if (!key) return jobs.slice();
  const which = key.endsWith("cpu") ? "cpu" : "mem";
  const dir = key.startsWith("-") ? -1 : 1;
  return jobs
    .map((j, i) => ({ j, i, v: efficiency(j, which) }))
    .sort((a, b) => {
      if (a.v === null || b.v === null) return (a.v === null ? 1 : 0) - (b.v === null ? 1 : 0) || a.i - b.i;
      return dir * (a.v - b.v) || a.i - b.i;
    })
    .map((x) => x.j);
}

// formatEfficiency: "42%" or "—" when unknown.
export function formatEfficiency(v: number | null): string {
  return v === null ? "—" : formatValue(v, "fraction");
}

// formatDuration writes seconds as "2d 3h", "3h 05m", "4m 10s".
export function formatDuration(sec: number): string {
  if (!Number.isFinite(sec) || sec < 0) return "—";
  const s = Math.round(sec);
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  const p = (n: number) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d ${hh}h`;
  if (hh > 0) return `${hh}h ${p(m)}m`;
  if (m > 0) return `${m}m ${p(s % 60)}s`;
  return `${s}s`;
}

function ms(t: string | undefined): number | null {
  if (!t) return null;
  const v = Date.parse(t);
  // Go's zero time ("0001-01-01T00:00:00Z") means unknown.
  return Number.isFinite(v) && v > 0 ? v : null;
}

// jobTimes gives the job's start and end in ms (end: now for a job still
// running), null when it has not started.
export function jobTimes(j: Job, now: number): { start: number; end: number } | null {
  const start = ms(j.start);
  if (start === null) return null;
  const end = ms(j.end) ?? now;
  return { start, end: Math.max(end, start) };
}

// runTime is "1h 05m / 2h 00m" (elapsed / limit).
export function runTime(j: Job, now: number): string {
  const t = jobTimes(j, now);
  const el = t ? formatDuration((t.end - t.start) / 1000) : "not started";
  return j.time_limit ? `${el} / ${formatDuration(j.time_limit)}` : el;
}

// stragglers lists the nodes the report flags.
export function stragglers(s: JobSummary | null | undefined): Set<string> {
  return new Set((s?.stragglers ?? []).filter((x) => typeof x === "string"));
}

// MetricSpec names a report metric and its unit.
export interface MetricSpec {
  key: string;
  title: string;
  unit: "none" | "bytes" | "bytes/s";
}

export const reportMetrics: MetricSpec[] = [
  { key: "cpu", title: "CPU (cores used)", unit: "none" },
  { key: "memory", title: "Memory", unit: "bytes" },
  { key: "read", title: "Read", unit: "bytes/s" },
  { key: "write", title: "Write", unit: "bytes/s" },
];

// BandData is a metric's columns for the band chart: x, p90, median, p10,
// then one column per node (nodes[i] is column 4 + i).
export interface BandData {
  data: AlignedData;
  nodes: string[];
  computed: boolean; // the band was computed here from the node lines
}

export const maxNodeLines = 64; // beyond this a chart of lines is noise

function num(v: number | string | null): number | null {
  if (v === null) return null;
  const f = typeof v === "number" ? v : parseFloat(v);
  return Number.isFinite(f) ? f : null;
}

function validPoints(p: unknown): Points {
  return Array.isArray(p) ? (p.filter((x) => Array.isArray(x) && x.length >= 2 && Number.isFinite(Number(x[0]))) as Points) : [];
}

// quantile of sorted values, linear between closest ranks.
export function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos), hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

// bandColumns lays a report metric out for uPlot. The band and median come
// from the server; when it sent only node lines they are computed here.
// Nodes are kept up to maxNodeLines, stragglers first. null when there is
// nothing to draw.
export function bandColumns(rs: ReportSeries | null | undefined, flagged: Set<string> = new Set()): BandData | null {
  if (!rs) return null;
  const nodeMap = rs.nodes && typeof rs.nodes === "object" ? rs.nodes : {};
  const names = Object.keys(nodeMap).sort((a, b) => Number(flagged.has(b)) - Number(flagged.has(a)) || a.localeCompare(b, undefined, { numeric: true }));
  const nodes = names.slice(0, maxNodeLines);
  const cols: Points[] = [validPoints(rs.p90), validPoints(rs.median), validPoints(rs.p10), ...nodes.map((n) => validPoints(nodeMap[n]))];
  const ts = new Set<number>();
  for (const c of cols) for (const [t] of c) ts.add(Number(t));
  if (ts.size === 0) return null;
  const xs = [...ts].sort((a, b) => a - b);
  const at = new Map<number, number>();
  xs.forEach((t, i) => at.set(t, i));
  const out = cols.map((c) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    for (const [t, v] of c) col[at.get(Number(t))!] = num(v);
    return col;
  });
  let computed = false;
  if (cols[1].length === 0 && names.length > 0) {
    // Quantiles over every node, not just the ones drawn.
    const all = names.map((n) => validPoints(nodeMap[n]));
    const per: number[][] = xs.map(() => []);
    for (const c of all) for (const [t, v] of c) {
      const f = num(v);
      if (f !== null) per[at.get(Number(t))!]?.push(f);
    }
    per.forEach((vs, i) => {
      if (vs.length === 0) return;
      vs.sort((a, b) => a - b);
      out[0][i] = quantile(vs, 0.9);
      out[1][i] = quantile(vs, 0.5);
      out[2][i] = quantile(vs, 0.1);
    });
    computed = true;
  }
  return { data: [xs, ...out], nodes, computed };
}

// hasSeries tells a report with raw data from one made of the summary only.
export function hasSeries(series: Record<string, ReportSeries> | null | undefined): boolean {
  if (!series) return false;
  return reportMetrics.some((m) => bandColumns(series[m.key]) !== null);
}
