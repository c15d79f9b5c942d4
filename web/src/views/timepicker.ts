import { h } from "../dom";
import { formatTime } from "../format";
import type { TimeRange } from "../route";

export const rangeChoices = ["now-15m", "now-1h", "now-6h", "now-24h", "now-7d"];

// timePicker offers relative ranges; an absolute (zoomed) range shows as its
// own entry. onPick receives from/to strings for the URL.
export function timePicker(p: URLSearchParams, r: TimeRange, onPick: (from: string, to: string) => void, zoomHint = true): HTMLElement {
  const from = p.get("from") ?? "now-1h";
  const to = p.get("to") ?? "now";
  const sel = h("select", { "aria-label": "time range" },
    rangeChoices.map((c) => h("option", { value: c }, "last " + c.slice(4))),
  );
  const relative = to === "now" && rangeChoices.includes(from);
  if (!relative) {
    sel.append(h("option", { value: "custom" }, `${formatTime(r.start)} → ${formatTime(r.end)}`));
    sel.value = "custom";
  } else sel.value = from;
  sel.addEventListener("change", () => sel.value !== "custom" && onPick(sel.value, "now"));
  const back = h("button", { title: "zoom out ×2", onclick: () => {
    const span = r.end - r.start;
    const end = Math.min(Date.now(), r.end + span / 2);
    onPick(String(Math.round(end - 2 * span)), String(Math.round(end)));
  } }, "zoom out");
  return h("span.timepicker", null, sel, back, zoomHint && h("span.hint", null, "drag on a chart to zoom"));
}

export const refreshChoices = ["off", "5s", "10s", "30s", "1m", "5m"];

// refreshPicker offers auto-refresh periods, as Grafana's; the choice goes
// to the URL (?refresh=). It applies only to a range ending "now": an
// absolute range does not move.
export function refreshPicker(p: URLSearchParams, def: string, onPick: (every: string) => void): HTMLElement {
  const sel = h("select", { "aria-label": "refresh" }, refreshChoices.map((c) => h("option", { value: c }, c === "off" ? "refresh off" : "every " + c)));
  sel.value = refreshOf(p, def);
  sel.addEventListener("change", () => onPick(sel.value));
  return sel;
}

// refreshOf returns the refresh period chosen in p, else def.
export function refreshOf(p: URLSearchParams, def: string): string {
  const v = p.get("refresh");
  return v !== null && refreshChoices.includes(v) ? v : def;
}

// refreshMs is the period in ms, 0 for off or when the range is absolute.
export function refreshMs(p: URLSearchParams, def: string): number {
  if ((p.get("to") ?? "now") !== "now") return 0;
  const v = refreshOf(p, def);
  if (v === "off") return 0;
  return parseInt(v, 10) * (v.endsWith("m") ? 60e3 : 1e3);
}
