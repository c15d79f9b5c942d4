// The Status view's model: each node's worst state from the node list (up),
// the failing health checks and the firing alerts, and the event timeline's
// merging. No DOM here, so the unit tests run it at 20,000 nodes.
import type { Alert, HealthFailure, NodeState, VigilEvent } from "./api";
import { QUANT_DOWN, QUANT_MISSING } from "./frame";
import { buildLUT, DOWN_RGB, MISSING_RGB, packRGBA } from "./color";

// States, least to most severe; a node shows its worst. The numbers are the
// heatmap codes the grid is painted with (down is the heatmap's hatch).
export const OK = 0;
export const ALERT_WARNING = 1;
export const ALERT_CRITICAL = 2;
export const CHECK_FAILING = 3;
export const DOWN = QUANT_DOWN;

// order lists the states worst first, as the legend shows them.
export const order = [DOWN, CHECK_FAILING, ALERT_CRITICAL, ALERT_WARNING, OK] as const;
export type State = (typeof order)[number];

export const stateInfo: Record<State, { label: string; rgb: [number, number, number]; key: string }> = {
  [DOWN]: { label: "down", rgb: DOWN_RGB, key: "down" },
  [CHECK_FAILING]: { label: "failing check", rgb: [247, 129, 37], key: "check" },
  [ALERT_CRITICAL]: { label: "critical alert", rgb: [219, 97, 162], key: "critical" },
  [ALERT_WARNING]: { label: "warning alert", rgb: [227, 179, 65], key: "warning" },
  [OK]: { label: "ok", rgb: [46, 160, 67], key: "ok" },
};

// rank orders states by severity (DOWN's code is not its rank).
export function rank(s: number): number {
  return s === DOWN ? 4 : s === QUANT_MISSING ? -1 : s;
}

export function worse(a: number, b: number): number {
  return rank(a) >= rank(b) ? a : b;
}

// statusLUT paints the state codes with the heatmap's painter.
export function statusLUT(): Uint32Array {
  const lut = buildLUT();
  for (const s of order) lut[s] = packRGBA(stateInfo[s].rgb);
  lut[QUANT_MISSING] = packRGBA(MISSING_RGB);
  return lut;
}

// alertSeverity reads an alert's severity label: critical (also "page",
// "error", "high"), else warning, whatever else it says.
export function alertSeverity(a: Alert): "critical" | "warning" {
  const s = (a.labels.severity ?? "").toLowerCase();
  return s === "critical" || s === "page" || s === "error" || s === "high" ? "critical" : "warning";
}

// Sources is what the view has; null = that source is unavailable.
export interface Sources {
  nodes: NodeState[];
  health: Map<string, HealthFailure[]> | null;
  alerts: Alert[] | null;
}

// nodeStates returns one state per node of s.nodes, in its order.
export function nodeStates(s: Sources): Uint8Array {
  const out = new Uint8Array(s.nodes.length);
  const index = new Map<string, number>();
  s.nodes.forEach((n, i) => {
    index.set(n.name, i);
    out[i] = n.up ? OK : DOWN;
  });
  if (s.alerts) {
    for (const a of s.alerts) {
      if (a.state !== "firing") continue;
      const i = index.get(a.labels.node ?? "");
      if (i === undefined) continue;
      out[i] = worse(out[i], alertSeverity(a) === "critical" ? ALERT_CRITICAL : ALERT_WARNING);
    }
  }
  if (s.health) {
    for (const [node, checks] of s.health) {
      const i = index.get(node);
      if (i !== undefined && checks.length) out[i] = worse(out[i], CHECK_FAILING);
    }
  }
  return out;
}

// countStates counts nodes per state.
export function countStates(states: Uint8Array): Map<State, number> {
  const c = new Map<State, number>(order.map((s) => [s, 0]));
  for (let i = 0; i < states.length; i++) {
    const s = states[i] as State;
    c.set(s, (c.get(s) ?? 0) + 1);
  }
  return c;
}

// healthFromSeries reads failing checks from the series the health plugin
// writes, for a server without api/v1/health: vigil_health_check_ok == 0
// gives the failing (node, check) pairs, vigil_health_check_failure their
// reasons.
export function healthFromSeries(notOk: { metric: Record<string, string> }[], failures: { metric: Record<string, string> }[]): Map<string, HealthFailure[]> {
  const reasons = new Map<string, string>();
  for (const f of failures) if (f.metric.node && f.metric.check) reasons.set(f.metric.node + "\u0000" + f.metric.check, f.metric.reason ?? "");
  const out = new Map<string, HealthFailure[]>();
  for (const s of notOk) {
    const { node, check } = s.metric;
    if (!node || !check) continue;
    let l = out.get(node);
    if (!l) out.set(node, (l = []));
    if (!l.some((c) => c.check === check)) l.push({ check, reason: reasons.get(node + "\u0000" + check) || undefined });
  }
  return out;
}

// activeAlerts sorts alerts for the list: firing before pending, critical
// before warning, the oldest first.
export function activeAlerts(alerts: Alert[]): Alert[] {
  const t = (a: Alert) => (a.activeAt ? Date.parse(a.activeAt) || 0 : 0);
  return alerts.filter((a) => a.state === "firing" || a.state === "pending").sort((a, b) =>
    (a.state === "firing" ? 0 : 1) - (b.state === "firing" ? 0 : 1) ||
    (alertSeverity(a) === "critical" ? 0 : 1) - (alertSeverity(b) === "critical" ? 0 : 1) || t(a) - t(b));
}

// mergeEvents adds events to a list kept newest first (by time, then id),
// dropping repeats by id and the oldest beyond max.
export function mergeEvents(list: VigilEvent[], add: VigilEvent[], max: number): VigilEvent[] {
  if (add.length === 0) return list;
  const seen = new Set(list.map((e) => e.id));
  const fresh = add.filter((e) => !seen.has(e.id) && (seen.add(e.id), true));
  if (fresh.length === 0) return list;
  const out = list.concat(fresh).sort((a, b) => b.time - a.time || cmpID(b.id, a.id));
  return out.length > max ? out.slice(0, max) : out;
}

// cmpID compares decimal ids as numbers of any length.
export function cmpID(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

// Event kinds the timeline filters on, with their labels.
export const eventKinds: [string, string][] = [
  ["node_down", "node down"], ["node_up", "node up"], ["health_fail", "check failed"], ["health_pass", "check passed"],
  ["alert_firing", "alert firing"], ["alert_resolved", "alert resolved"], ["log_new_pattern", "new log pattern"],
  ["job_start", "job start"], ["job_end", "job end"], ["failover", "failover"], ["gap", "gap"], ["drain", "drain"], ["resume", "resume"],
];

export function kindLabel(k: string): string {
  return eventKinds.find(([x]) => x === k)?.[1] ?? k;
}

// severityAtLeast turns a minimum severity into the API's comma list.
export function severityAtLeast(min: string): string {
  if (min === "critical") return "critical";
  if (min === "warning") return "warning,critical";
  return "";
}

// stateKinds are the events that change a node's state: one arriving
// makes the view reload the states at once.
export const stateKinds = new Set(["node_down", "node_up", "health_fail", "health_pass", "alert_firing", "alert_resolved", "drain", "resume"]);

// safeLink keeps an event's link only when it is a dashboard route.
export function safeLink(link: string | undefined): string | null {
  return link && /^#\/[\w-]/.test(link) ? link : null;
}

// rfc3339 formats unix ms for the event API's since/until, in whole
// seconds (rounded down, or up with ceil: a bound never cuts off an event).
export function rfc3339(ms: number, ceil = false): string {
  return new Date((ceil ? Math.ceil(ms / 1000) : Math.floor(ms / 1000)) * 1000).toISOString().replace(/\.000Z$/, "Z");
}
