// The Fabric view's model: the answer of api/v1/fabric laid out as the fat
// tree it is (core on top, spines, leaves at the bottom), the two ends of
// each switch-to-switch link merged into one edge, colours by the chosen
// measure, and hit testing. Pure functions, tested in node.
import type { FabricAnswer, FabricLink, FabricSwitch } from "./api";

export type Measure = "util" | "wait" | "errors";
export const measures: { key: Measure; label: string }[] = [
  { key: "util", label: "utilization" },
  { key: "wait", label: "xmit wait" },
  { key: "errors", label: "errors" },
];

export function parseMeasure(s: string | null): Measure {
  return s === "wait" || s === "errors" ? s : "util";
}

// value is what a link is coloured by; a link that is down has none.
export function value(l: FabricLink, m: Measure): number {
  switch (m) {
    case "wait":
      return l.xmit_wait_per_second;
    case "errors":
      return l.errors_per_second;
  }
  return l.utilization;
}

// Edge is one physical switch-to-switch link: both ends' ports (b is
// missing when the other end is not swept), drawn as one line with the
// worse of the two ends' values.
export interface Edge {
  a: FabricLink;
  b?: FabricLink;
  upper: number; // index of the upper switch in Layout.boxes
  lower: number;
  up: boolean;
}

export interface Box {
  sw: FabricSwitch;
  x: number; // centre
  y: number; // top
  w: number;
  h: number;
  // ports: the switch's CA ports (leaves), for the box's fill.
  ca: FabricLink[];
  // label: room in its row for the name under (or over) the box.
  label: boolean;
}

export interface Layout {
  width: number;
  height: number;
  boxes: Box[];
  edges: Edge[];
}

const levelRank: Record<string, number> = { leaf: 0, spine: 1, core: 2 };

export function portKey(guid: string, port: string): string {
  return guid + "/" + port;
}

// layout places the switches in rows by level, each row spread evenly over
// width, and pairs the links' ends into edges.
export function layout(f: FabricAnswer, width: number): Layout {
  const rows = new Map<number, FabricSwitch[]>();
  for (const s of f.switches ?? []) {
    const r = levelRank[s.level] ?? 1;
    if (!rows.has(r)) rows.set(r, []);
    rows.get(r)!.push(s);
  }
  const ranks = [...rows.keys()].sort((a, b) => b - a); // top row first
  const rowGap = 150;
  const top = 24;
  const boxes: Box[] = [];
  const at = new Map<string, number>();
  ranks.forEach((r, ri) => {
    const list = rows.get(r)!;
    const spacing = width / list.length;
    const w = Math.max(3, Math.min(64, spacing * 0.8));
    list.forEach((sw, i) => {
      at.set(sw.guid, boxes.length);
      boxes.push({ sw, x: spacing * (i + 0.5), y: top + ri * rowGap, w, h: 18, ca: [], label: spacing >= 44 });
    });
  });
  const edges: Edge[] = [];
  const pending = new Map<string, number>(); // the far end's port key → edge waiting for it
  for (const l of f.links ?? []) {
    const i = at.get(l.switch_guid);
    if (i === undefined) continue;
    if (l.remote_type === "ca") {
      boxes[i].ca.push(l);
      continue;
    }
    const j = at.get(l.remote_guid);
    if (j === undefined) continue;
    const waiting = pending.get(portKey(l.switch_guid, l.port));
    if (waiting !== undefined) {
      const e = edges[waiting];
      e.b = l;
      e.up = e.up && l.up;
      pending.delete(portKey(l.switch_guid, l.port));
      continue;
    }
    const ri = levelRank[boxes[i].sw.level] ?? 1;
    const rj = levelRank[boxes[j].sw.level] ?? 1;
    const [upper, lower] = ri >= rj ? [i, j] : [j, i];
    edges.push({ a: l, upper, lower, up: l.up });
    pending.set(portKey(l.remote_guid, l.remote_port), edges.length - 1);
  }
  const height = top + Math.max(ranks.length - 1, 0) * rowGap + 18 + 40;
  return { width, height, boxes, edges };
}

// edgeValue is the worse end's value.
export function edgeValue(e: Edge, m: Measure): number {
  return Math.max(value(e.a, m), e.b ? value(e.b, m) : 0);
}

// boxValue is a leaf's worst CA port (0 without any).
export function boxValue(b: Box, m: Measure): number {
  let v = 0;
  for (const l of b.ca) v = Math.max(v, value(l, m));
  return v;
}

// Scale of a measure: utilization is linear 0..1; wait and errors, which
// span orders of magnitude, are logarithmic from 1/s to their top.
export interface Scale {
  lo: number;
  hi: number;
  log: boolean;
}

export function scaleFor(m: Measure, edges: Edge[]): Scale {
  if (m === "util") return { lo: 0, hi: 1, log: false };
  let hi = m === "wait" ? 1e6 : 10;
  for (const e of edges) hi = Math.max(hi, edgeValue(e, m));
  return { lo: 1, hi, log: true };
}

// position maps a value onto 0..1 of its scale; 0 is "nothing".
export function position(v: number, s: Scale): number {
  if (!(v > 0)) return 0;
  if (!s.log) return Math.min(Math.max((v - s.lo) / (s.hi - s.lo), 0), 1);
  if (v <= s.lo) return 0.02;
  return Math.min(Math.log(v / s.lo) / Math.log(s.hi / s.lo), 1);
}

// Green (idle) through yellow to red (saturated, waiting, erring); a link
// that is down is drawn grey and dashed.
const anchors: [number, number, number][] = [
  [46, 160, 67],
  [210, 200, 40],
  [240, 120, 30],
  [230, 40, 40],
];
export const DOWN_COLOUR = "rgb(110,110,120)";

export function colour(p: number): string {
  const x = Math.min(Math.max(p, 0), 1) * (anchors.length - 1);
  const i = Math.min(Math.floor(x), anchors.length - 2);
  const f = x - i;
  const c = [0, 1, 2].map((k) => Math.round(anchors[i][k] + (anchors[i + 1][k] - anchors[i][k]) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// endpoints of an edge: bottom centre of the upper box, top centre of the
// lower one, spread across the box by port so parallel links separate.
export function endpoints(L: Layout, e: Edge): [number, number, number, number] {
  const u = L.boxes[e.upper];
  const d = L.boxes[e.lower];
  return [u.x, u.y + u.h, d.x, d.y];
}

// hitEdge returns the index of the edge nearest to (x, y) within tol
// pixels, or -1.
export function hitEdge(L: Layout, x: number, y: number, tol = 4): number {
  let best = -1;
  let bestD = tol * tol;
  L.edges.forEach((e, i) => {
    const [x1, y1, x2, y2] = endpoints(L, e);
    const dx = x2 - x1;
    const dy = y2 - y1;
    const len = dx * dx + dy * dy;
    const t = len === 0 ? 0 : Math.min(Math.max(((x - x1) * dx + (y - y1) * dy) / len, 0), 1);
    const px = x1 + t * dx - x;
    const py = y1 + t * dy - y;
    const d = px * px + py * py;
    if (d <= bestD) {
      bestD = d;
      best = i;
    }
  });
  return best;
}

// hitBox returns the index of the switch box under (x, y), or -1.
export function hitBox(L: Layout, x: number, y: number): number {
  return L.boxes.findIndex((b) => x >= b.x - b.w / 2 - 1 && x <= b.x + b.w / 2 + 1 && y >= b.y - 1 && y <= b.y + b.h + 1);
}

// drawOrder sorts edges so the worst are drawn last, on top.
export function drawOrder(L: Layout, m: Measure): number[] {
  const v = L.edges.map((e) => (e.up ? edgeValue(e, m) : -1));
  return L.edges.map((_, i) => i).sort((a, b) => v[a] - v[b]);
}

// linkSelector is the PromQL label matcher of one switch port.
export function linkSelector(l: FabricLink): string {
  return `switch_guid=${JSON.stringify(l.switch_guid)},port=${JSON.stringify(l.port)}`;
}

// linkQueries are the per-port charts of a link's counters over time.
export function linkQueries(l: FabricLink, winSec: number): { title: string; unit: "bytes/s" | "none" | "fraction"; expr: string }[] {
  const s = linkSelector(l);
  const win = winSec + "s";
  // rate() of several names at once would give series differing only by
  // the dropped name, which PromQL refuses: the sum's growth instead (the
  // sweeper's counters never go back).
  const data = `label_replace(rate(vigil_ib_port_transmit_data_bytes_total{${s}}[${win}]), "dir", "tx", "", "") or label_replace(rate(vigil_ib_port_receive_data_bytes_total{${s}}[${win}]), "dir", "rx", "", "")`;
  // PortCounters' error series by name, as the API's errors sum: the
  // optional details (receive_*_errors, transmit_discards_*) break these
  // down and would count the same packets twice.
  const errNames = "symbol_errors|receive_errors|receive_remote_physical_errors|receive_switch_relay_errors|transmit_constraint_errors|receive_constraint_errors|local_link_integrity_errors|excessive_buffer_overrun_errors|transmit_discards|link_downed";
  const errs = (mod: string) => `sum by (switch_guid, port) ({__name__=~"vigil_ib_port_(${errNames})_total",${s}}${mod})`;
  return [
    { title: "Data (bytes/s)", unit: "bytes/s", expr: data },
    // As the API: the busier direction over the capacity.
    { title: "Utilization", unit: "fraction", expr: `max by (switch_guid, port) (${data}) / max by (switch_guid, port) (vigil_ib_port_rate_bytes_per_second{${s}})` },
    { title: "Xmit wait (ticks/s)", unit: "none", expr: `rate(vigil_ib_port_transmit_wait_total{${s}}[${win}])` },
    // Per VL where the switch answers PortVLXmitWaitCounters (docs/fabric.md).
    { title: "Xmit wait by VL (ticks/s)", unit: "none", expr: `max by (vl) (rate(vigil_ib_port_vl_transmit_wait_total{${s}}[${win}]))` },
    { title: "Errors (/s)", unit: "none", expr: `(${errs("")} - ${errs(" offset " + win)}) / ${winSec} >= 0` },
    { title: "Up", unit: "none", expr: `vigil_ib_port_up{${s}}` },
  ];
}

// Matrix is the links as a grid for fabrics too dense to read as lines:
// a row per upper switch, a column per lower one, each cell the worst of
// the cables between the two (cell index → edge indexes).
export interface Matrix {
  rows: number[]; // box indexes of the upper switches
  cols: number[]; // box indexes of the lower switches
  cells: Map<number, number[]>; // row * cols.length + col → edges
  cw: number; // cell width and height, px
  ch: number;
  left: number; // room for the row names
  width: number;
  height: number;
}

// matrix lays the edges out as a grid of at most width px.
export function matrix(L: Layout, width: number): Matrix {
  const rowOf = new Map<number, number>();
  const colOf = new Map<number, number>();
  const rows: number[] = [];
  const cols: number[] = [];
  // In the tree's order: left to right as drawn above.
  const byX = L.edges.map((_, i) => i).sort((a, b) => L.boxes[L.edges[a].lower].x - L.boxes[L.edges[b].lower].x);
  for (const i of byX) {
    const e = L.edges[i];
    if (!colOf.has(e.lower)) colOf.set(e.lower, cols.push(e.lower) - 1);
  }
  for (const i of L.edges.map((_, i) => i).sort((a, b) => L.boxes[L.edges[a].upper].y - L.boxes[L.edges[b].upper].y || L.boxes[L.edges[a].upper].x - L.boxes[L.edges[b].upper].x)) {
    const e = L.edges[i];
    if (!rowOf.has(e.upper)) rowOf.set(e.upper, rows.push(e.upper) - 1);
  }
  const left = 70;
  const cw = Math.max(2, Math.min(24, Math.floor((width - left) / Math.max(cols.length, 1))));
  const ch = Math.max(4, Math.min(16, cw * 2));
  const cells = new Map<number, number[]>();
  L.edges.forEach((e, i) => {
    const k = rowOf.get(e.upper)! * cols.length + colOf.get(e.lower)!;
    if (!cells.has(k)) cells.set(k, []);
    cells.get(k)!.push(i);
  });
  return { rows, cols, cells, cw, ch, left, width: left + cw * cols.length, height: ch * rows.length };
}

// hitCell returns the edges of the cell under (x, y), or null.
export function hitCell(M: Matrix, x: number, y: number): number[] | null {
  const c = Math.floor((x - M.left) / M.cw);
  const r = Math.floor(y / M.ch);
  if (x < M.left || c >= M.cols.length || r < 0 || r >= M.rows.length) return null;
  return M.cells.get(r * M.cols.length + c) ?? null;
}

// worstEdge is the edge of list with the highest value (a down one first).
export function worstEdge(L: Layout, list: number[], m: Measure): number {
  let best = list[0];
  for (const i of list) {
    const e = L.edges[i];
    const b = L.edges[best];
    if ((!e.up && b.up) || (e.up === b.up && edgeValue(e, m) > edgeValue(b, m))) best = i;
  }
  return best;
}
