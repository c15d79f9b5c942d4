import { ApiError, isAbort, jobReport, type Job, type JobReport, type JobSummary } from "../api";
import { makeBandChart, type BandChart } from "../bandchart";
import { h, type ViewContext } from "../dom";
import { formatValue } from "../format";
import { callsOf, fileCalls, filesBy, histogram, ioMetrics, ioShares, validIO, type FileRanking, type IOFiles, type JobIO } from "../appio";
import { energySection, validEnergy } from "../energy";
import { lustreSection, validLustre } from "../lustre";
import { refreshMs, refreshPicker } from "./timepicker";
import { jobFabric } from "./fabric";
import { bandColumns, formatEfficiency, hasSeries, jobTimes, jobsParams, reportMetrics, runTime, stragglers } from "../jobs";

const defaultRefresh = "30s";

// jobView: one job's report: header, a chart per metric (median, p10–p90
// band, node lines on hover, stragglers in red), notes, and the per-node
// table. A job whose raw samples expired shows its stored summary only.
export function jobView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const id = route.job!;
  const charts: BandChart[] = [];
  const state = { loads: 0, loaded: false, expired: false, error: "", stragglers: [] as string[], notes: [] as string[],
    // Per chart: its node lines, those drawn now (stragglers always, the
    // rest on hover) and its points.
    charts: () => charts.map((c) => ({
      nodes: c.series.slice(4).map((s) => String(s.label)),
      shown: c.series.slice(4).filter((s) => s.show).map((s) => String(s.label)),
      points: c.data.slice(1).reduce((n, ys) => n + (ys as (number | null)[]).filter((y) => y != null).length, 0),
    })),
    // pointAt: the viewport position of a node's point in the middle of
    // chart k (tests hover it).
    pointAt: (k: number, node: string) => {
      const u = charts[k];
      const si = u ? u.series.findIndex((s) => s.label === node) : -1;
      if (si < 0) return null;
      const ys = u.data[si] as (number | null)[];
      let i = Math.floor(ys.length / 2);
      while (i < ys.length && ys[i] == null) i++;
      if (i >= ys.length) return null;
      const r = u.over.getBoundingClientRect();
      return { x: r.left + u.valToPos(u.data[0][i], "x"), y: r.top + u.valToPos(ys[i]!, "y") };
    } };
  expose({ job: state });
  const el = h("section.view.job-view", null,
    h("div.toolbar", null, h("a", { href: "#/jobs" }, "← jobs"), h("h2", null, "Job " + id)),
    h("p.muted", null, "loading…"));
  root.append(el);

  // A job still running or pending is reloaded every ?refresh= period
  // (default 30s); one that ended does not change.
  const every = refreshMs(route.params, defaultRefresh);
  const picker = refreshPicker(route.params, defaultRefresh, (v) => {
    const p = new URLSearchParams(route.params);
    p.set("refresh", v);
    navigate({ view: "job", job: id, params: p });
  });
  let timer = 0;
  const fabricBox = h("div.job-fabric-links");
  const load = () => jobReport(id, { signal }).then((rep) => {
    state.loaded = true;
    state.loads++;
    charts.splice(0).forEach((c) => c.destroy());
    const live = rep.job?.state === "running" || rep.job?.state === "pending";
    render(el, rep, charts, state, live ? picker : null);
    // The links its nodes use and their congestion (docs/fabric-view.md).
    el.append(fabricBox);
    jobFabric(id, fabricBox, signal);
    if (live && every > 0 && !signal.aborted) timer = window.setTimeout(load, every);
  }).catch((e: Error) => {
    if (isAbort(e)) return;
    state.error = e.message;
    const notFound = e instanceof ApiError && e.status === 404;
    el.replaceChildren(h("div.toolbar", null, h("a", { href: "#/jobs" }, "← jobs"), h("h2", null, "Job " + id)),
      h("p.error.no-such-job", null, notFound ? `No such job: "${id}" is not in the job index.` : e.message));
  });
  load();
  return () => {
    clearTimeout(timer);
    charts.forEach((c) => c.destroy());
  };
}

function render(el: HTMLElement, rep: JobReport, charts: BandChart[], state: { expired: boolean; stragglers: string[]; notes: string[] }, picker: HTMLElement | null): void {
  const j: Job = rep.job ?? { id: "?", state: "ended" };
  const sum: JobSummary | null = rep.summary ?? j.summary ?? null;
  const flagged = stragglers(sum);
  state.stragglers = [...flagged];
  const notes = (sum?.notes ?? []).filter((n) => typeof n === "string");
  state.notes = notes;
  const now = Date.now();
  const kv = (k: string, v: string | HTMLElement) => h("div.kv", null, h("span.k", null, k), h("span.v", null, v));
  const nodes = j.nodes ?? [];
  const header = h("div.job-header", null,
    kv("job", j.id + (j.name ? ` (${j.name})` : "")), kv("user", j.user ?? "—"), kv("account", j.account ?? "—"),
    kv("partition", j.partition ?? "—"), kv("state", h("span", { class: "badge state-" + j.state }, j.state + (j.exit_code ? ` (exit ${j.exit_code})` : ""))),
    kv("nodes", nodes.length > 8 ? `${nodes.length}: ${nodes.slice(0, 8).join(" ")} …` : `${nodes.length}${nodes.length ? ": " + nodes.join(" ") : ""}`),
    kv("cores", j.cpus ? String(j.cpus) : "—"), kv("memory asked", j.mem_bytes ? formatValue(j.mem_bytes, "bytes") : "—"),
    j.gpus ? kv("GPUs", String(j.gpus)) : null,
    kv("run time / limit", runTime(j, now)),
  );
  const figures = sum ? h("div.job-figures", null,
    kv("CPU efficiency", formatEfficiency(sum.cpu_efficiency)),
    kv("memory peak", formatValue(sum.mem_used_peak_bytes, "bytes") + (j.mem_bytes && sum.mem_efficiency ? ` (${formatEfficiency(sum.mem_efficiency)} of asked)` : "")),
    kv("read", formatValue(sum.read_bytes, "bytes")), kv("written", formatValue(sum.write_bytes, "bytes")),
  ) : null;
  const straggleBox = flagged.size ? h("div.stragglers", null, h("span.badge.straggler", null, "straggler"), " ",
    [...flagged].map((n) => h("a.straggler-node", { href: "#/node/" + encodeURIComponent(n) + "?" + nodeRange(j, now) }, n)).flatMap((a) => [a, " "])) : null;
  const noteList = notes.length ? h("ul.notes", null, notes.map((n) => h("li", null, n))) : null;
  const expired = !hasSeries(rep.series);
  state.expired = expired;
  const grid = h("div.charts.job-charts");
  el.replaceChildren(...[
    h("div.toolbar", null, h("a", { href: "#/jobs" }, "← jobs"), h("h2", null, "Job " + j.id),
      h("a.highlight", { href: "#/heatmap?" + new URLSearchParams({ job: j.id }) }, "highlight on heatmap"),
      j.user ? h("a", { href: "#/jobs?" + jobsParams({ user: j.user, state: "", partition: "", since: "", sort: "" }) }, "jobs of " + j.user) : null, picker),
    header, figures, straggleBox, noteList,
    expired ? h("p.muted.expired", null, j.state === "pending" ? "This job has not started: no data yet." :
      "The raw samples of this job have expired (or none were stored): the figures above come from its stored summary.") : grid,
    ioSection(validIO(rep.io)),
    energySection(validEnergy(rep.energy), jobTimes(j, now)),
    lustreSection(validLustre(rep.lustre)),
    perNode(sum, flagged),
  ].filter((x): x is HTMLElement => x !== null));
  if (expired) return;
  const t = jobTimes(j, now);
  for (const m of reportMetrics) {
    const b = bandColumns(rep.series?.[m.key], flagged);
    const box = h("div.chart", { "data-metric": m.key }, h("div.node-readout.muted"));
    grid.append(box);
    if (!b) {
      box.append(h("div.chart-title", null, m.title), h("div.chart-msg", null, "no data"));
      continue;
    }
    if (b.computed) box.append(h("div.muted.hint", null, "band computed from the node lines"));
    charts.push(makeBandChart(box, m.title, m.unit, b, flagged, t ? [t.start, t.end] : undefined));
  }
  // Application I/O charts only for jobs that have them.
  for (const m of ioMetrics) {
    const b = bandColumns(rep.series?.[m.key], flagged);
    if (!b) continue;
    const box = h("div.chart", { "data-metric": m.key }, h("div.node-readout.muted"));
    grid.append(box);
    charts.push(makeBandChart(box, m.title, m.unit, b, flagged, t ? [t.start, t.end] : undefined));
  }
}

// ioSection: the application I/O totals per file system, the access-size
// histogram as bars (each bucket's share of reads and of writes) and the
// sequential and metadata shares. Its advice is in the notes.
function ioSection(io: JobIO | null): HTMLElement | null {
  if (!io) return null;
  const count = (v: number) => formatValue(v, "none");
  const secs = (v: number) => (Number.isFinite(v) && v > 0 ? (v >= 100 ? Math.round(v) : Number(v.toPrecision(3))) + " s" : "0 s");
  const bar = (share: number, n: number) => h("span.effbar.ok", { style: `--pct: ${Math.round(share * 100)}%; min-width: 12em` }, count(n));
  const sh = ioShares(io);
  if (io.fs.length === 0) return h("div.job-io", null, h("h3", null, "Application I/O"), filesSection(io.files ?? null));
  return h("div.job-io", null, h("h3", null, "Application I/O"),
    h("table.data.io-fs", null,
      h("thead", null, h("tr", null, ["file system", "type", "read", "written", "opens", "reads", "writes", "metadata calls", "read time", "write time", "metadata time"].map((c) => h("th", null, c)))),
      h("tbody", null, io.fs.map((f) => h("tr", { "data-mountpoint": f.mountpoint },
        h("td", null, f.mountpoint), h("td", null, String(f.fstype ?? "")),
        h("td.num", null, formatValue(f.read_bytes, "bytes")), h("td.num", null, formatValue(f.write_bytes, "bytes")),
        h("td.num", null, count(callsOf(f, "open"))), h("td.num", null, count(callsOf(f, "read"))), h("td.num", null, count(callsOf(f, "write"))),
        h("td.num", null, count(callsOf(f, "open", "close", "stat", "seek", "sync", "meta"))),
        h("td.num", null, secs(f.read_seconds)), h("td.num", null, secs(f.write_seconds)), h("td.num", null, secs(f.meta_seconds)))))),
    h("p.io-shares.muted", null,
      sh.sequential === null ? "" : `${Math.round(sh.sequential * 100)} % of accesses sequential. `,
      sh.meta === null ? "" : `Metadata calls took ${Math.round(sh.meta * 100)} % of the time in I/O.`),
    h("table.data.io-hist", null,
      h("thead", null, h("tr", null, h("th", null, "access size"), h("th", null, "reads"), h("th", null, "writes"))),
      h("tbody", null, histogram(io).map((r) => h("tr", null, h("td", null, r.label),
        h("td", null, bar(r.readShare, r.reads)), h("td", null, bar(r.writeShare, r.writes)))))),
    filesSection(io.files ?? null));
}

// filesSection: the job's top files from the per-file record store,
// ranked by bytes, calls or time as the select says.
function filesSection(files: IOFiles | null): HTMLElement | null {
  if (!files) return null;
  const count = (v: number) => formatValue(v, "none");
  const secs = (v: number) => (Number.isFinite(v) && v > 0 ? (v >= 100 ? Math.round(v) : Number(v.toPrecision(3))) + " s" : "0 s");
  const tbody = h("tbody", null);
  const fill = (by: FileRanking) => {
    tbody.replaceChildren(...filesBy(files, by).map((f) => h("tr", { "data-path": f.path, "data-node": f.node },
      h("td.path", null, f.path === "" ? "(other files)" : f.path), h("td", null, f.node),
      h("td.num", null, formatValue(f.read_bytes, "bytes")), h("td.num", null, formatValue(f.write_bytes, "bytes")),
      h("td.num", null, count(f.reads)), h("td.num", null, count(f.writes)), h("td.num", null, count(f.meta_ops)),
      h("td.num", null, count(fileCalls(f))), h("td.num", null, secs(f.seconds)))));
  };
  const select = h("select.io-files-by", null, ...(["bytes", "calls", "time"] as const).map((by) => h("option", { value: by }, by)));
  select.addEventListener("change", () => fill(select.value as FileRanking));
  fill("bytes");
  return h("div.io-files", null,
    h("h4", null, "Top files by ", select),
    h("table.data.io-files", null,
      h("thead", null, h("tr", null, ["file", "node", "read", "written", "reads", "writes", "metadata calls", "calls", "time"].map((c) => h("th", null, c)))),
      tbody));
}

function nodeRange(j: Job, now: number): URLSearchParams {
  const t = jobTimes(j, now);
  if (!t) return new URLSearchParams({ from: "now-1h", to: "now" });
  const pad = Math.max(60e3, (t.end - t.start) / 20);
  return new URLSearchParams({ from: String(Math.round(t.start - pad)), to: j.end ? String(Math.round(t.end + pad)) : "now" });
}

function perNode(sum: JobSummary | null, flagged: Set<string>): HTMLElement | null {
  const rows = (sum?.nodes ?? []).filter((n) => n && typeof n.node === "string");
  if (rows.length === 0) return null;
  return h("div.per-node", null, h("h3", null, "Per node"), h("table.data", null,
    h("thead", null, h("tr", null, h("th", null, "node"), h("th", null, "CPU efficiency"), h("th", null, "memory peak"), h("th", null, "read"), h("th", null, "written"))),
    h("tbody", null, rows.slice(0, 2000).map((n) => h("tr", { class: flagged.has(n.node) ? "straggler" : "", "data-node": n.node },
      h("td", null, h("a", { href: "#/node/" + encodeURIComponent(n.node) }, n.node), flagged.has(n.node) ? h("span.badge.straggler", null, "straggler") : null),
      h("td.num", null, formatEfficiency(n.cpu_efficiency)),
      h("td.num", null, formatValue(n.mem_used_peak ?? n.mem_used_peak_bytes, "bytes")),
      h("td.num", null, formatValue(n.read_bytes, "bytes")), h("td.num", null, formatValue(n.write_bytes, "bytes")))))),
    rows.length > 2000 ? h("p.muted", null, `… and ${rows.length - 2000} more nodes`) : null);
}
