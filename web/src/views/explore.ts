import type uPlot from "uplot";
import { makeChart } from "../chart";
import { ApiError, instantQuery, isAbort, rangeQuery } from "../api";
import { h, type ViewContext } from "../dom";
import { formatLabels, formatTime, formatValue } from "../format";
import { stepFor, timeRange } from "../route";
import { alignSeries } from "../series";
import { refreshMs, refreshPicker, timePicker } from "./timepicker";
import { counterHint, isRangeSelector, rangeHint } from "../promhint";

const maxChartSeries = 30;
const maxRows = 500;

// exploreView runs the query as a range query (chart) and an instant query
// at the range's end (table).
export function exploreView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const q = route.params.get("q") ?? "";
  let r = timeRange(route.params, Date.now());
  const state = { runs: 0 };
  expose({ explore: state });
  let chart: uPlot | null = null;

  const input = h("textarea.promql", { rows: 3, spellcheck: "false", placeholder: 'PromQL, e.g. topk(10, node_load1) — Ctrl+Enter runs' });
  input.value = q;
  const go = (from?: string, to?: string, expr = input.value.trim()) => {
    const p = new URLSearchParams(route.params);
    p.set("q", expr);
    if (from) p.set("from", from);
    if (to) p.set("to", to);
    navigate({ view: "explore", params: p });
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      go();
    }
  });
  const msg = h("div.error", { hidden: true });
  // A counter's raw total is shown as asked (as Grafana does), with the
  // rate one click away; rate(x) without a range gets the same offer.
  const suggestion = counterHint(q) ?? rangeHint(q);
  const hint = h("div.hint", { hidden: !suggestion },
    "This is a counter; its per-second rate is usually what you want: ",
    h("button.apply-hint", { onclick: () => suggestion && go(undefined, undefined, suggestion) }, suggestion ?? ""));
  const chartBox = h("div.chart.wide");
  const table = h("div.result");
  const el = h("section.view.explore-view", null,
    h("div.toolbar", null, h("h2", null, "Explore"), timePicker(route.params, r, (a, b) => go(a, b)),
      refreshPicker(route.params, "off", (v) => {
        const p = new URLSearchParams(route.params);
        p.set("refresh", v);
        navigate({ view: "explore", params: p });
      })),
    h("div.query-row", null, input, h("button.run", { onclick: () => go() }, "Run")),
    hint, msg, chartBox, table,
  );
  // Both queries usually fail for the same reason (a parse error): each
  // distinct reason is shown once.
  const shown = new Set<string>();
  const fail = (e: Error) => {
    if (isAbort(e)) return;
    const reason = e instanceof ApiError ? e.reason : e.message;
    if (shown.has(reason)) return;
    shown.add(reason);
    msg.append(h("div", null, "Query failed: " + reason));
    msg.hidden = false;
  };

  const run = () => {
    const step = stepFor(r);
    // A range selector (x[5m]) cannot be graphed over time; its samples
    // are in the table, which is no reason for an error.
    const a = isRangeSelector(q) ? Promise.resolve(chartBox.replaceChildren(h("div.chart-msg", null, "a range selector has no graph over time; its samples are in the table below"))) : rangeQuery(q, r.start, r.end, step, { signal }).then((series) => {
      chart?.destroy();
      chart = null;
      chartBox.classList.remove("has-data");
      if (series.length === 0) {
        chartBox.replaceChildren(h("div.chart-msg", null, "no data in this range"));
        return;
      }
      const shown = series.slice(0, maxChartSeries);
      const labels = shown.map((s) => formatLabels(s.metric));
      chart = makeChart(chartBox, {
        title: series.length > maxChartSeries ? `first ${maxChartSeries} of ${series.length} series` : "",
        unit: "none", labels, data: alignSeries(shown), xRange: [r.start, r.end], onZoom: (a, b) => go(String(a), String(b)),
      });
      chartBox.classList.add("has-data");
    }).catch(fail);

    const b = instantQuery(q, r.end, { signal }).then((d) => {
      const rows: [string, string][] = [];
      switch (d.resultType) {
        case "vector":
          for (const s of d.result) rows.push([formatLabels(s.metric), s.value[1]]);
          break;
        case "matrix":
          for (const s of d.result) rows.push([formatLabels(s.metric), s.values.map((v) => v[1]).join(", ")]);
          break;
        case "scalar":
        case "string":
          rows.push([d.resultType, d.result[1]]);
      }
      table.replaceChildren(
        h("p.muted", null, `${rows.length} result${rows.length === 1 ? "" : "s"} at ${formatTime(r.end)}` + (rows.length > maxRows ? `, first ${maxRows} shown` : "")),
        h("table.data.results", null,
          h("thead", null, h("tr", null, h("th", null, "series"), h("th", null, "value"))),
          h("tbody", null, rows.slice(0, maxRows).map(([l, v]) => {
            const f = parseFloat(v);
            return h("tr", null, h("td.labels", null, l), h("td.num", { title: v }, Number.isFinite(f) ? formatValue(f) : v));
          })),
        ),
      );
    }).catch(fail);
    return Promise.all([a, b]).then(() => void state.runs++);
  };
  if (q) {
    // Refresh re-runs the queries over the moved range, one run at a time.
    const every = refreshMs(route.params, "off");
    let timer = 0;
    const loop = () => {
      run().finally(() => {
        if (every > 0 && !signal.aborted) timer = window.setTimeout(() => {
          r = timeRange(route.params, Date.now());
          loop();
        }, every);
      });
    };
    loop();
    signal.addEventListener("abort", () => clearTimeout(timer));
  } else {
    table.replaceChildren(h("p.muted", null, "Type a PromQL expression and press Run."));
  }
  root.append(el);
  return () => chart?.destroy();
}
