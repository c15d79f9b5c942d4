import "uplot/dist/uPlot.min.css";
import "./style.css";
import { h, type View } from "./dom";
import { formatHash, parseHash, type Route, type ViewName } from "./route";
import { heatmapView } from "./views/heatmap";
import { statusView } from "./views/status";
import { nodeView } from "./views/node";
import { exploreView } from "./views/explore";
import { treeView } from "./views/tree";
import { logsView } from "./views/logs";
import { jobsView } from "./views/jobs";
import { jobView } from "./views/job";
import { fabricView } from "./views/fabric";

// State exposed for the browser tests and the perf script.
const exposed: Record<string, unknown> = {};
(window as unknown as { __vigil: object }).__vigil = exposed;

const main = h("main");
const links = {
  heatmap: h("a", { href: "#/heatmap" }, "Heatmap"),
  status: h("a", { href: "#/status" }, "Status"),
  explore: h("a", { href: "#/explore" }, "Explore"),
  tree: h("a", { href: "#/tree" }, "Tree"),
  logs: h("a", { href: "#/logs" }, "Logs"),
  jobs: h("a", { href: "#/jobs" }, "Jobs"),
  fabric: h("a", { href: "#/fabric" }, "Fabric"),
};
const goto = h("input.goto", { type: "search", placeholder: "go to node…", "aria-label": "go to node" });
goto.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && goto.value.trim()) {
    navigate({ view: "node", node: goto.value.trim(), params: new URLSearchParams({ from: "now-1h", to: "now" }) });
    goto.value = "";
  }
});
document.body.append(
  h("header", null, h("span.brand", null, "Vigil"), h("nav", null, links.heatmap, links.status, links.explore, links.tree, links.logs, links.jobs, links.fabric), goto),
  main,
);

// Every view has one signature (dom.ts View); the router mounts one at a
// time and, when it is left, aborts its signal (ending its requests and
// streams) and calls its cleanup.
const views: Record<ViewName, { mount: View; title(r: Route): string }> = {
  heatmap: { mount: heatmapView, title: () => "Heatmap" },
  status: { mount: statusView, title: () => "Status" },
  node: { mount: nodeView, title: (r) => r.node ?? "Node" },
  explore: { mount: exploreView, title: () => "Explore" },
  tree: { mount: treeView, title: () => "Tree" },
  logs: { mount: logsView, title: () => "Logs" },
  jobs: { mount: jobsView, title: () => "Jobs" },
  job: { mount: jobView, title: (r) => "Job " + (r.job ?? "") },
  fabric: { mount: fabricView, title: () => "Fabric" },
};

let unmount: (() => void) | null = null;
let currentHash = "";

function navigate(r: Route): void {
  const hash = formatHash(r);
  if (hash === location.hash) render();
  else location.hash = hash;
}

function render(): void {
  const r = parseHash(location.hash);
  currentHash = formatHash(r);
  unmount?.();
  main.replaceChildren();
  for (const k of Object.keys(exposed)) delete exposed[k];
  exposed.view = r.view;
  for (const [k, a] of Object.entries(links)) a.classList.toggle("active", k === r.view || (k === "heatmap" && r.view === "node") || (k === "jobs" && r.view === "job"));
  const v = views[r.view];
  document.title = `${v.title(r)} · Vigil`;
  const ctl = new AbortController();
  const cleanup = v.mount(main, { route: r, navigate, expose: (s) => Object.assign(exposed, s), signal: ctl.signal });
  unmount = () => {
    ctl.abort();
    cleanup();
  };
}

window.addEventListener("hashchange", () => {
  if (formatHash(parseHash(location.hash)) !== currentHash || !unmount) render();
});
render();
