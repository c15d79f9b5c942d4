import { h } from "./dom";

// The job report's energy section (internal/jobs/report/energy.go).
export interface NodeEnergy {
  node: string;
  joules: number; // the job's share
  node_joules: number; // the whole node
  share: number; // the job's CPUs over the node's, 0..1
  source: string; // rapl, hwmon_energy, hwmon_power
}

export interface JobEnergy {
  joules: number;
  node_joules: number;
  shared: boolean;
  nodes: NodeEnergy[];
  missing?: string[];
  folded?: number; // nodes a stored summary left out of nodes (in the totals)
}

const num = (v: unknown): number => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0);

// validEnergy keeps the section when it has the expected shape; values
// that are not finite and positive count as 0, at most 2000 nodes are shown.
export function validEnergy(x: unknown): JobEnergy | null {
  const e = x as JobEnergy | null | undefined;
  if (!e || typeof e !== "object" || !Array.isArray(e.nodes)) return null;
  const nodes = e.nodes.filter((n) => n && typeof n.node === "string").slice(0, 2000).map((n) => ({
    node: n.node, joules: num(n.joules), node_joules: num(n.node_joules), share: Math.min(1, num(n.share)),
    source: typeof n.source === "string" ? n.source : "",
  }));
  if (nodes.length === 0) return null;
  const missing = Array.isArray(e.missing) ? e.missing.filter((m) => typeof m === "string").slice(0, 2000) : [];
  return { joules: num(e.joules), node_joules: num(e.node_joules), shared: e.shared === true, nodes, missing,
    folded: Math.floor(num(e.folded)) };
}

// formatJoules: J, kJ, MJ, GJ with three significant digits.
export function formatJoules(j: number): string {
  const units = ["J", "kJ", "MJ", "GJ", "TJ"];
  let i = 0;
  while (j >= 1000 && i < units.length - 1) { j /= 1000; i++; }
  return `${Number(j.toPrecision(3))} ${units[i]}`;
}

// energySection: the job's energy, its mean power over the run, and each
// node's part; on shared nodes the split by CPU share is said.
export function energySection(e: JobEnergy | null, run: { start: number; end: number } | null): HTMLElement | null {
  if (!e) return null;
  const seconds = run ? (run.end - run.start) / 1000 : 0;
  const mean = seconds > 0 ? ` — mean ${Math.round(e.joules / seconds)} W over the run` : "";
  return h("div.job-energy", null, h("h3", null, "Energy"),
    h("p", null, `${formatJoules(e.joules)} (${(e.joules / 3.6e6).toFixed(2)} kWh)${mean}`),
    e.shared ? h("p.muted", null, "Some nodes ran other jobs too: each such node's energy is split by this job's share of its CPUs.") : null,
    h("table.data", null,
      h("thead", null, h("tr", null, ["node", "CPU share", "job", "node total", "source"].map((c) => h("th", null, c)))),
      h("tbody", null, e.nodes.map((n) => h("tr", { "data-node": n.node },
        h("td", null, n.node), h("td.num", null, `${Math.round(n.share * 100)} %`),
        h("td.num", null, formatJoules(n.joules)), h("td.num", null, formatJoules(n.node_joules)), h("td", null, n.source))))),
    e.folded ? h("p.muted", null, `${e.folded} more nodes are in the totals but not listed (the stored summary keeps 64).`) : null);
}
