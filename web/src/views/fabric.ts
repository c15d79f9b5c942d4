import type uPlot from "uplot";
import { ApiError, fabric, fabricTop, isAbort, rangeQuery, type FabricAnswer, type FabricLink, type FabricTopLink } from "../api";
import { makeChart } from "../chart";
import { h, type ViewContext } from "../dom";
import {
  boxValue, colour, DOWN_COLOUR, drawOrder, edgeValue, endpoints, hitBox, hitCell, hitEdge, layout, linkQueries, matrix, measures, parseMeasure, portKey,
  position, scaleFor, value, worstEdge, type Layout, type Matrix, type Measure, type Scale,
} from "../fabric";
import { formatValue } from "../format";
import { alignSeries } from "../series";
import { refreshMs, refreshPicker } from "./timepicker";

const defaultRefresh = "10s";
// Rates over a minute: a sweep at 1 Hz gives 60 points, one that misses a
// few still a rate.
const window = "1m";
const chartSpan = 3600e3;
const denseEdges = 300;

// fabricView: the switches as the fat tree they form, each link coloured
// by utilization, xmit wait or errors, reloaded every ?refresh=; hover a
// link or switch for its figures, click a link for its counters over the
// last hour and the running jobs whose nodes sit below it, click a switch
// for its ports. URL: #/fabric?color=util|wait|errors&link=GUID/PORT&switch=GUID
export function fabricView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const m: Measure = parseMeasure(route.params.get("color"));
  const selLink = route.params.get("link");
  const selSwitch = route.params.get("switch");
  const go = (set: Record<string, string | null>) => {
    const p = new URLSearchParams(route.params);
    for (const [k, v] of Object.entries(set)) if (v === null) p.delete(k); else p.set(k, v);
    navigate({ view: "fabric", params: p });
  };
  const state = { loads: 0, renderMs: [] as number[], edges: 0, boxes: 0, down: 0, colours: 0, error: "", jobs: [] as string[], charts: 0, cells: 0,
    locateEdge: (name: string) => locate(name), selected: selLink,
    // redraw repaints n times (the perf measurement: renderMs keeps the last 20).
    redraw: (n: number) => { for (let i = 0; i < n; i++) draw(); } };
  expose({ fabric: state });

  const picker = h("select", { "aria-label": "colour by" }, measures.map((x) => h("option", { value: x.key }, "colour by " + x.label)));
  picker.value = m;
  picker.addEventListener("change", () => go({ color: picker.value }));
  const summary = h("span.muted.fabric-summary", null, "loading…");
  const legend = h("div.legend.fabric-legend");
  const canvas = h("canvas.fabric-canvas");
  const tip = h("div.tooltip", { hidden: true });
  // Past denseEdges cables the lines blur: the links also as a matrix.
  const mcanvas = h("canvas.fabric-matrix");
  const mtitle = h("h3.fabric-matrix-title", { hidden: true }, "Links as a matrix: a row per upper switch, a column per lower one, left to right as above");
  const wrap = h("div.fabric-wrap", null, canvas, mtitle, mcanvas, tip);
  const worst = h("div.fabric-worst");
  const detail = h("div.fabric-detail");
  const el = h("section.view.fabric-view", null,
    h("div.toolbar", null, h("h2", null, "Fabric"), picker,
      refreshPicker(route.params, defaultRefresh, (v) => go({ refresh: v })), summary),
    legend, wrap, detail, worst);
  root.append(el);

  let L: Layout | null = null;
  let M: Matrix | null = null;
  let data: FabricAnswer | null = null;
  let scale: Scale = { lo: 0, hi: 1, log: false };
  const charts: uPlot[] = [];

  const locate = (name: string) => {
    if (!L) return null;
    const i = L.edges.findIndex((e) => e.a.name === name || e.b?.name === name);
    if (i < 0) return null;
    const [x1, y1, x2, y2] = endpoints(L, L.edges[i]);
    const r = canvas.getBoundingClientRect();
    return { x: r.left + (x1 + x2) / 2, y: r.top + (y1 + y2) / 2 };
  };

  const draw = () => {
    if (!L) return;
    const t0 = performance.now();
    const dpr = window_devicePixelRatio();
    canvas.width = Math.round(L.width * dpr);
    canvas.height = Math.round(L.height * dpr);
    canvas.style.width = L.width + "px";
    canvas.style.height = L.height + "px";
    const g = canvas.getContext("2d");
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#0d1117";
    g.fillRect(0, 0, L.width, L.height);
    // Edges bucketed by colour, one path per bucket: 8,000 links cost
    // a few dozen strokes; the worst are drawn last, on top.
    const buckets = new Map<string, number[]>();
    const order = drawOrder(L, m);
    for (const i of order) {
      const e = L.edges[i];
      const key = e.up ? colour(Math.round(position(edgeValue(e, m), scale) * 40) / 40) : DOWN_COLOUR;
      if (!buckets.has(key)) buckets.set(key, []);
      buckets.get(key)!.push(i);
    }
    const width = L.edges.length > 2000 ? 1 : 1.6;
    // In a dense fabric the quiet links fade so the hot ones stand out.
    const dense = L.edges.length > 1000;
    for (const [key, list] of buckets) {
      const p = key === DOWN_COLOUR ? 0.5 : position(edgeValue(L.edges[list[0]], m), scale);
      g.globalAlpha = dense ? 0.2 + 0.8 * p : 1;
      g.beginPath();
      for (const i of list) {
        const [x1, y1, x2, y2] = endpoints(L, L.edges[i]);
        g.moveTo(x1, y1);
        g.lineTo(x2, y2);
      }
      g.strokeStyle = key;
      g.lineWidth = key === DOWN_COLOUR ? 1 : width;
      g.setLineDash(key === DOWN_COLOUR ? [4, 3] : []);
      g.stroke();
    }
    g.setLineDash([]);
    g.globalAlpha = 1;
    state.colours = buckets.size;
    // The selected link on top, white.
    if (selLink) {
      const e = L.edges.find((x) => portKey(x.a.switch_guid, x.a.port) === selLink || (x.b && portKey(x.b.switch_guid, x.b.port) === selLink));
      if (e) {
        const [x1, y1, x2, y2] = endpoints(L, e);
        g.beginPath();
        g.moveTo(x1, y1);
        g.lineTo(x2, y2);
        g.strokeStyle = "#ffffff";
        g.lineWidth = 3;
        g.stroke();
      }
    }
    g.font = "11px system-ui, sans-serif";
    g.textAlign = "center";
    for (const b of L.boxes) {
      const leaf = b.sw.level === "leaf";
      g.fillStyle = leaf && b.ca.length ? colour(position(boxValue(b, m), scale)) : "#30363d";
      g.fillRect(b.x - b.w / 2, b.y, b.w, b.h);
      g.strokeStyle = b.sw.guid === selSwitch ? "#ffffff" : "#8b949e";
      g.lineWidth = 1;
      g.strokeRect(b.x - b.w / 2 + 0.5, b.y + 0.5, b.w - 1, b.h - 1);
      if (b.label) {
        g.fillStyle = "#c9d1d9";
        g.fillText(b.sw.name.slice(0, 10), b.x, leaf ? b.y + b.h + 12 : b.y - 4);
        if (leaf) {
          g.fillStyle = "#8b949e";
          g.fillText(`${b.sw.node_count} nodes`, b.x, b.y + b.h + 24);
        }
      }
    }
    drawMatrix(dpr);
    state.renderMs.push(Math.round((performance.now() - t0) * 100) / 100);
    if (state.renderMs.length > 20) state.renderMs.shift();
  };

  const drawMatrix = (dpr: number) => {
    const dense = L !== null && L.edges.length > denseEdges;
    mtitle.hidden = mcanvas.hidden = !dense;
    M = dense ? matrix(L!, L!.width) : null;
    state.cells = M?.cells.size ?? 0;
    if (!M || !L) return;
    mcanvas.width = Math.round(M.width * dpr);
    mcanvas.height = Math.round(M.height * dpr);
    mcanvas.style.width = M.width + "px";
    mcanvas.style.height = M.height + "px";
    const g = mcanvas.getContext("2d");
    if (!g) return;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.fillStyle = "#0d1117";
    g.fillRect(0, 0, M.width, M.height);
    g.font = `${Math.min(11, M.ch)}px system-ui, sans-serif`;
    g.textAlign = "right";
    g.textBaseline = "middle";
    g.fillStyle = "#c9d1d9";
    if (M.ch >= 8) M.rows.forEach((b, r) => g.fillText(L!.boxes[b].sw.name.slice(0, 10), M!.left - 4, r * M!.ch + M!.ch / 2));
    const gap = M.cw > 3 ? 1 : 0;
    for (const [k, list] of M.cells) {
      const e = L.edges[worstEdge(L, list, m)];
      const r = Math.floor(k / M.cols.length);
      const c = k % M.cols.length;
      g.fillStyle = e.up ? colour(position(edgeValue(e, m), scale)) : DOWN_COLOUR;
      g.fillRect(M.left + c * M.cw, r * M.ch, M.cw - gap, M.ch - gap);
    }
  };

  const showLegend = () => {
    const stops = Array.from({ length: 11 }, (_, i) => colour(i / 10)).join(",");
    const fmt = (v: number) => (m === "util" ? Math.round(v * 100) + " %" : formatValue(v, "none") + "/s");
    legend.replaceChildren(
      h("span", null, measures.find((x) => x.key === m)!.label + (scale.log ? " (log scale)" : "")),
      h("span.num", null, m === "util" ? "0 %" : "≤ 1/s"),
      h("span.fabric-scale", { style: `background: linear-gradient(to right, ${stops})` }),
      h("span.num", null, fmt(scale.hi)),
      h("span.swatch", { style: "background: repeating-linear-gradient(90deg, rgb(110,110,120) 0 4px, transparent 4px 7px)" }), h("span", null, "down"),
      h("span.muted", null, "· leaves filled by their worst node port · click a link or a switch"),
    );
  };

  const render = (f: FabricAnswer) => {
    data = f;
    L = layout(f, Math.max(600, wrap.clientWidth || root.clientWidth || 1200));
    scale = scaleFor(m, L.edges);
    state.edges = L.edges.length;
    state.boxes = L.boxes.length;
    state.down = L.edges.filter((e) => !e.up).length;
    const links = f.links ?? [];
    summary.textContent = `${L.boxes.length} switches, ${links.length} ports, ${state.down} inter-switch link${state.down === 1 ? "" : "s"} down · rates over ${f.window} · ${new Date(f.time).toLocaleTimeString()}` +
      (f.truncated ? " · TRUNCATED: more ports than the server lists" : "");
    showLegend();
    draw();
    worst.replaceChildren(worstTable(links, m, (l) => go({ link: portKey(l.switch_guid, l.port), switch: null })));
    if (selSwitch && !detailShown) switchPorts(selSwitch);
  };

  // Hover: the link or switch under the pointer.
  canvas.addEventListener("mousemove", (ev) => {
    if (!L) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    const bi = hitBox(L, x, y);
    const ei = bi < 0 ? hitEdge(L, x, y) : -1;
    if (bi < 0 && ei < 0) {
      tip.hidden = true;
      canvas.style.cursor = "";
      return;
    }
    canvas.style.cursor = "pointer";
    tip.hidden = false;
    tip.style.left = ev.clientX + 12 + "px";
    tip.style.top = ev.clientY + 12 + "px";
    if (bi >= 0) {
      const b = L.boxes[bi];
      tip.textContent = `${b.sw.name} (${b.sw.level}) · ${b.sw.node_count} nodes below` + (b.ca.length ? ` · worst node port ${fmtValue(boxValue(b, m), m)}` : "");
    } else {
      const e = L.edges[ei];
      tip.replaceChildren(...[e.a, e.b].filter((l): l is FabricLink => !!l).map((l) => h("div", null, `${l.name}: ${linkFigures(l)}`)));
    }
  });
  canvas.addEventListener("mouseleave", () => (tip.hidden = true));
  const cellAt = (ev: MouseEvent) => {
    if (!M || !L) return -1;
    const r = mcanvas.getBoundingClientRect();
    const list = hitCell(M, ev.clientX - r.left, ev.clientY - r.top);
    return list ? worstEdge(L, list, m) : -1;
  };
  mcanvas.addEventListener("mousemove", (ev) => {
    const ei = cellAt(ev);
    if (ei < 0 || !L) {
      tip.hidden = true;
      mcanvas.style.cursor = "";
      return;
    }
    const e = L.edges[ei];
    mcanvas.style.cursor = "pointer";
    tip.hidden = false;
    tip.style.left = ev.clientX + 12 + "px";
    tip.style.top = ev.clientY + 12 + "px";
    tip.replaceChildren(...[e.a, e.b].filter((l): l is FabricLink => !!l).map((l) => h("div", null, `${l.name}: ${linkFigures(l)}`)));
  });
  mcanvas.addEventListener("mouseleave", () => (tip.hidden = true));
  mcanvas.addEventListener("click", (ev) => {
    const ei = cellAt(ev);
    if (ei < 0 || !L) return;
    const e = L.edges[ei];
    const l = e.b && value(e.b, m) > value(e.a, m) ? e.b : e.a;
    go({ link: portKey(l.switch_guid, l.port), switch: null });
  });
  canvas.addEventListener("click", (ev) => {
    if (!L) return;
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    const bi = hitBox(L, x, y);
    if (bi >= 0) return go({ switch: L.boxes[bi].sw.guid, link: null });
    const ei = hitEdge(L, x, y);
    if (ei >= 0) {
      const e = L.edges[ei];
      // The busier end's port: what the charts show first.
      const l = e.b && value(e.b, m) > value(e.a, m) ? e.b : e.a;
      go({ link: portKey(l.switch_guid, l.port), switch: null });
    }
  });

  let detailShown = false;
  const switchPorts = (guid: string) => {
    if (!data) return;
    const sw = (data.switches ?? []).find((s) => s.guid === guid);
    const ports = (data.links ?? []).filter((l) => l.switch_guid === guid);
    if (!sw) {
      detail.replaceChildren(h("p.muted", null, `Switch ${guid} is not in the fabric now.`));
      return;
    }
    detailShown = true;
    detail.replaceChildren(h("h3", null, `${sw.name} (${sw.level}, ${sw.guid}) · ${sw.node_count} nodes below`),
      h("a", { href: "#", onclick: (e: Event) => { e.preventDefault(); go({ switch: null }); } }, "close"),
      portTable(ports, m, (l) => go({ link: portKey(l.switch_guid, l.port), switch: null })));
  };

  // The selected link: its counters over the last hour and its jobs.
  const showLink = async (key: string) => {
    const [guid, port] = [key.slice(0, key.lastIndexOf("/")), key.slice(key.lastIndexOf("/") + 1)];
    detail.replaceChildren(h("p.muted", null, "loading link…"));
    const top = await fabricTop(new URLSearchParams({ link: portKey(guid, port), by: "bytes", limit: "1", window }), { signal });
    const l: FabricTopLink | undefined = top.links?.[0];
    if (!l) {
      detail.replaceChildren(h("p.muted.no-link", null, `No link at ${guid} port ${port} now.`));
      return;
    }
    const jobs = l.jobs ?? [];
    state.jobs = jobs.map((j) => j.id);
    const other = l.remote_type === "switch" ? portKey(l.remote_guid, l.remote_port) : null;
    const grid = h("div.charts.fabric-charts");
    detail.replaceChildren(
      h("div.toolbar", null, h("h3", null, l.name), h("span", { class: "badge " + (l.up ? "up" : "down") }, l.up ? "up" : "down"),
        h("span.muted", null, [l.rate, l.width, l.speed].filter(Boolean).join(" ")),
        other ? h("a", { href: "#", onclick: (e: Event) => { e.preventDefault(); go({ link: other }); } }, "other end") : null,
        l.host ? h("a", { href: "#/node/" + encodeURIComponent(l.host) }, "node " + l.host) : null,
        h("a", { href: "#", onclick: (e: Event) => { e.preventDefault(); go({ link: null }); } }, "close")),
      h("p.fabric-figures", null, linkFigures(l)),
      h("div.fabric-jobs", null,
        h("strong", null, `Running jobs below this link (${l.nodes_below} node${l.nodes_below === 1 ? "" : "s"} below): `),
        jobs.length === 0 ? h("span.muted", null, "none") : null,
        ...jobs.map((j) => h("a.job", { href: "#/job/" + encodeURIComponent(j.id), "data-job": j.id }, `${j.id}${j.user ? " (" + j.user + ")" : ""} ×${j.nodes}`)),
        l.job_count > jobs.length ? h("span.muted", null, ` and ${l.job_count - jobs.length} more`) : null),
      grid);
    const end = Date.now();
    const start = end - chartSpan;
    const step = 15;
    await Promise.all(linkQueries(l, 60).map(async (q) => {
      const box = h("div.chart", { "data-title": q.title });
      grid.append(box);
      try {
        const res = await rangeQuery(q.expr, start, end, step, { signal });
        if (res.length === 0) {
          box.append(h("div.chart-title", null, q.title), h("div.chart-msg", null, "no data in the last hour"));
          return;
        }
        const labels = res.map((s) => s.metric.dir ?? (s.metric.vl !== undefined ? "VL " + s.metric.vl : q.title.replace(/ \(.*/, "")));
        charts.push(makeChart(box, { title: q.title, unit: q.unit, labels, data: alignSeries(res), xRange: [start, end], syncKey: "fabric", stepped: q.title === "Up" }));
        box.classList.add("has-data");
        state.charts++;
      } catch (e) {
        if (!isAbort(e)) box.append(h("div.chart-title", null, q.title), h("div.chart-msg.error", null, (e as Error).message));
      }
    }));
  };
  if (selLink) showLink(selLink).catch((e: Error) => !isAbort(e) && detail.replaceChildren(h("p.error", null, e.message)));

  const every = refreshMs(route.params, defaultRefresh);
  let timer = 0;
  const load = () => fabric(window, { signal }).then((f) => {
    state.loads++;
    state.error = "";
    if ((f.switches ?? []).length === 0) {
      summary.textContent = "";
      wrap.hidden = true;
      worst.replaceChildren(h("p.muted.no-fabric", null,
        "No fabric data: no vigil_ib_port_info series. Run the ibnet sweep on the hosts that sweep the fabric (docs/fabric-view.md), or `vigil demo --fabric`."));
      return;
    }
    wrap.hidden = false;
    render(f);
  }).catch((e: Error) => {
    if (isAbort(e)) return;
    state.error = e.message;
    summary.textContent = "";
    worst.replaceChildren(h("p.error", null, e instanceof ApiError && e.status === 404 ? "This server has no fabric API." : e.message));
  });
  const loop = () => {
    load().finally(() => {
      if (every > 0 && !signal.aborted) timer = window_setTimeout(loop, every);
    });
  };
  loop();
  const onResize = () => data && render(data);
  addEventListener("resize", onResize);
  return () => {
    clearTimeout(timer);
    removeEventListener("resize", onResize);
    charts.forEach((c) => c.destroy());
  };
}

// window is shadowed by the rate window above.
function window_devicePixelRatio(): number {
  return globalThis.devicePixelRatio || 1;
}
function window_setTimeout(f: () => void, ms: number): number {
  return globalThis.setTimeout(f, ms) as unknown as number;
}

function fmtValue(v: number, m: Measure): string {
  if (m === "util") return (v * 100).toFixed(1) + " %";
  return formatValue(v, "none") + "/s";
}

export function linkFigures(l: FabricLink): string {
  if (!l.up) return "DOWN";
  return `util ${(l.utilization * 100).toFixed(1)} % · tx ${formatValue(l.tx_bytes_per_second, "bytes/s")} · rx ${formatValue(l.rx_bytes_per_second, "bytes/s")} · ` +
    `xmit wait ${formatValue(l.xmit_wait_per_second, "none")}/s · errors ${formatValue(l.errors_per_second, "none")}/s`;
}

function portTable(ports: FabricLink[], m: Measure, pick: (l: FabricLink) => void): HTMLElement {
  const rows = [...ports].sort((a, b) => value(b, m) - value(a, m));
  return h("table.data.fabric-ports", null,
    h("thead", null, h("tr", null, ["link", "state", "util", "tx", "rx", "xmit wait/s", "errors/s"].map((c) => h("th", null, c)))),
    h("tbody", null, rows.map((l) => h("tr", { "data-link": l.name },
      h("td", null, h("a", { href: "#", onclick: (e: Event) => { e.preventDefault(); pick(l); } }, l.name)),
      h("td", null, h("span", { class: "badge " + (l.up ? "up" : "down") }, l.up ? "up" : "down")),
      h("td.num", null, (l.utilization * 100).toFixed(1) + " %"),
      h("td.num", null, formatValue(l.tx_bytes_per_second, "bytes/s")), h("td.num", null, formatValue(l.rx_bytes_per_second, "bytes/s")),
      h("td.num", null, formatValue(l.xmit_wait_per_second, "none")), h("td.num", null, formatValue(l.errors_per_second, "none"))))));
}

// worstTable: the ten worst ports by the measure, down ports first.
function worstTable(links: FabricLink[], m: Measure, pick: (l: FabricLink) => void): HTMLElement {
  const rows = [...links].sort((a, b) => Number(a.up) - Number(b.up) || value(b, m) - value(a, m)).slice(0, 10);
  return h("div", null, h("h3", null, "Worst ports by " + measures.find((x) => x.key === m)!.label), portTable(rows, m, pick));
}

// jobFabric fills box with the links the job's nodes use (their CA ports,
// their leaves' up-links and the spines' down-links to those leaves), the
// worst xmit wait first. A server without fabric data leaves it empty.
export function jobFabric(id: string, box: HTMLElement, signal: AbortSignal): Promise<void> {
  return fabricTop(new URLSearchParams({ job: id, by: "xmit_wait", limit: "20", window }), { signal }).then((top) => {
    const links = top.links ?? [];
    if (links.length === 0) {
      box.replaceChildren();
      return;
    }
    box.replaceChildren(h("h3", null, `Fabric links of this job's nodes (${top.total}, worst xmit wait first)`),
      h("table.data.job-fabric", null,
        h("thead", null, h("tr", null, ["link", "state", "util", "xmit wait/s", "errors/s", "bytes/s", "other jobs below"].map((c) => h("th", null, c)))),
        h("tbody", null, links.map((l) => h("tr", { "data-link": l.name },
          h("td", null, h("a", { href: "#/fabric?" + new URLSearchParams({ color: "wait", link: portKey(l.switch_guid, l.port) }) }, l.name)),
          h("td", null, h("span", { class: "badge " + (l.up ? "up" : "down") }, l.up ? "up" : "down")),
          h("td.num", null, (l.utilization * 100).toFixed(1) + " %"),
          h("td.num", null, formatValue(l.xmit_wait_per_second, "none")), h("td.num", null, formatValue(l.errors_per_second, "none")),
          h("td.num", null, formatValue(l.tx_bytes_per_second + l.rx_bytes_per_second, "bytes/s")),
          h("td.num", null, String(Math.max(0, l.job_count - 1))))))));
  }).catch((e: Error) => {
    if (isAbort(e) || (e instanceof ApiError && e.status === 404)) return;
    box.replaceChildren(h("p.muted", null, "fabric links: " + e.message));
  });
}
