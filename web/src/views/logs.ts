import {
  ApiError, isAbort, logPatterns, patternEvents, searchLogs, tailLogs, type LogRecord, type Pattern, type PatternEvent,
  type Stream,
} from "../api";
import { h, type ViewContext } from "../dom";
import { formatNumber, formatTime } from "../format";
import {
  bucketStart, filterValue, RecordList, searchParams, severities, severityClass, sparkPath, templateParts, topHosts,
  withFilter,
} from "../logquery";
import { formatHash, timeRange } from "../route";
import { timePicker } from "./timepicker";

const pageSize = 200;
const maxRows = 2000; // live tail keeps at most this many rows in the page
const patternLimit = 100;
const patternRefresh = 10_000;
const newWindow = "1h"; // patterns first seen this recently are "new"
const sparkW = 120, sparkH = 26;

// clock shows a time of today as HH:MM:SS (with milliseconds when ms),
// an older one with its date.
function clock(iso: string, ms = false): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const full = formatTime(t);
  const today = formatTime(Date.now()).slice(0, 10) === full.slice(0, 10);
  return (today ? full.slice(11) : full) + (ms ? "." + String(((t % 1000) + 1000) % 1000).padStart(3, "0") : "");
}

// logsView: search (newest first, "load more" pages), live tail over SSE
// and the mined patterns with their counts over time. All state that
// matters for a shared link is in the URL: q, from, to, live, psort, pwin.
export function logsView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const p = route.params;
  const q = p.get("q") ?? "";
  const live = p.get("live") === "1";
  const psort = ["count", "recent", "new"].includes(p.get("psort") ?? "") ? p.get("psort")! : "count";
  const hourly = p.get("pwin") === "h";
  // Relative bounds are resolved once, so every "load more" page searches
  // the same window.
  const now = Date.now();
  const r = timeRange(p, now);
  const list = new RecordList(maxRows);
  const stats = { rows: 0, pages: 0, live, liveReceived: 0, patterns: 0, newPatterns: 0, error: "", unavailable: false };
  expose({ logs: stats });

  const go = (change: Record<string, string | null>) => {
    const np = new URLSearchParams(p);
    for (const [k, v] of Object.entries(change)) {
      if (v === null || v === "") np.delete(k);
      else np.set(k, v);
    }
    navigate({ view: "logs", params: np });
  };
  // Filters are plain links, so they can be opened in a new tab or shared.
  const filterHref = (key: string, value: string) => {
    const np = new URLSearchParams(p);
    np.set("q", withFilter(q, key, value));
    return formatHash({ view: "logs", params: np });
  };

  // --- query row
  const input = h("input.expr.logq", {
    type: "search", spellcheck: "false", "aria-label": "log query",
    placeholder: 'host:cn01* app:sshd severity:warning pattern:42 words "a phrase"',
  });
  input.value = q;
  input.addEventListener("keydown", (e) => e.key === "Enter" && go({ q: input.value.trim() }));
  const liveBtn = h("button.live", {
    "aria-pressed": String(live), title: "stream new messages as they arrive",
    onclick: () => {
      if (live) return go({ live: null });
      // Tailing a window that ends in the past makes no sense: move it to now.
      const to = p.get("to") ?? "now";
      go(to === "now" ? { live: "1" } : { live: "1", from: "now-1h", to: "now" });
    },
  }, live ? "● Live" : "○ Live");
  // Severity as a menu too: it edits the severity: filter of the query.
  const sevSel = h("select", { "aria-label": "minimum severity" },
    h("option", { value: "" }, "any severity"),
    severities.slice(0, 5).map((s) => h("option", { value: s }, s + (s === "emerg" ? "" : " or worse"))),
  );
  const curSev = filterValue(q, "severity") ?? filterValue(q, "sev") ?? filterValue(q, "level");
  sevSel.value = curSev !== null && severities.slice(0, 5).includes(curSev) ? curSev : "";
  sevSel.addEventListener("change", () => go({ q: withFilter(input.value.trim(), "severity", sevSel.value || null) }));
  const msg = h("div.error", { hidden: true });
  const fail = (e: Error) => {
    if (isAbort(e)) return;
    stats.error = e.message;
    stats.unavailable = e instanceof ApiError && e.unavailable;
    msg.textContent = stats.unavailable ? "Logs unavailable: " + (e as ApiError).reason : e.message;
    msg.hidden = false;
  };

  // --- results
  const tbody = h("tbody");
  const table = h("table.data.logs", null,
    h("thead", null, h("tr", null,
      h("th", null, "time"), h("th", null, "host"), h("th", null, "app"), h("th", null, "severity"),
      h("th", null, "pattern"), h("th", null, "message"))),
    tbody,
  );
  const summary = h("span.muted.summary", null, "searching…");
  const liveState = h("span.muted.live-state");
  const more = h("button.more", { hidden: true, onclick: () => loadPage() }, "Load more");
  const results = h("div.log-results", null, h("div.result-head", null, summary, liveState), table, more);

  const row = (rec: LogRecord, fresh: boolean): HTMLTableRowElement => {
    const sev = h("td.sev", null, rec.severity);
    sev.classList.add(severityClass(rec.severity));
    const link = (text: string, title: string, key: string, value: string) => h("a", { href: filterHref(key, value), title }, text);
    return h(fresh ? "tr.fresh" : "tr", { "data-seq": rec.seq },
      h("td.time", { title: rec.time }, clock(rec.time, true)),
      h("td.host", null, link(rec.host, "filter by this host", "host", rec.host)),
      h("td.app", null, rec.app ? link(rec.app, "filter by this app", "app", rec.app) : ""),
      sev,
      h("td.pat", null, rec.pattern ? link("#" + rec.pattern, "filter by this pattern", "pattern", String(rec.pattern)) : ""),
      h("td.msg", null, rec.text,
        rec.malformed ? h("span.badge", { title: "not valid syslog; stored whole" }, "malformed") : null,
        rec.truncated ? h("span.badge", { title: "cut at the frame limit" }, "truncated") : null),
    );
  };
  const showSummary = () => {
    stats.rows = list.records.length;
    const n = list.records.length;
    summary.textContent = n === 0
      ? (q ? "No messages match in this range." : "No messages in this range.")
      : `${formatNumber(n)} message${n === 1 ? "" : "s"} shown, newest first`;
    more.hidden = !list.cursor;
    table.hidden = n === 0;
  };

  let loading = false;
  const loadPage = () => {
    if (loading) return;
    loading = true;
    more.disabled = true;
    searchLogs(searchParams(p, now, pageSize, list.cursor), { signal })
      .then((res) => {
        const added = list.appendPage(res.records ?? [], res.next_cursor);
        tbody.append(...added.map((rec) => row(rec, false)));
        stats.pages++;
        showSummary();
        if (live && stats.pages === 1) startTail();
      })
      .catch((e: Error) => {
        summary.textContent = "";
        table.hidden = list.records.length === 0;
        fail(e);
      })
      .finally(() => {
        loading = false;
        more.disabled = false;
      });
  };

  // --- live tail, resuming after the newest row shown when it reconnects.
  let tail: Stream | null = null;
  let pending: LogRecord[] = [];
  let flushQueued = false;
  const flush = () => {
    flushQueued = false;
    const { added, dropped } = list.prepend(pending);
    pending = [];
    for (let i = 0; i < dropped; i++) tbody.lastElementChild?.remove();
    // Older arrivals lose their highlight so only the latest batch stands out.
    for (const tr of tbody.querySelectorAll("tr.fresh")) tr.classList.remove("fresh");
    tbody.prepend(...added.map((rec) => row(rec, true)));
    stats.liveReceived += added.length;
    showSummary();
  };
  const startTail = () => {
    tail?.close();
    tail = tailLogs(q, () => list.newest(), {
      record(rec) {
        pending.push(rec);
        if (!flushQueued) {
          flushQueued = true;
          // One DOM update per frame, however fast messages come.
          requestAnimationFrame(flush);
        }
      },
      state(s) {
        if (s !== "closed") liveState.textContent = s === "live" ? " · live" : s === "connecting" ? " · live: connecting…" : " · live: disconnected, retrying…";
      },
      stopped: (m) => (liveState.textContent = " · live stopped: " + m),
    }, signal);
  };

  // --- patterns
  const plist = h("div.patterns-list", null, h("p.muted", null, "loading…"));
  const ptotal = h("span.muted");
  const sortSel = h("select", { "aria-label": "sort patterns" },
    h("option", { value: "count" }, "most messages"),
    h("option", { value: "recent" }, "last seen"),
    h("option", { value: "new" }, "newest"),
  );
  sortSel.value = psort;
  sortSel.addEventListener("change", () => go({ psort: sortSel.value === "count" ? null : sortSel.value }));
  const winSel = h("select", { "aria-label": "pattern chart window" },
    h("option", { value: "m" }, "per minute, 1 h"),
    h("option", { value: "h" }, "per hour, 48 h"),
  );
  winSel.value = hourly ? "h" : "m";
  winSel.addEventListener("change", () => go({ pwin: winSel.value === "h" ? "h" : null }));
  const activePattern = Number(filterValue(q, "pattern") ?? 0);

  const patternItem = (pt: Pattern, isNew: PatternEvent | undefined): HTMLElement => {
    const s = hourly ? pt.per_hour : pt.per_minute;
    const counts = s?.counts ?? [];
    const sum = counts.reduce((a, b) => a + b, 0);
    let peak = 0;
    counts.forEach((c, i) => c > counts[peak] && (peak = i));
    const svgNS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(svgNS, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", String(sparkW));
    svg.setAttribute("height", String(sparkH));
    svg.setAttribute("viewBox", `0 0 ${sparkW} ${sparkH}`);
    const path = document.createElementNS(svgNS, "path");
    path.setAttribute("d", sparkPath(counts, sparkW, sparkH));
    const base = document.createElementNS(svgNS, "path");
    base.setAttribute("class", "base");
    base.setAttribute("d", `M0 ${sparkH - 0.5}H${sparkW}`);
    svg.append(base, path);
    const unit = hourly ? "hour" : "minute";
    const title = document.createElementNS(svgNS, "title");
    title.textContent = sum === 0
      ? `no messages in the last ${hourly ? "48 hours" : "hour"}`
      : `${sum} in the last ${hourly ? "48 hours" : "hour"}; peak ${counts[peak]}/${unit} at ${formatTime(bucketStart(s, peak))}`;
    svg.append(title);
    const hosts = topHosts(pt.hosts, 3);
    // The service tracks a bounded number of hosts per pattern and counts
    // messages from any others in hosts_overflow.
    const nHosts = pt.hosts?.length ?? 0;
    const over = pt.hosts_overflow ?? 0;
    const hostsTitle = hosts.map((x) => `${x.host} ×${x.count}`).join(", ") + (over ? `; ${over} messages from other hosts` : "");
    const item = h("a.pattern", {
      href: filterHref("pattern", String(pt.id)), "data-id": pt.id,
      title: (pt.examples ?? []).length ? "e.g. " + pt.examples!.join("\n     ") : "",
    },
      h("div.pmain", null,
        h("div.ptop", null,
          h("span.pid", null, "#" + pt.id),
          isNew ? h("span.badge.new", { title: `new pattern, first seen ${formatTime(Date.parse(isNew.time))} on ${isNew.host}` }, "new") : null,
          h("code.template", null, templateParts(pt.template).map((x) => (x.wild ? h("span.wild", null, x.text) : x.text))),
        ),
        h("div.pmeta", null,
          h("span.muted.phosts", { title: hostsTitle },
            `${nHosts}${over ? "+" : ""} host${nHosts === 1 && !over ? "" : "s"}` +
            (hosts.length ? " (" + hosts.map((x) => x.host).join(", ") + (nHosts > hosts.length || over ? ", …)" : ")") : "")),
          h("span.muted", { title: "first seen " + pt.first_seen }, "first " + clock(pt.first_seen)),
          h("span.muted", { title: "last seen " + pt.last_seen }, "last " + clock(pt.last_seen)),
        ),
      ),
      h("div.pside", null, svg, h("span.pcount", { title: "messages since the pattern was first seen" }, formatNumber(pt.count))),
    );
    if (isNew) item.classList.add("is-new");
    if (pt.id === activePattern) item.classList.add("active");
    return item;
  };

  // A refresh is skipped while the previous one still waits.
  let pbusy = false;
  const loadPatterns = () => {
    if (pbusy) return;
    pbusy = true;
    const pp = new URLSearchParams({ limit: String(patternLimit), sort: psort });
    Promise.all([logPatterns(pp, { signal }), patternEvents(newWindow, { signal })]).then(([pr, ev]) => {
      const fresh = new Map<number, PatternEvent>();
      for (const e of ev.events ?? []) if (!fresh.has(e.pattern)) fresh.set(e.pattern, e);
      const pats = pr.patterns ?? [];
      stats.patterns = pats.length;
      stats.newPatterns = pats.filter((x) => fresh.has(x.id)).length;
      ptotal.textContent = pr.total > pats.length ? `${pats.length} of ${pr.total}` : String(pr.total);
      plist.replaceChildren(...(pats.length ? pats.map((x) => patternItem(x, fresh.get(x.id))) : [h("p.muted", null, "No patterns mined yet.")]));
    }).catch((e: Error) => {
      if (isAbort(e)) return;
      const off = e instanceof ApiError && e.unavailable;
      plist.replaceChildren(h("p.muted", null, off ? "Patterns unavailable." : e.message));
      if (off) clearInterval(ptimer);
    }).finally(() => (pbusy = false));
  };

  const patternsPanel = h("aside.patterns", null,
    h("div.toolbar", null, h("h3", null, "Patterns"), ptotal, sortSel, winSel),
    h("p.hint", null, "click a pattern to show its messages; ", h("span.badge.new", null, "new"), ` = first seen in the last ${newWindow}`),
    plist,
  );

  const el = h("section.view.logs-view", null,
    h("div.toolbar", null, h("h2", null, "Logs"), timePicker(p, r, (a, b) => go({ from: a, to: b }), false)),
    h("div.query-row", null, input, sevSel, h("button.run", { onclick: () => go({ q: input.value.trim() }) }, "Search"), liveBtn),
    h("p.hint.syntax", null,
      "host:GLOB  app:NAME  severity:LEVEL (or worse)  pattern:ID  words  \"a phrase\" — all must match; click a host, app or pattern to filter"),
    msg,
    h("div.logs-layout", null, results, patternsPanel),
  );

  loadPage();
  loadPatterns();
  const ptimer = window.setInterval(loadPatterns, patternRefresh);
  root.append(el);
  return () => clearInterval(ptimer);
}
