// The pure helpers of the Logs view: query editing, request parameters,
// sparklines and the bounded list of records shown. The client of the log
// service is in api.ts.
import type { HostCount, LogRecord, LogSeries } from "./api";
import { resolveTime } from "./route";

// searchParams maps the view's URL state (q, from, to) onto the search
// API. A "to" of now is left open, so the newest messages are included.
export function searchParams(view: URLSearchParams, now: number, limit: number, cursor?: string): URLSearchParams {
  const p = new URLSearchParams();
  const q = (view.get("q") ?? "").trim();
  if (q) p.set("q", q);
  const toRaw = view.get("to") ?? "now";
  const end = resolveTime(toRaw, now, now);
  let start = resolveTime(view.get("from") ?? "now-1h", now, end - 3600e3);
  if (start >= end) start = end - 60e3;
  p.set("from", new Date(start).toISOString());
  if (toRaw !== "now") p.set("to", new Date(end).toISOString());
  p.set("limit", String(limit));
  if (cursor) p.set("cursor", cursor);
  return p;
}

// Query terms: key:value, key:"quoted value", "quoted phrase" or a word.
const termRE = /[A-Za-z]+:"[^"]*"|"[^"]*"|\S+/g;

// withFilter sets one filter (host, app, severity, pattern) of a query,
// replacing the previous value of that filter and keeping everything else;
// a null value removes the filter.
export function withFilter(q: string, key: string, value: string | null): string {
  const k = key.toLowerCase();
  const aliases: Record<string, string[]> = { app: ["app", "tag"], severity: ["severity", "sev", "level"] };
  const same = aliases[k] ?? [k];
  const kept = (q.match(termRE) ?? []).filter((t) => {
    const i = t.indexOf(":");
    return i <= 0 || t.startsWith('"') || !same.includes(t.slice(0, i).toLowerCase());
  });
  if (value !== null) kept.push(`${k}:${/[\s"]/.test(value) ? '"' + value.replace(/"/g, "") + '"' : value}`);
  return kept.join(" ");
}

// filterValue returns the value of a filter in q, or null.
export function filterValue(q: string, key: string): string | null {
  for (const t of q.match(termRE) ?? []) {
    const i = t.indexOf(":");
    if (i > 0 && !t.startsWith('"') && t.slice(0, i).toLowerCase() === key) return t.slice(i + 1).replace(/^"|"$/g, "");
  }
  return null;
}

// templateParts splits a mined template at its <*> wildcards, so they can
// be shown apart from the constant text.
export function templateParts(t: string): { text: string; wild: boolean }[] {
  const out: { text: string; wild: boolean }[] = [];
  const pieces = t.split("<*>");
  pieces.forEach((p, i) => {
    if (p) out.push({ text: p, wild: false });
    if (i < pieces.length - 1) out.push({ text: "<*>", wild: true });
  });
  return out;
}

// bucketStart is the start (ms) of counts[i] of s.
export function bucketStart(s: LogSeries, i: number): number {
  return (s.end - (s.counts.length - 1 - i)) * s.width_s * 1000;
}

// sparkPath is an SVG path of one bar per bucket, scaled to the largest
// count; empty buckets draw nothing.
export function sparkPath(counts: number[], width: number, height: number): string {
  const max = Math.max(0, ...counts);
  if (max === 0 || counts.length === 0) return "";
  const w = width / counts.length;
  let d = "";
  counts.forEach((c, i) => {
    if (c <= 0) return;
    const bh = Math.max(1, (c / max) * height);
    d += `M${r2(i * w)} ${r2(height)}v${r2(-bh)}h${r2(Math.max(w - 0.5, 0.5))}v${r2(bh)}z`;
  });
  return d;
}

function r2(x: number): number {
  return Math.round(x * 100) / 100;
}

// topHosts returns the n busiest hosts, ties by name.
export function topHosts(hosts: HostCount[] | null, n: number): HostCount[] {
  return [...(hosts ?? [])].sort((a, b) => b.count - a.count || a.host.localeCompare(b.host)).slice(0, n);
}

// Severities, most severe first, as named by the log service.
export const severities = ["emerg", "alert", "crit", "err", "warning", "notice", "info", "debug"];

// severityClass groups severities for colouring: bad (err and worse), warn,
// or plain.
export function severityClass(s: string): "bad" | "warn" | "plain" {
  const i = severities.indexOf(s);
  if (i >= 0 && i <= 3) return "bad";
  if (s === "warning") return "warn";
  return "plain";
}

// RecordList keeps the newest-first records shown: live messages go on
// top, pages of older ones at the bottom. A live arrival beyond max drops
// the oldest, and the cursor moves up so "load more" resumes after the
// last record kept.
export class RecordList {
  records: LogRecord[] = [];
  cursor: string | undefined;
  private seen = new Set<number>();

  constructor(readonly max: number) {}

  newest(): number | null {
    return this.records.length ? this.records[0].seq : null;
  }

  // appendPage adds an older page and returns the records it added.
  appendPage(recs: LogRecord[], next: string | undefined): LogRecord[] {
    const added = recs.filter((r) => !this.seen.has(r.seq));
    for (const r of added) this.seen.add(r.seq);
    this.records.push(...added);
    this.cursor = next;
    return added;
  }

  // prepend adds live records (given oldest first, as they arrive) and
  // returns those added, newest first, and how many old ones were dropped.
  prepend(recs: LogRecord[]): { added: LogRecord[]; dropped: number } {
    const top = this.newest();
    const added = recs.filter((r) => !this.seen.has(r.seq) && (top === null || r.seq > top)).reverse();
    for (const r of added) this.seen.add(r.seq);
    this.records.unshift(...added);
    if (this.records.length <= this.max) return { added, dropped: 0 };
    const gone = this.records.splice(this.max);
    for (const r of gone) this.seen.delete(r.seq);
    // The search cursor is exclusive: older than the last record kept.
    this.cursor = String(this.records[this.records.length - 1].seq);
    return { added, dropped: gone.length };
  }
}
