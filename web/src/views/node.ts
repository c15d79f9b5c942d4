import type uPlot from "uplot";
import { makeChart, type ChartWithLabels } from "../chart";
import { ApiError, healthStatus, instantQuery, isAbort, listAlerts, listEvents, listJobs, rangeQuery, series, type Alert, type HealthFailure, type Job, type Labels, type MatrixSeries, type VigilEvent } from "../api";
import { annotationPlugin, type AnnotatedChart } from "../annotations";
import { alertSeverity, healthFromSeries, rfc3339 } from "../status";
import { h, promString, type ViewContext } from "../dom";
import { formatLabels, formatValue, type Unit } from "../format";
import { stepFor, timeRange, type TimeRange } from "../route";
import { alignSeries } from "../series";
import { efficiency, formatEfficiency, runTime } from "../jobs";
import { refreshMs, refreshPicker, timePicker } from "./timepicker";

// The node view follows "now" by itself unless told otherwise.
const defaultRefresh = "10s";

interface Panel {
  title: string;
  unit: Unit;
  queries: { expr: (sel: string, w: string) => string; label: (m: Labels) => string }[];
  stepped?: boolean;
  yRange?: [number, number];
}

const panels: Panel[] = [
  { title: "CPU by mode", unit: "fraction", queries: [
    { expr: (s, w) => `avg by (mode)(rate(node_cpu_seconds_total{${s},mode!="idle"}[${w}]))`, label: (m) => m.mode ?? "cpu" },
  ] },
  { title: "Memory", unit: "bytes", queries: [
    { expr: (s) => `node_memory_MemTotal_bytes{${s}} - node_memory_MemAvailable_bytes{${s}}`, label: () => "used" },
    { expr: (s) => `node_memory_MemTotal_bytes{${s}}`, label: () => "total" },
  ] },
  { title: "Load", unit: "none", queries: [
    { expr: (s) => `{__name__=~"node_load(1|5|15)",${s}}`, label: (m) => (m.__name__ ?? "load").replace("node_", "") },
  ] },
  { title: "Network", unit: "bytes/s", queries: [
    { expr: (s, w) => `rate(node_network_receive_bytes_total{${s},device!="lo"}[${w}])`, label: (m) => "rx " + (m.device ?? "") },
    { expr: (s, w) => `rate(node_network_transmit_bytes_total{${s},device!="lo"}[${w}])`, label: (m) => "tx " + (m.device ?? "") },
  ] },
  { title: "Disk", unit: "bytes/s", queries: [
    { expr: (s, w) => `rate(node_disk_read_bytes_total{${s}}[${w}])`, label: (m) => "read " + (m.device ?? "") },
    { expr: (s, w) => `rate(node_disk_written_bytes_total{${s}}[${w}])`, label: (m) => "write " + (m.device ?? "") },
  ] },
  { title: "Up", unit: "none", stepped: true, yRange: [0, 1.05], queries: [
    { expr: (s) => `up{${s}}`, label: () => "up" },
  ] },
];

// nodeView: one node's history charts, its up badge and top processes,
// refreshed every ?refresh= period (default 10s) while the range ends now.
export function nodeView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const node = route.node!;
  const sel = `node=${promString(node)}`;
  let r = timeRange(route.params, Date.now());
  const charts = new Map<string, { u: uPlot; labels: string }>();
  // For the browser tests: per chart, its series and non-empty points; and
  // how many times the view has loaded.
  const drawn: { title: string; series: number; points: number }[] = [];
  const state = {
    loads: 0,
    missing: false,
    xRanges: () => [...charts.values()].map((c) => [c.u.scales.x.min, c.u.scales.x.max]),
    yLabels: (title: string) => (charts.get(title)?.u as ChartWithLabels | undefined)?.yLabels ?? [],
    // Per chart, the event markers drawn: css x in the plot, canvas x.
    annotations: (title: string) => {
      const u = charts.get(title)?.u as AnnotatedChart | undefined;
      return (u?.annotations ?? []).map((p) => ({ x: p.x, cx: u!.valToPos(p.e.time / 1000, "x", true), kind: p.e.kind, severity: p.e.severity }));
    },
    events: 0,
  };
  expose({ charts: drawn, node: state });

  const go = (p: URLSearchParams) => navigate({ view: "node", node, params: p });
  const pick = (from: string, to: string) => {
    const p = new URLSearchParams(route.params);
    p.set("from", from);
    p.set("to", to);
    go(p);
  };
  const badge = h("span.badge", null, "…");
  const grid = h("div.charts");
  const procs = h("div.procs", null, "loading…");
  const jobs = h("div.node-jobs", null, "loading…");
  const updated = h("span.muted.updated");
  // The node's events in the range, drawn on every chart.
  let marks: VigilEvent[] = [];
  const now = h("div.node-now", null, h("span.muted", null, "checks and alerts: loading…"));
  const annCount = h("span.muted.ann-count");
  const el = h("section.view.node-view", null,
    h("div.toolbar", null,
      h("a", { href: "#/heatmap" }, "← heatmap"),
      h("h2", null, node), badge, timePicker(route.params, r, pick),
      refreshPicker(route.params, defaultRefresh, (v) => {
        const p = new URLSearchParams(route.params);
        p.set("refresh", v);
        go(p);
      }), updated),
    now, grid, annCount,
    h("h3", null, "Jobs (current and last 24 h)"), jobs,
    h("h3", null, "Top processes"), procs,
  );
  const boxes = panels.map((p) => {
    const box = h("div.chart", { "data-title": p.title }, h("div.chart-title", null, p.title), h("div.chart-msg", null, "loading…"));
    grid.append(box);
    return box;
  });

  const loadPanel = (p: Panel, box: HTMLElement, r: TimeRange) => {
    const step = stepFor(r);
    const win = Math.max(4 * step, 30) + "s";
    return Promise.all(p.queries.map(async (q) => {
      const res = await rangeQuery(q.expr(sel, win), r.start, r.end, step, { signal });
      return res.map((s) => ({ s, label: q.label(s.metric) }));
    })).then((parts) => {
      const all = parts.flat().sort((a, b) => a.label.localeCompare(b.label, undefined, { numeric: true }));
      const data = alignSeries(all.map((x) => x.s as MatrixSeries));
      const labels = all.map((x) => x.label).join("\u0000");
      const old = charts.get(p.title);
      const i = drawn.findIndex((d) => d.title === p.title);
      if (i >= 0) drawn.splice(i, 1);
      if (old && old.labels === labels) {
        // Same series: new data in place, no flicker.
        old.u.setData(data as uPlot.AlignedData, false);
        old.u.setScale("x", { min: r.start / 1000, max: r.end / 1000 });
      } else {
        old?.u.destroy();
        charts.delete(p.title);
        box.replaceChildren();
        box.classList.remove("has-data");
        if (all.length === 0) {
          box.append(h("div.chart-title", null, p.title), h("div.chart-msg", null, "no data in this range"));
          return;
        }
        charts.set(p.title, { labels, u: makeChart(box, {
          title: p.title, unit: p.unit, labels: all.map((x) => x.label), data, stepped: p.stepped, yRange: p.yRange,
          xRange: [r.start, r.end], syncKey: "node", onZoom: (a, b) => pick(String(a), String(b)),
          plugins: [annotationPlugin(() => marks)],
        }) });
        box.classList.add("has-data");
      }
      drawn.push({ title: p.title, series: all.length, points: data.slice(1).reduce((n, ys) => n + ys.filter((y) => y !== null).length, 0) });
    }).catch((e: Error) => {
      if (isAbort(e)) return;
      box.replaceChildren(h("div.chart-title", null, p.title), h("div.chart-msg.error", null, e.message));
    });
  };

  const load = async () => {
    // A name no node has reported under is a typo or a stale link: say so
    // instead of six empty panels.
    const known = await series([`up{${sel}}`], r.start, r.end, { signal }).catch((e: Error) => (isAbort(e) ? null : [{}]));
    if (known === null) return;
    if (known.length === 0) {
      state.missing = true;
      el.replaceChildren(h("div.toolbar", null, h("a", { href: "#/heatmap" }, "← heatmap"), h("h2", null, node), timePicker(route.params, r, pick)),
        h("div.error.no-such-node", null, `No such node: "${node}" has sent no data in this range.`));
      return;
    }
    state.missing = false;
    await Promise.all([
      ...panels.map((p, i) => loadPanel(p, boxes[i], r)),
      instantQuery(`up{${sel}}`, r.end, { signal }).then((d) => {
        const v = d.resultType === "vector" && d.result[0] ? parseFloat(d.result[0].value[1]) : NaN;
        badge.textContent = Number.isNaN(v) ? "unknown" : v >= 1 ? "up" : "down";
        badge.className = "badge " + (Number.isNaN(v) ? "" : v >= 1 ? "up" : "down");
      }).catch(() => (badge.textContent = "unknown")),
      // The index's node filter (api/v1/jobs?node=): a server without
      // a job index answers 404, said as "no job index".
      listJobs(new URLSearchParams({ node, since: "24h", limit: "50" }), { signal }).then((l) => jobs.replaceChildren(jobTable(l, node))).catch((e: Error) => {
        if (!isAbort(e)) jobs.replaceChildren(h("span.muted", null, e instanceof ApiError && e.status === 404 ? "no job index on this server" : e.message));
      }),
      listEvents(new URLSearchParams({ node, since: rfc3339(r.start), until: rfc3339(r.end, true), limit: "1000" }), { signal }).then((pg) => {
        // The server's node filter is a glob: keep this node's own.
        marks = pg.events.filter((e) => e.node === node);
        state.events = marks.length;
        annCount.textContent = marks.length ? `${marks.length} event${marks.length === 1 ? "" : "s"} marked on the charts (solid: start or failure, dashed: recovery or end)` : "no events in this range";
        charts.forEach((c) => c.u.redraw(false));
      }).catch((e: Error) => {
        if (!isAbort(e)) annCount.textContent = e instanceof ApiError && e.status === 404 ? "no event store on this server" : "events: " + e.message;
      }),
      nodeProblems(node, sel, signal).then((l) => now.replaceChildren(...l)),
      loadProcesses(sel, r.end, signal).then((t) => procs.replaceChildren(t)).catch((e: Error) => {
        if (!isAbort(e)) procs.replaceChildren(h("span.error", null, e.message));
      }),
    ]);
    state.loads++;
    updated.textContent = "updated " + new Date().toLocaleTimeString();
  };

  // Refresh: one load at a time; a slow server delays the next, never
  // stacks them.
  const every = refreshMs(route.params, defaultRefresh);
  let timer = 0;
  const loop = () => {
    load().finally(() => {
      if (every > 0 && !signal.aborted && !state.missing) {
        timer = window.setTimeout(() => {
          r = timeRange(route.params, Date.now());
          loop();
        }, every);
      }
    });
  };
  loop();

  root.append(el);
  return () => {
    clearTimeout(timer);
    charts.forEach((c) => c.u.destroy());
  };
}

// nodeProblems lists the node's failing checks and firing alerts now;
// a source the server lacks is said, not an error.
async function nodeProblems(node: string, sel: string, signal: AbortSignal): Promise<HTMLElement[]> {
  const checks = healthStatus({ signal }).then((m) => m.get(node) ?? [], async (e: Error): Promise<HealthFailure[]> => {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    const [notOk, why] = await Promise.all([instantQuery(`vigil_health_check_ok{${sel}} == 0`, undefined, { signal }), instantQuery(`vigil_health_check_failure{${sel}}`, undefined, { signal })]);
    return healthFromSeries(notOk.resultType === "vector" ? notOk.result : [], why.resultType === "vector" ? why.result : []).get(node) ?? [];
  });
  const alerts = listAlerts({ signal }).then((l) => l.filter((a) => a.labels.node === node && a.state === "firing"));
  const [c, a] = await Promise.allSettled([checks, alerts]);
  const out: HTMLElement[] = [];
  const why = (e: unknown) => (e instanceof ApiError && e.status === 404 ? "not available on this server" : (e as Error).message);
  if (c.status === "rejected") {
    if (isAbort(c.reason)) return out;
    out.push(h("span.muted.checks", null, "health checks: " + why(c.reason)));
  } else if (c.value.length === 0) out.push(h("span.checks.ok", null, "all health checks pass"));
  else out.push(h("span.checks.bad", null, `failing: ${c.value.map((x) => x.check + (x.reason ? ` (${x.reason})` : "")).join(", ")}`));
  if (a.status === "rejected") {
    if (isAbort(a.reason)) return out;
    out.push(h("span.muted.alerts", null, "alerts: " + why(a.reason)));
  } else if (a.value.length === 0) out.push(h("span.alerts.ok", null, "no firing alerts"));
  else out.push(h("span.alerts", null, "firing: ", ...a.value.map((x: Alert, i) => h("span", { class: alertSeverity(x) === "critical" ? "bad" : "warn" },
    (i ? ", " : "") + (x.labels.alertname ?? "alert") + (x.annotations.summary ? ` (${x.annotations.summary})` : "")))));
  return out;
}

// jobTable lists the jobs that ran on node (the server's filter is checked
// again: a server ignoring ?node= must not list other nodes' jobs).
function jobTable(list: Job[], node: string): HTMLElement {
  const mine = list.filter((j) => j && typeof j.id === "string" && (!j.nodes || j.nodes.length === 0 || j.nodes.includes(node)));
  if (mine.length === 0) return h("p.muted", null, "no jobs on this node in the last 24 h");
  const now = Date.now();
  return h("table.data.jobs-table", null,
    h("thead", null, h("tr", null, h("th", null, "job"), h("th", null, "user"), h("th", null, "name"), h("th", null, "state"),
      h("th", null, "nodes"), h("th", null, "run time / limit"), h("th", null, "CPU eff."), h("th", null, "mem eff."))),
    h("tbody", null, mine.map((j) => h("tr", { "data-job": j.id },
      h("td", null, h("a", { href: "#/job/" + encodeURIComponent(j.id) }, j.id)), h("td", null, j.user ?? ""), h("td.name", null, j.name ?? ""),
      h("td", null, h("span", { class: "badge state-" + j.state }, j.state)), h("td.num", null, String(j.nodes?.length ?? 0)),
      h("td.num", null, runTime(j, now)), h("td.num", null, formatEfficiency(efficiency(j, "cpu"))), h("td.num", null, formatEfficiency(efficiency(j, "mem")))))));
}

// loadProcesses pivots vigil_process_* series into one row per process;
// counters (_total) also get a per-second rate column.
async function loadProcesses(sel: string, t: number, signal: AbortSignal): Promise<HTMLElement> {
  const d = await instantQuery(`{__name__=~"vigil_process_.+",${sel}}`, t, { signal });
  if (d.resultType !== "vector" || d.result.length === 0) return h("p.muted", null, "no process data for this node");
  const key = (m: Labels) => `${m.pid ?? ""}\u0000${m.user ?? ""}\u0000${command(m)}`;
  const rows = new Map<string, { m: Labels; v: Record<string, number> }>();
  const cols = new Set<string>();
  for (const s of d.result) {
    const name = (s.metric.__name__ ?? "").replace(/^vigil_process_/, "");
    cols.add(name);
    const k = key(s.metric);
    if (!rows.has(k)) rows.set(k, { m: s.metric, v: {} });
    rows.get(k)!.v[name] = parseFloat(s.value[1]);
  }
  const counters = [...cols].filter((c) => c.endsWith("_total"));
  // rate() drops the metric name, so each counter is its own query.
  await Promise.all(counters.map(async (c) => {
    const rd = await instantQuery(`rate(vigil_process_${c}{${sel}}[1m])`, t, { signal });
    if (rd.resultType !== "vector") return;
    const rc = c.replace(/_total$/, "") + " /s";
    cols.add(rc);
    for (const s of rd.result) {
      const row = rows.get(key(s.metric));
      if (row) row.v[rc] = parseFloat(s.value[1]);
    }
  }));
  const colList = [...cols].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const sortCol = colList.find((c) => c.includes("cpu") && c.endsWith("/s")) ?? colList.find((c) => c.includes("cpu")) ?? colList[0];
  const list = [...rows.values()].sort((a, b) => (b.v[sortCol] ?? -Infinity) - (a.v[sortCol] ?? -Infinity)).slice(0, 25);
  const unit = (c: string): Unit => (c.includes("bytes") ? (c.endsWith("/s") ? "bytes/s" : "bytes") : "none");
  return h("table.data", null,
    h("thead", null, h("tr", null, h("th", null, "pid"), h("th", null, "user"), h("th", null, "command"),
      colList.map((c) => h("th", { class: c === sortCol ? "sorted" : "" }, c)))),
    h("tbody", null, list.map((row) => h("tr", null,
      h("td", null, row.m.pid ?? ""), h("td", null, row.m.user ?? ""), h("td.cmd", { title: formatLabels(row.m) }, command(row.m)),
      colList.map((c) => h("td.num", null, formatValue(row.v[c], unit(c))))))),
  );
}

// The procs plugin labels the command "command"; the simulator uses "comm".
function command(m: Labels): string {
  return m.command ?? m.comm ?? "";
}

function rank(c: string): number {
  return c.endsWith("/s") ? 0 : c.endsWith("_total") ? 2 : 1;
}
