// Shareable state lives in the URL hash: #/VIEW[/NODE]?key=value&...
// e.g. #/heatmap?m=cpu, #/node/cn00001?from=now-1h&to=now, #/explore?q=up,
// #/logs?q=app:sshd&from=now-1h&to=now&live=1, #/jobs?user=ann&sort=cpu,
// #/job/1234_7, #/status?kind=node_down&severity=warning, #/fabric?color=wait

export type ViewName = "heatmap" | "status" | "node" | "explore" | "tree" | "logs" | "jobs" | "job" | "fabric";

export interface Route {
  view: ViewName;
  node?: string;
  job?: string;
  params: URLSearchParams;
}

const views: ViewName[] = ["heatmap", "status", "node", "explore", "tree", "logs", "jobs", "job", "fabric"];

export function parseHash(hash: string): Route {
  const h = hash.replace(/^#\/?/, "");
  const qi = h.indexOf("?");
  const path = qi < 0 ? h : h.slice(0, qi);
  const params = new URLSearchParams(qi < 0 ? "" : h.slice(qi + 1));
  const parts = path.split("/").filter((p) => p !== "").map(safeDecode);
  const view = views.includes(parts[0] as ViewName) ? (parts[0] as ViewName) : "heatmap";
  if (view === "node") {
    if (!parts[1]) return { view: "heatmap", params };
    return { view, node: parts[1], params };
  }
  if (view === "job") {
    if (!parts[1]) return { view: "jobs", params };
    return { view, job: parts[1], params };
  }
  return { view, params };
}

export function formatHash(r: Route): string {
  let s = "#/" + r.view;
  if (r.view === "node" && r.node) s += "/" + encodeURIComponent(r.node);
  if (r.view === "job" && r.job) s += "/" + encodeURIComponent(r.job);
  const q = r.params.toString();
  return q ? s + "?" + q : s;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

// Time bounds are "now", "now-<dur>" or unix milliseconds; durations use
// s, m, h, d, w units, possibly combined ("1h30m").
export function parseDuration(s: string): number | null {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/gy;
  let total = 0;
  let m: RegExpExecArray | null;
  let pos = 0;
  const unit: Record<string, number> = { ms: 1, s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3 };
  if (s === "") return null;
  while ((m = re.exec(s)) !== null) {
    total += parseFloat(m[1]) * unit[m[2]];
    pos = re.lastIndex;
  }
  return pos === s.length ? total : null;
}

export function resolveTime(s: string | null, now: number, fallback: number): number {
  if (!s) return fallback;
  if (s === "now") return now;
  if (s.startsWith("now-")) {
    const d = parseDuration(s.slice(4));
    return d === null ? fallback : now - d;
  }
  if (/^\d+$/.test(s)) return parseInt(s, 10);
  return fallback;
}

export interface TimeRange {
  start: number; // ms
  end: number; // ms
}

// timeRange reads from/to params; the default is the last hour.
export function timeRange(p: URLSearchParams, now: number): TimeRange {
  const end = resolveTime(p.get("to"), now, now);
  let start = resolveTime(p.get("from"), now, end - 3600e3);
  if (start >= end) start = end - 60e3;
  return { start, end };
}

// stepFor picks a query_range step (seconds) giving at most ~points samples.
export function stepFor(r: TimeRange, points = 400): number {
  const raw = (r.end - r.start) / 1000 / points;
  const nice = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  for (const n of nice) if (n >= raw) return n;
  return Math.ceil(raw / 86400) * 86400;
}
