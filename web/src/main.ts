import "uplot/dist/uPlot.min.css";
import "./style.css";
import { h, type ViewHandle } from "./dom";
import { formatHash, parseHash, type Route } from "./route";
import { heatmapView } from "./views/heatmap";
import { nodeView } from "./views/node";
import { exploreView } from "./views/explore";
import { treeView } from "./views/tree";
import { logsView } from "./views/logs";

// State exposed for the browser tests and the perf script.
const exposed: Record<string, unknown> = {};
(window as unknown as { __vigil: object }).__vigil = exposed;

const main = h("main");
const links = {
  heatmap: h("a", { href: "#/heatmap" }, "Heatmap"),
  explore: h("a", { href: "#/explore" }, "Explore"),
  tree: h("a", { href: "#/tree" }, "Tree"),
  logs: h("a", { href: "#/logs" }, "Logs"),
};
const goto = h("input.goto", { type: "search", placeholder: "go to node…", "aria-label": "go to node" });
goto.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && goto.value.trim()) {
    navigate({ view: "node", node: goto.value.trim(), params: new URLSearchParams({ from: "now-1h", to: "now" }) });
    goto.value = "";
  }
});
document.body.append(
  h("header", null, h("span.brand", null, "Vigil"), h("nav", null, links.heatmap, links.explore, links.tree, links.logs), goto),
  main,
);

let current: ViewHandle | null = null;
let currentHash = "";

function navigate(r: Route): void {
  const hash = formatHash(r);
  if (hash === location.hash) render();
  else location.hash = hash;
}

function render(): void {
  const r = parseHash(location.hash);
  currentHash = formatHash(r);
  current?.destroy();
  for (const k of Object.keys(exposed)) delete exposed[k];
  exposed.view = r.view;
  for (const [k, a] of Object.entries(links)) a.classList.toggle("active", k === r.view || (k === "heatmap" && r.view === "node"));
  switch (r.view) {
    case "node":
      current = nodeView(r, navigate, (s) => Object.assign(exposed, s));
      document.title = `${r.node} · Vigil`;
      break;
    case "explore":
      current = exploreView(r, navigate);
      document.title = "Explore · Vigil";
      break;
    case "tree":
      current = treeView();
      document.title = "Tree · Vigil";
      break;
    case "logs":
      current = logsView(r, { navigate, expose: (s) => Object.assign(exposed, s) });
      document.title = "Logs · Vigil";
      break;
    default:
      current = heatmapView(r, { navigate, expose: (s) => Object.assign(exposed, s) });
      document.title = "Heatmap · Vigil";
  }
  main.replaceChildren(current.el);
}

window.addEventListener("hashchange", () => {
  if (formatHash(parseHash(location.hash)) !== currentHash || !current) render();
});
render();
