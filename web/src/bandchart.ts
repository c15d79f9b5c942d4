import uPlot from "uplot";
import { axisLabels, byteIncrs, formatTime, formatValue, type Unit } from "./format";
import type { BandData } from "./jobs";

export const straggleColour = "#f85149";
const medianColour = "#58a6ff";
const nodeColour = "#8b949e";

// BandChart is a uPlot chart with the per-node state the browser tests read.
export type BandChart = uPlot & { yLabels?: string[]; nodeLines?: () => boolean };

// makeBandChart draws a job metric: the p10–p90 band, the median, and a
// line per node that shows while the pointer is over the chart (the nearest
// one named in the readout); straggler nodes are always drawn, in red.
export function makeBandChart(el: HTMLElement, title: string, unit: Unit, b: BandData, flagged: Set<string>, xRange?: [number, number]): BandChart {
  const axis = { stroke: "#8b949e", grid: { stroke: "#30363d", width: 1 }, ticks: { stroke: "#30363d" } };
  const fmt = (_u: uPlot, v: number | null) => formatValue(v, unit);
  const readout = el.querySelector<HTMLElement>(".node-readout");
  const opts: uPlot.Options = {
    title,
    width: Math.max(300, el.clientWidth),
    height: 220,
    cursor: { drag: { x: false, y: false }, focus: { prox: 16 } },
    focus: { alpha: 0.35 },
    scales: { x: xRange ? { time: true, range: [xRange[0] / 1000, xRange[1] / 1000] } : { time: true }, y: { auto: true } },
    legend: { live: true },
    axes: [
      { ...axis },
      { ...axis, size: 84, values: (u, vals) => ((u as BandChart).yLabels = axisLabels(vals, unit)),
        incrs: unit === "bytes" || unit === "bytes/s" ? byteIncrs : undefined },
    ],
    series: [
      { value: (_u, v) => (v == null ? "–" : formatTime(v * 1000)) },
      { label: "p90", stroke: "#1f6feb55", width: 1, value: fmt },
      { label: "median", stroke: medianColour, width: 2, value: fmt },
      { label: "p10", stroke: "#1f6feb55", width: 1, value: fmt },
      ...b.nodes.map((n) => {
        const bad = flagged.has(n);
        return { label: n, stroke: bad ? straggleColour : nodeColour, width: bad ? 2.5 : 1, dash: bad ? [6, 3] : undefined, show: bad, value: fmt, spanGaps: false };
      }),
    ],
    bands: [{ series: [1, 3], fill: "#1f6feb33" }],
    hooks: {
      setSeries: [
        (u, i) => {
          if (!readout) return;
          const s = i !== null && i >= 4 ? u.series[i] : null;
          readout.textContent = s ? `${s.label}${flagged.has(String(s.label)) ? " (straggler)" : ""}` : "";
        },
      ],
    },
  };
  const u = new uPlot(opts, b.data as uPlot.AlignedData, el) as BandChart;
  // Only the statistics and the stragglers take a legend row; the other
  // nodes are many and appear on hover.
  const rows = u.root.querySelectorAll<HTMLElement>(".u-legend .u-series");
  b.nodes.forEach((n, i) => {
    if (!flagged.has(n) && rows[4 + i]) rows[4 + i].style.display = "none";
    else rows[4 + i]?.classList.add("straggler");
  });
  let shown = false;
  const showNodes = (on: boolean) => {
    if (on === shown) return;
    shown = on;
    u.batch(() => b.nodes.forEach((n, i) => !flagged.has(n) && u.setSeries(4 + i, { show: on })));
  };
  u.over.addEventListener("mouseenter", () => showNodes(true));
  u.over.addEventListener("mouseleave", () => showNodes(false));
  u.nodeLines = () => shown;
  const ro = new ResizeObserver(() => {
    const w = Math.max(300, el.clientWidth);
    if (w !== u.width) u.setSize({ width: w, height: 220 });
  });
  ro.observe(el);
  const destroy = u.destroy.bind(u);
  u.destroy = () => {
    ro.disconnect();
    destroy();
  };
  return u;
}
