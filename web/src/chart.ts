import uPlot from "uplot";
import { axisLabels, byteIncrs, formatTime, formatValue, type Unit } from "./format";
import { palette, type AlignedData } from "./series";

export interface ChartSpec {
  title: string;
  unit: Unit;
  labels: string[];
  data: AlignedData;
  stepped?: boolean;
  yRange?: [number, number];
  // xRange (unix ms) pins the time axis, so charts of one view line up
  // whatever each one's data covers.
  xRange?: [number, number];
  onZoom?: (startMs: number, endMs: number) => void;
  syncKey?: string;
  plugins?: uPlot.Plugin[]; // e.g. the node view's event annotations
}

// ChartWithLabels keeps the y tick labels last drawn (they are canvas text;
// the browser tests read them here).
export type ChartWithLabels = uPlot & { yLabels?: string[] };

// makeChart draws a uPlot time-series chart that fills el's width and keeps
// doing so on resize. Dragging across it zooms (reported through onZoom).
export function makeChart(el: HTMLElement, spec: ChartSpec): uPlot {
  const axis = { stroke: "#8b949e", grid: { stroke: "#30363d", width: 1 }, ticks: { stroke: "#30363d" } };
  const fmt = (v: number | null) => formatValue(v, spec.unit);
  const opts: uPlot.Options = {
    title: spec.title,
    width: Math.max(300, el.clientWidth),
    height: 200,
    // Zoom goes through the URL (all charts move together), so dragging
    // only selects; setSelect reports it.
    cursor: { drag: { x: true, y: false, setScale: !spec.onZoom }, sync: spec.syncKey ? { key: spec.syncKey } : undefined },
    scales: { x: spec.xRange ? { time: true, range: [spec.xRange[0] / 1000, spec.xRange[1] / 1000] } : { time: true }, y: spec.yRange ? { range: spec.yRange } : { auto: true } },
    legend: { live: true },
    plugins: spec.plugins,
    axes: [
      { ...axis },
      { ...axis, size: 84, values: (u, vals) => ((u as ChartWithLabels).yLabels = axisLabels(vals, spec.unit)),
        incrs: spec.unit === "bytes" || spec.unit === "bytes/s" ? byteIncrs : undefined },
    ],
    series: [
      { value: (_u, v) => (v == null ? "–" : formatTime(v * 1000)) },
      ...spec.labels.map((label, i) => ({
        label,
        stroke: palette[i % palette.length],
        width: 1.5,
        value: (_u: uPlot, v: number | null) => fmt(v),
        paths: spec.stepped ? uPlot.paths.stepped!({ align: 1 }) : undefined,
        spanGaps: false,
      })),
    ],
    hooks: {
      setSelect: [
        (u) => {
          if (u.select.width < 2 || !spec.onZoom) return;
          const a = u.posToVal(u.select.left, "x");
          const b = u.posToVal(u.select.left + u.select.width, "x");
          u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
          spec.onZoom(Math.round(a * 1000), Math.round(b * 1000));
        },
      ],
    },
  };
  const u = new uPlot(opts, spec.data as uPlot.AlignedData, el);
  const ro = new ResizeObserver(() => {
    const w = Math.max(300, el.clientWidth);
    if (w !== u.width) u.setSize({ width: w, height: 200 });
  });
  ro.observe(el);
  const destroy = u.destroy.bind(u);
  u.destroy = () => {
    ro.disconnect();
    destroy();
  };
  return u;
}
