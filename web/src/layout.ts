import type { NodeEntry } from "./frame";

// Nodes are grouped into partitions (a row band each) and racks (a block of
// cells each). Without an explicit group a node named PREFIX<number> goes to
// partition PREFIX, racks of RACK_SIZE counted from 1 as node numbers are
// (cn00001..cn00032 -> rack r1, cn00045 -> r2; a node 0 gets r0). An
// explicit group names the rack; such racks share one partition.
export const RACK_SIZE = 32;

export interface Placement {
  partition: string;
  rack: string;
}

const numbered = /^(.*?)(\d+)$/;

export function placeNode(n: NodeEntry): Placement {
  if (n.group) return { partition: "", rack: n.group };
  const m = numbered.exec(n.name);
  if (!m) return { partition: "other", rack: "other" };
  const prefix = m[1].replace(/[-_.]$/, "") || "nodes";
  const num = parseInt(m[2], 10);
  return { partition: prefix, rack: "r" + (num === 0 ? 0 : Math.floor((num - 1) / RACK_SIZE) + 1) };
}

export interface Rack {
  partition: string;
  label: string;
  nodes: number[]; // node indices, at most RACK_SIZE
  x: number;
  y: number;
}

export interface Layout {
  cell: number; // device px
  pitch: number; // cell + gap
  cols: number; // cells per rack row
  rackW: number;
  rackH: number;
  labelH: number; // rack label band above each rack, 0 when too small
  racks: Rack[];
  partitions: { label: string; y: number }[];
  cellX: Int32Array; // per node, device px
  cellY: Int32Array;
  rackOf: Int32Array;
  width: number;
  height: number;
}

export function groupRacks(nodes: NodeEntry[]): Rack[] {
  const byKey = new Map<string, Rack[]>();
  const racks: Rack[] = [];
  nodes.forEach((n, i) => {
    const p = placeNode(n);
    const key = p.partition + "\u0000" + p.rack;
    let list = byKey.get(key);
    if (!list) {
      list = [];
      byKey.set(key, list);
    }
    let r = list[list.length - 1];
    if (!r || r.nodes.length >= RACK_SIZE) {
      // Oversized groups split into several blocks with the same label.
      r = { partition: p.partition, label: p.rack, nodes: [], x: 0, y: 0 };
      list.push(r);
      racks.push(r);
    }
    r.nodes.push(i);
  });
  // Keep partitions together, in order of first appearance.
  const order = new Map<string, number>();
  racks.forEach((r) => order.has(r.partition) || order.set(r.partition, order.size));
  return racks
    .map((r, i) => ({ r, i }))
    .sort((a, b) => order.get(a.r.partition)! - order.get(b.r.partition)! || a.i - b.i)
    .map((x) => x.r);
}

// computeLayout picks the largest cell size whose layout fits in maxHeight
// (device px), down to a floor where the page scrolls instead.
export function computeLayout(nodes: NodeEntry[], width: number, maxHeight: number, dpr = 1): Layout {
  const racks = groupRacks(nodes);
  const maxRack = Math.max(1, ...racks.map((r) => r.nodes.length));
  const cols = Math.max(1, Math.ceil(Math.sqrt(maxRack / 2)));
  const rows = Math.ceil(maxRack / cols);
  const candidates = [28, 22, 18, 15, 12, 10, 8, 7, 6, 5, 4, 3];
  let best: Layout | null = null;
  for (const css of candidates) {
    const l = place(racks, nodes.length, width, Math.max(2, Math.round(css * dpr)), cols, rows, dpr);
    best = l;
    if (l.height <= maxHeight) break;
  }
  return best!;
}

function place(racks: Rack[], n: number, width: number, cell: number, cols: number, rows: number, dpr: number): Layout {
  const gap = cell >= 8 * dpr ? Math.round(2 * dpr) : Math.max(1, Math.round(dpr));
  const pitch = cell + gap;
  const rackW = cols * pitch - gap;
  const rackH = rows * pitch - gap;
  const rackGap = Math.max(Math.round(6 * dpr), Math.round(cell * 0.75));
  const labelH = cell >= 10 * dpr ? Math.round(13 * dpr) : 0;
  const partH = Math.round(18 * dpr);
  const perRow = Math.max(1, Math.floor((width + rackGap) / (rackW + rackGap)));
  const cellX = new Int32Array(n);
  const cellY = new Int32Array(n);
  const rackOf = new Int32Array(n);
  const partitions: { label: string; y: number }[] = [];
  let y = 0;
  let col = 0;
  let part: string | null = null;
  const out: Rack[] = [];
  racks.forEach((r, ri) => {
    if (r.partition !== part) {
      if (part !== null) y += labelH + rackH + rackGap;
      part = r.partition;
      partitions.push({ label: r.partition, y });
      y += partH;
      col = 0;
    } else if (col === perRow) {
      y += labelH + rackH + rackGap;
      col = 0;
    }
    const rx = col * (rackW + rackGap);
    const ry = y + labelH;
    const placed = { ...r, x: rx, y: ry };
    out.push(placed);
    r.nodes.forEach((ni, k) => {
      cellX[ni] = rx + (k % cols) * pitch;
      cellY[ni] = ry + Math.floor(k / cols) * pitch;
      rackOf[ni] = ri;
    });
    col++;
  });
  const height = racks.length ? y + labelH + rackH + rackGap : 0;
  return { cell, pitch, cols, rackW, rackH, labelH, racks: out, partitions, cellX, cellY, rackOf, width, height };
}

// hitTest returns the node index under device pixel (x, y), or -1.
export function hitTest(l: Layout, x: number, y: number): number {
  for (const r of l.racks) {
    if (x < r.x || y < r.y || x >= r.x + l.rackW || y >= r.y + l.rackH) continue;
    const c = Math.floor((x - r.x) / l.pitch);
    const row = Math.floor((y - r.y) / l.pitch);
    if ((x - r.x) % l.pitch >= l.cell || (y - r.y) % l.pitch >= l.cell) return -1;
    const k = row * l.cols + c;
    return k < r.nodes.length ? r.nodes[k] : -1;
  }
  return -1;
}
