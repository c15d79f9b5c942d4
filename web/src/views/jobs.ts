import { isAbort, listJobs, type Job } from "../api";
import { h, type ViewContext } from "../dom";
import { formatValue } from "../format";
import { apiParams, efficiency, formatEfficiency, jobStates, jobsParams, matches, parseJobsQuery, runTime, sortJobs, type JobsQuery, type SortKey } from "../jobs";
import { refreshMs, refreshPicker } from "./timepicker";

const defaultRefresh = "30s";

// jobsView: the job index, filtered by user, state and partition (asked
// of the server) and sorted by efficiency (here); all of it in the URL.
export function jobsView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const q = parseJobsQuery(route.params);
  const go = (next: JobsQuery) => {
    const p = jobsParams(next);
    const r = route.params.get("refresh");
    if (r) p.set("refresh", r);
    navigate({ view: "jobs", params: p });
  };
  const user = h("input.filter", { type: "search", name: "user", placeholder: "user", "aria-label": "user", value: q.user });
  const partition = h("input.filter", { type: "search", name: "partition", placeholder: "partition", "aria-label": "partition", value: q.partition });
  const state = h("select", { name: "state", "aria-label": "state" }, h("option", { value: "" }, "any state"), jobStates.map((s) => h("option", { value: s }, s)));
  state.value = q.state;
  const since = h("select", { name: "since", "aria-label": "since" }, h("option", { value: "" }, "any time"),
    ["1h", "24h", "7d", "30d"].map((s) => h("option", { value: s }, "last " + s)));
  since.value = q.since;
  const apply = () => go({ ...q, user: user.value.trim(), partition: partition.value.trim(), state: state.value, since: since.value });
  for (const i of [user, partition]) i.addEventListener("keydown", (e) => e.key === "Enter" && apply());
  for (const s of [state, since]) s.addEventListener("change", apply);

  // A click on an efficiency header sorts ascending (the most wasteful
  // first), a second click descending, a third back to newest first.
  const nextSort = (col: "cpu" | "mem"): SortKey => (q.sort === col ? (`-${col}` as SortKey) : q.sort === `-${col}` ? "" : col);
  const sortHead = (col: "cpu" | "mem", label: string) => {
    const on = q.sort === col || q.sort === `-${col}`;
    return h("th", { class: "sortable" + (on ? " sorted" : ""), "data-sort": col, title: "sort by " + label,
      onclick: () => go({ ...q, sort: nextSort(col) }) }, label + (q.sort === col ? " ▲" : q.sort === `-${col}` ? " ▼" : ""));
  };
  const body = h("div.jobs", null, "loading…");
  const updated = h("span.muted.updated");
  const el = h("section.view.jobs-view", null,
    h("div.toolbar", null, h("h2", null, "Jobs"), user, state, partition, since, h("button", { onclick: apply }, "Apply"),
      refreshPicker(route.params, defaultRefresh, (v) => {
        const p = jobsParams(q);
        p.set("refresh", v);
        navigate({ view: "jobs", params: p });
      }), updated),
    body,
  );
  const state_ = { loads: 0, rows: [] as string[], error: "" };
  expose({ jobs: state_ });

  const table = (jobs: Job[]) => {
    const now = Date.now();
    return h("table.data.jobs-table", null,
      h("thead", null, h("tr", null, h("th", null, "job"), h("th", null, "user"), h("th", null, "account"), h("th", null, "partition"),
        h("th", null, "name"), h("th", null, "state"), h("th", null, "nodes"), h("th", null, "cores"), h("th", null, "memory asked"),
        h("th", null, "run time / limit"), sortHead("cpu", "CPU eff."), sortHead("mem", "mem eff."))),
      h("tbody", null, jobs.map((j) => h("tr", { "data-job": j.id },
        h("td", null, h("a", { href: "#/job/" + encodeURIComponent(j.id) }, j.id)),
        h("td", null, h("a", { href: "#/jobs?" + jobsParams({ ...q, user: j.user ?? "" }) }, j.user ?? "")),
        h("td", null, j.account ?? ""), h("td", null, j.partition ?? ""), h("td.name", { title: j.name ?? "" }, j.name ?? ""),
        h("td", null, h("span", { class: "badge state-" + j.state }, j.state)),
        h("td.num", { title: (j.nodes ?? []).slice(0, 50).join(" ") }, String(j.nodes?.length ?? 0)),
        h("td.num", null, j.cpus ? String(j.cpus) : "—"),
        h("td.num", null, j.mem_bytes ? formatValue(j.mem_bytes, "bytes") : "—"),
        h("td.num", null, runTime(j, now)),
        h("td.num.eff", null, effCell(efficiency(j, "cpu"))),
        h("td.num.eff", null, effCell(efficiency(j, "mem"))),
      ))),
    );
  };

  let busy = false;
  const load = () => {
    if (busy) return Promise.resolve();
    busy = true;
    return listJobs(apiParams(q), { signal })
      .then((all) => {
        const jobs = sortJobs(all.filter((j) => j && typeof j.id === "string" && matches(j, q)), q.sort);
        state_.rows = jobs.map((j) => j.id);
        state_.error = "";
        body.replaceChildren(jobs.length ? table(jobs) : h("p.muted", null, "No jobs match these filters."));
        updated.textContent = "updated " + new Date().toLocaleTimeString();
      })
      .catch((e: Error) => {
        if (isAbort(e)) return;
        state_.error = e.message;
        body.replaceChildren(h("p.error", null, e.message));
      })
      .finally(() => {
        busy = false;
        state_.loads++;
      });
  };
  load();
  const every = refreshMs(route.params, defaultRefresh);
  const timer = every > 0 ? setInterval(load, every) : 0;
  root.append(el);
  return () => clearInterval(timer);
}

// effCell is the figure with a bar behind it: red below 25 %, amber below 60 %.
function effCell(v: number | null): HTMLElement {
  if (v === null) return h("span.muted", null, formatEfficiency(v));
  const pct = Math.max(0, Math.min(1, v)) * 100;
  return h("span", { class: "effbar " + (v < 0.25 ? "low" : v < 0.6 ? "mid" : "ok"), style: `--pct:${pct.toFixed(0)}%` }, formatEfficiency(v));
}
