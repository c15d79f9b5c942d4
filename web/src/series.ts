import type { MatrixSeries } from "./api";

// AlignedData is uPlot's column layout: x (seconds) then one array per series.
export type AlignedData = [number[], ...(number | null)[][]];

// alignSeries merges the timestamps of all series and fills gaps with null.
// A gap longer than 1.5 steps stays a gap in the chart.
export function alignSeries(series: MatrixSeries[]): AlignedData {
  const ts = new Set<number>();
  for (const s of series) for (const [t] of s.values) ts.add(t);
  const xs = [...ts].sort((a, b) => a - b);
  const index = new Map<number, number>();
  xs.forEach((t, i) => index.set(t, i));
  const cols = series.map((s) => {
    const col: (number | null)[] = new Array(xs.length).fill(null);
    for (const [t, v] of s.values) {
      const f = parseFloat(v);
      col[index.get(t)!] = Number.isFinite(f) ? f : null;
    }
    return col;
  });
  return [xs, ...cols];
}

export const palette = [
  "#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9", "#705da0",
  "#508642", "#cca300", "#447ebc", "#c15c17", "#890f02", "#0a437c", "#6d1f62", "#584477",
];
