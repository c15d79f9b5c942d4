import { ApiError, healthStatus, instantQuery, isAbort, listAlerts, listEvents, listNodes, streamEvents,
  type Alert, type HealthFailure, type NodeState, type StreamState, type VigilEvent } from "../api";
import { h, type ViewContext } from "../dom";
import { cssRGB } from "../color";
import type { NodeEntry } from "../frame";
import { formatTime } from "../format";
import { Heatmap } from "../heatmap";
import {
  activeAlerts, alertSeverity, countStates, eventKinds, healthFromSeries, kindLabel, mergeEvents, nodeStates, order, safeLink,
  rfc3339, severityAtLeast, stateInfo, stateKinds, statusLUT, type State,
} from "../status";
import { refreshMs, refreshPicker } from "./timepicker";

const defaultRefresh = "10s";
const maxEvents = 500; // kept in the timeline
const pageEvents = 200; // asked per request
const maxAlertRows = 300;

// statusView: every node coloured by its worst state (down, failing check,
// firing alert, ok), grouped as on the heatmap, with the active alerts and
// the event timeline beside it. Each source may be missing on a server
// (404): the view says so and shows the rest.
export function statusView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const every = refreshMs(route.params, defaultRefresh);
  const kindParam = (route.params.get("kind") ?? "").slice(0, 200);
  const sevParam = route.params.get("severity") ?? "";
  const setParam = (k: string, v: string) => {
    const p = new URLSearchParams(route.params);
    if (v) p.set(k, v);
    else p.delete(k);
    navigate({ view: "status", params: p });
  };

  const summary = h("span.status", null, "loading…");
  const updated = h("span.muted.updated");
  const err = h("div.error", { hidden: true });
  const counts = new Map<State, HTMLElement>();
  const legend = h("div.legend.status-legend", null, order.map((s) => {
    const c = h("span.count", { "data-state": stateInfo[s].key }, "–");
    counts.set(s, c);
    return h("span.item", null, h("span", { class: "swatch " + (s === order[0] ? "down" : "state"), style: `--c: ${cssRGB(stateInfo[s].rgb)}` }), stateInfo[s].label, " ", c);
  }));
  // One place per source, in a fixed order, filled as each answers.
  const sources = h("div.sources.muted", null, ["health", "alerts", "events"].map((s) => h("span.src", { "data-src": s })));
  const wrap = h("div.hm-wrap");
  const tip = h("div.tooltip", { hidden: true });
  const alertsBox = h("div.alerts", null, "loading…");
  const kindSel = h("select", { "aria-label": "event kind" }, h("option", { value: "" }, "all kinds"), eventKinds.map(([k, l]) => h("option", { value: k }, l)));
  kindSel.value = eventKinds.some(([k]) => k === kindParam) ? kindParam : "";
  kindSel.addEventListener("change", () => setParam("kind", kindSel.value));
  const sevSel = h("select", { "aria-label": "event severity" }, h("option", { value: "" }, "any severity"),
    h("option", { value: "warning" }, "warning or worse"), h("option", { value: "critical" }, "critical"));
  sevSel.value = severityAtLeast(sevParam) ? sevParam : "";
  sevSel.addEventListener("change", () => setParam("severity", sevSel.value));
  const live = h("span.muted.live-state", null, "");
  const timeline = h("div.timeline", null, "loading…");
  const older = h("button.more", { hidden: true }, "older events");
  const el = h("section.view.status-view", null,
    h("div.toolbar", null, h("h2", null, "Status"), summary,
      refreshPicker(route.params, defaultRefresh, (v) => setParam("refresh", v)), updated),
    err,
    h("div.status-layout", null,
      h("div.status-main", null, legend, sources, wrap),
      h("div.status-side", null,
        h("h3", null, "Active alerts"), alertsBox,
        h("h3", null, "Events"), h("div.toolbar", null, kindSel, sevSel, live), timeline, older)),
    tip);
  el.style.setProperty("--down", cssRGB(stateInfo[order[0]].rgb));

  // --- the grid

  let nodes: NodeState[] = [];
  let nodeKey = "";
  let states: Uint8Array = new Uint8Array(0);
  let health: Map<string, HealthFailure[]> | null = null;
  let alertsByNode = new Map<string, Alert[]>();
  const stats = { loads: 0, renderMs: 0, nodes: 0, sources: {} as Record<string, string>, stream: "connecting" as StreamState, polls: 0 };

  const showTip = (i: number, x: number, y: number) => {
    if (i < 0) {
      tip.hidden = true;
      return;
    }
    const name = hm.nodeName(i);
    const parts = [`${name}: ${stateInfo[states[i] as State]?.label ?? "?"}`];
    for (const c of health?.get(name) ?? []) parts.push(`check ${c.check} failing${c.reason ? ": " + c.reason : ""}`);
    for (const a of alertsByNode.get(name) ?? []) parts.push(`${a.state} ${alertSeverity(a)} alert ${a.labels.alertname ?? ""}`);
    tip.replaceChildren(...parts.flatMap((p, k) => (k ? [h("br"), p] : [p])));
    tip.hidden = false;
    tip.style.left = x + 14 + "px";
    tip.style.top = y + 14 + "px";
  };
  const hm = new Heatmap(wrap, showTip, (i) => {
    navigate({ view: "node", node: hm.nodeName(i), params: new URLSearchParams({ from: "now-1h", to: "now" }) });
  }, statusLUT());

  const setSource = (name: string, text: string, ok: boolean) => {
    stats.sources[name] = ok ? "ok" : text;
    let s = sources.querySelector<HTMLElement>(`[data-src=${name}]`);
    if (!s) sources.append((s = h("span.src", { "data-src": name })));
    s.textContent = text;
    s.classList.toggle("unavailable", !ok);
  };

  // loadHealth asks api/v1/health, else the health plugin's series.
  const loadHealth = async (): Promise<Map<string, HealthFailure[]> | null> => {
    try {
      const m = await healthStatus({ signal });
      setSource("health", "health checks ✓", true);
      return m;
    } catch (e) {
      if (isAbort(e) || !(e instanceof ApiError) || e.status !== 404) {
        if (!isAbort(e)) setSource("health", "health checks: " + (e as Error).message, false);
        if (isAbort(e)) throw e;
        return null;
      }
    }
    try {
      const [notOk, why] = await Promise.all([instantQuery("vigil_health_check_ok == 0", undefined, { signal }), instantQuery("vigil_health_check_failure", undefined, { signal })]);
      const m = healthFromSeries(notOk.resultType === "vector" ? notOk.result : [], why.resultType === "vector" ? why.result : []);
      setSource("health", "health checks ✓ (from vigil_health_check_ok)", true);
      return m;
    } catch (e) {
      if (isAbort(e)) throw e;
      setSource("health", "health checks unavailable: " + (e as Error).message, false);
      return null;
    }
  };

  const loadAlerts = async (): Promise<Alert[] | null> => {
    try {
      const a = await listAlerts({ signal });
      setSource("alerts", "alerts ✓", true);
      return a;
    } catch (e) {
      if (isAbort(e)) throw e;
      const why = e instanceof ApiError && e.status === 404 ? "no alerting rules on this server" : (e as Error).message;
      setSource("alerts", "alerts unavailable: " + why, false);
      return null;
    }
  };

  // One load at a time; one asked for meanwhile runs after it.
  let loading = false;
  let again = false;
  const load = async (): Promise<void> => {
    if (loading) {
      again = true;
      return;
    }
    loading = true;
    try {
      const [n, hl, al] = await Promise.all([listNodes({ signal }), loadHealth(), loadAlerts()]);
      const t0 = performance.now();
      health = hl;
      alertsByNode = new Map();
      for (const a of al ?? []) {
        const node = a.labels.node;
        if (!node) continue;
        const l = alertsByNode.get(node);
        if (l) l.push(a);
        else alertsByNode.set(node, [a]);
      }
      const key = n.map((x) => x.name + "\u0000" + (x.group ?? "")).join("\u0001");
      nodes = n;
      states = nodeStates({ nodes: n, health: hl, alerts: al });
      if (key !== nodeKey) {
        nodeKey = key;
        hm.setNodes(n.map((x): NodeEntry => ({ name: x.name, group: x.group })));
      }
      hm.update(states);
      const c = countStates(states);
      for (const [s, span] of counts) span.textContent = String(c.get(s) ?? 0);
      stats.renderMs = performance.now() - t0;
      stats.nodes = n.length;
      const bad = n.length - (c.get(order[order.length - 1]) ?? 0);
      summary.textContent = `${n.length} nodes · ${bad === 0 ? "all ok" : bad + " not ok"}`;
      alertsBox.replaceChildren(al === null ? h("p.muted", null, stats.sources.alerts) : alertTable(al));
      err.hidden = true;
      stats.loads++;
      updated.textContent = "updated " + new Date().toLocaleTimeString();
      if (hm.hovered() >= 0) tip.hidden = true;
    } catch (e) {
      if (isAbort(e)) return;
      err.textContent = "Node list failed: " + (e as Error).message;
      err.hidden = false;
    } finally {
      loading = false;
    }
    if (again && !signal.aborted) {
      again = false;
      return load();
    }
  };

  let timer = 0;
  const loop = () => {
    load().finally(() => {
      if (every > 0 && !signal.aborted) timer = window.setTimeout(loop, every);
    });
  };
  // An event that changes a node's state reloads the grid soon (once for a
  // burst), without waiting for the next refresh.
  let soon = 0;
  const reloadSoon = () => {
    if (soon || signal.aborted) return;
    soon = window.setTimeout(() => {
      soon = 0;
      load();
    }, 1000);
  };

  // --- the event timeline

  let events: VigilEvent[] = [];
  let next = "";
  let eventsOK = true;
  const filters = () => {
    const p = new URLSearchParams();
    if (kindSel.value) p.set("kind", kindSel.value);
    const sev = severityAtLeast(sevSel.value);
    if (sev) p.set("severity", sev);
    return p;
  };
  let drawPending = 0;
  const drawSoon = () => {
    if (!drawPending) drawPending = window.setTimeout(() => {
      drawPending = 0;
      drawTimeline();
    }, 50);
  };
  const drawTimeline = () => {
    if (!eventsOK) return;
    events = mergeEvents(events, incoming, cap);
    incoming = [];
    timeline.replaceChildren(...(events.length ? events.map(eventRow) : [h("p.muted", null, "no events")]));
    older.hidden = next === "";
  };
  // Events are merged in batches (a rack going down is a burst of them),
  // when the timeline is drawn.
  let incoming: VigilEvent[] = [];
  let cap = maxEvents;
  const addEvents = (l: VigilEvent[]) => {
    incoming.push(...l);
    if (incoming.length > 4 * maxEvents) incoming = incoming.slice(-2 * maxEvents);
    drawSoon();
  };
  const eventsFailed = (e: unknown) => {
    if (isAbort(e)) return;
    eventsOK = false;
    const why = e instanceof ApiError && e.status === 404 ? "no event store on this server" : (e as Error).message;
    setSource("events", "events unavailable: " + why, false);
    timeline.replaceChildren(h("p.muted", null, "events unavailable: " + why));
    live.textContent = "";
  };
  // Polling stands in while the stream is away: the events since the
  // newest one shown.
  let pollTimer = 0;
  const poll = () => {
    pollTimer = 0;
    if (signal.aborted || !eventsOK) return;
    if (stats.stream !== "live") {
      const p = filters();
      p.set("limit", String(pageEvents));
      if (events.length) p.set("since", rfc3339(events[0].time));
      stats.polls++;
      listEvents(p, { signal }).then((pg) => addEvents(pg.events)).catch(() => {});
    }
    pollTimer = window.setTimeout(poll, every || 10_000);
  };
  const first = filters();
  first.set("limit", String(pageEvents));
  listEvents(first, { signal }).then((pg) => {
    next = pg.next;
    setSource("events", "events ✓", true);
    addEvents(pg.events);
    drawTimeline();
    streamEvents(filters, {
      event(e) {
        addEvents([e]);
        if (stateKinds.has(e.kind)) reloadSoon();
      },
      state(s) {
        stats.stream = s;
        live.textContent = s === "live" ? "● live" : s === "closed" ? "stream closed" : "polling (stream " + s + ")";
        live.classList.toggle("on", s === "live");
      },
    }, signal);
    pollTimer = window.setTimeout(poll, every || 10_000);
  }).catch(eventsFailed);
  older.addEventListener("click", () => {
    const p = filters();
    p.set("limit", String(pageEvents));
    p.set("before", next);
    older.disabled = true;
    listEvents(p, { signal }).then((pg) => {
      next = pg.next;
      // Older pages raise the cap: the list grows by what was asked.
      cap = Math.max(cap, events.length) + pg.events.length;
      addEvents(pg.events);
      drawTimeline();
    }).catch((e) => !isAbort(e) && older.replaceWith(h("span.error", null, (e as Error).message))).finally(() => (older.disabled = false));
  });

  expose({
    status: stats,
    states: () => Object.fromEntries(nodes.map((n, i) => [n.name, stateInfo[states[i] as State].key])),
    counts: () => Object.fromEntries([...counts].map(([s, c]) => [stateInfo[s].key, Number(c.textContent)])),
    events: () => events.map((e) => e.id),
    locate: (n: string) => hm.clientPos(n),
  });
  loop();
  root.append(el);
  return () => {
    clearTimeout(timer);
    clearTimeout(soon);
    clearTimeout(pollTimer);
    clearTimeout(drawPending);
    hm.destroy();
  };
}

// nodeLink opens the node view around t (ms): the last hour while t is in
// it, else an hour centred on t.
export function nodeHref(node: string, t?: number): string {
  const now = Date.now();
  const p = t === undefined || now - t < 50 * 60e3 ? "from=now-1h&to=now" : `from=${Math.round(t - 30 * 60e3)}&to=${Math.round(Math.min(now, t + 30 * 60e3))}`;
  return "#/node/" + encodeURIComponent(node) + "?" + p;
}

function eventRow(e: VigilEvent): HTMLElement {
  const link = safeLink(e.link);
  return h("div", { class: `event sev-${cssToken(e.severity)}`, "data-id": e.id, "data-kind": e.kind },
    h("span.time", null, formatTime(e.time)),
    h("span", { class: `badge sev-${cssToken(e.severity)}` }, e.severity),
    h("span.kind", null, kindLabel(e.kind)),
    e.node && h("a.node", { href: nodeHref(e.node, e.time) }, e.node),
    e.job && h("a.job", { href: "#/job/" + encodeURIComponent(e.job) }, "job " + e.job),
    link && h("a.link", { href: link, title: "open" }, "→"),
    h("span.summary", null, e.summary));
}

function cssToken(s: string): string {
  return s.replace(/[^\w-]/g, "_");
}

function alertTable(all: Alert[]): HTMLElement {
  const list = activeAlerts(all);
  if (list.length === 0) return h("p.muted", null, "no active alerts");
  const now = Date.now();
  const shown = list.slice(0, maxAlertRows);
  return h("div", null, h("table.data.alerts-table", null,
    h("thead", null, h("tr", null, h("th", null, "alert"), h("th", null, "node"), h("th", null, "severity"), h("th", null, "since"), h("th", null, "summary"))),
    h("tbody", null, shown.map((a) => {
      const sev = alertSeverity(a);
      const t = a.activeAt ? Date.parse(a.activeAt) : NaN;
      return h("tr", { class: a.state, "data-alert": a.labels.alertname ?? "" },
        h("td", null, a.labels.alertname ?? "(unnamed)", a.state === "pending" ? h("span.muted", null, " (pending)") : null),
        h("td", null, a.labels.node ? h("a", { href: nodeHref(a.labels.node) }, a.labels.node) : ""),
        h("td", null, h("span", { class: "badge sev-" + sev }, sev)),
        h("td.time", { title: Number.isNaN(t) ? "" : formatTime(t) }, Number.isNaN(t) ? "" : ago(now - t)),
        h("td.summary", null, a.annotations.summary ?? a.annotations.description ?? ""));
    }))),
    list.length > shown.length ? h("p.muted", null, `… and ${list.length - shown.length} more`) : null);
}

// ago says how long ago, coarsely: 45s, 12m, 3h, 2d.
export function ago(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 90) return s + "s";
  if (s < 90 * 60) return Math.round(s / 60) + "m";
  if (s < 36 * 3600) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}
