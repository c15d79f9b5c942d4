// Event annotations on the node view's charts: each event of the node a
// vertical line at its time, coloured by severity, with a tooltip (kind,
// summary, time) when the pointer is near it. One plugin per chart reads
// the view's current markers, so new events need only a redraw.
import type uPlot from "uplot";
import type { VigilEvent } from "./api";
import { formatTime } from "./format";
import { kindLabel } from "./status";

export const severityColour: Record<string, string> = { info: "#58a6ff", warning: "#d29922", critical: "#f85149" };

export interface Placed {
  x: number; // css px from the plot area's left
  e: VigilEvent;
}

// placeMarkers keeps the events inside [min, max] (unix s) and maps each to
// x with toX, sorted by x.
export function placeMarkers(events: VigilEvent[], min: number, max: number, toX: (sec: number) => number): Placed[] {
  const out: Placed[] = [];
  for (const e of events) {
    const t = e.time / 1000;
    if (t < min || t > max) continue;
    out.push({ x: toX(t), e });
  }
  return out.sort((a, b) => a.x - b.x);
}

// nearest returns the markers within tol px of x (several events at one
// moment share a tooltip), nearest first; placed is sorted by x.
export function nearest(placed: Placed[], x: number, tol: number): Placed[] {
  let lo = 0, hi = placed.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (placed[m].x < x - tol) lo = m + 1;
    else hi = m;
  }
  const out: Placed[] = [];
  for (let i = lo; i < placed.length && placed[i].x <= x + tol; i++) out.push(placed[i]);
  return out.sort((a, b) => Math.abs(a.x - x) - Math.abs(b.x - x));
}

// AnnotatedChart is a chart with its markers as last drawn (browser tests).
export type AnnotatedChart = uPlot & { annotations?: Placed[] };

// annotationPlugin draws events() on the chart after its series.
export function annotationPlugin(events: () => VigilEvent[]): uPlot.Plugin {
  let tip: HTMLElement | null = null;
  // Cursors of the node view's charts move together; the tooltip shows on
  // the chart under the pointer only.
  let over = false;
  return {
    hooks: {
      init: [(u) => {
        tip = document.createElement("div");
        tip.className = "ann-tip";
        tip.hidden = true;
        u.over.append(tip);
        u.over.addEventListener("mouseenter", () => (over = true));
        u.over.addEventListener("mouseleave", () => {
          over = false;
          if (tip) tip.hidden = true;
        });
      }],
      draw: [(u) => {
        const min = u.scales.x.min, max = u.scales.x.max;
        const placed = min == null || max == null ? [] : placeMarkers(events(), min, max, (t) => u.valToPos(t, "x"));
        (u as AnnotatedChart).annotations = placed;
        if (placed.length === 0) return;
        const ctx = u.ctx;
        const dpr = window.devicePixelRatio || 1;
        const { top, height } = u.bbox;
        ctx.save();
        ctx.lineWidth = Math.max(1, Math.round(2 * dpr));
        for (const p of placed) {
          const x = Math.round(u.valToPos(p.e.time / 1000, "x", true));
          ctx.strokeStyle = severityColour[p.e.severity] ?? severityColour.info;
          ctx.fillStyle = ctx.strokeStyle;
          // Recoveries (up, pass, resolved, end, resume) dashed.
          ctx.setLineDash(/_(up|pass|resolved|end)$|^resume$/.test(p.e.kind) ? [4 * dpr, 3 * dpr] : []);
          ctx.beginPath();
          ctx.moveTo(x, top);
          ctx.lineTo(x, top + height);
          ctx.stroke();
          ctx.fillRect(x - 3 * dpr, top, 6 * dpr, 6 * dpr);
        }
        ctx.restore();
      }],
      setCursor: [(u) => {
        if (!tip) return;
        const x = u.cursor.left ?? -1;
        const hits = x < 0 || !over ? [] : nearest((u as AnnotatedChart).annotations ?? [], x, 5);
        if (hits.length === 0) {
          tip.hidden = true;
          return;
        }
        tip.replaceChildren(...hits.slice(0, 5).flatMap((p, i) => {
          const line = `${formatTime(p.e.time)} ${kindLabel(p.e.kind)} (${p.e.severity})${p.e.summary ? ": " + p.e.summary : ""}`;
          return i ? [document.createElement("br"), line] : [line];
        }));
        tip.hidden = false;
        const w = u.over.clientWidth;
        tip.style.top = "4px";
        // Left of the marker in the right half, so the tip stays inside.
        if (hits[0].x > w / 2) {
          tip.style.left = "";
          tip.style.right = w - hits[0].x + 8 + "px";
        } else {
          tip.style.right = "";
          tip.style.left = hits[0].x + 8 + "px";
        }
      }],
    },
  };
}
