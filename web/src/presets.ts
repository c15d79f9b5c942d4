import type { Unit } from "./format";

export interface Preset {
  id: string;
  label: string;
  expr: string;
  unit: Unit;
  // range is the fixed colour scale of the heatmap (lo, hi); none means
  // auto (each frame's min..max), for metrics without a natural ceiling.
  range?: [number, number];
}

export const presets: Preset[] = [
  { id: "cpu", label: "CPU busy", unit: "fraction", range: [0, 1], expr: '1 - avg by (node)(rate(node_cpu_seconds_total{mode="idle"}[30s]))' },
  { id: "mem", label: "Memory used", unit: "fraction", range: [0, 1], expr: "1 - node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes" },
  { id: "load1", label: "Load (1m)", unit: "none", expr: "node_load1" },
  { id: "netrx", label: "Network rx", unit: "bytes/s", range: [0, 1.25e9], expr: 'sum by (node)(rate(node_network_receive_bytes_total{device!="lo"}[30s]))' },
  { id: "diskread", label: "Disk read", unit: "bytes/s", range: [0, 1e9], expr: "sum by (node)(rate(node_disk_read_bytes_total[30s]))" },
  // Application I/O from libvigilio / vigil iofs (the appio plugin).
  { id: "appio", label: "App I/O rate", unit: "bytes/s", expr: "sum by (node) (rate(vigil_appio_bytes_total[1m]))" },
  { id: "appiometa", label: "App metadata ops", unit: "none", expr: 'sum by (node) (rate(vigil_appio_calls_total{op=~"open|close|stat|meta|seek|sync"}[1m]))' },
];

// selected resolves ?m=ID or ?expr=PROMQL (expr wins) to what to stream.
export function selected(p: URLSearchParams): { preset?: Preset; expr: string; unit: Unit } {
  const expr = p.get("expr");
  if (expr) return { expr, unit: "none" };
  const pr = presets.find((x) => x.id === p.get("m")) ?? presets[0];
  return { preset: pr, expr: pr.expr, unit: pr.unit };
}
