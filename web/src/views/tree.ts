import { isAbort, treeStatus, type TreeJSON } from "../api";
import { h, type ViewContext } from "../dom";

// The tree JSON comes from Source.Tree and its shape belongs to the
// aggregator. We render any nesting: objects with a "children" array become
// nested lists; name/up/lag/drops get pride of place, other scalar fields
// are listed as key=value.
type J = TreeJSON;

const nameKeys = ["name", "id", "addr", "address"];
const skip = new Set(["children", ...nameKeys, "up", "clock_skew", "nodes_clock_skew", "down", "down_ranges"]);

const refresh = 5000;

// treeView shows the tree, reloaded every 5 s; a tick is skipped while the
// previous reload still waits, so a slow server gets no pile of requests.
export function treeView(root: HTMLElement, { signal }: ViewContext): () => void {
  const body = h("div.tree", null, "loading…");
  root.append(h("section.view.tree-view", null, h("div.toolbar", null, h("h2", null, "Aggregator tree")), body));
  let busy = false;
  const load = () => {
    if (busy) return;
    busy = true;
    treeStatus({ signal })
      .then((tree) => {
        body.replaceChildren(
          ...(tree === null
            ? [h("p.muted", null, "No tree data: this server has no aggregators.")]
            : [downNodes(tree), clockSkew(tree), render(tree)].filter((x): x is HTMLElement => x !== null)),
        );
      })
      .catch((e: Error) => !isAbort(e) && body.replaceChildren(h("p.error", null, e.message)))
      .finally(() => (busy = false));
  };
  load();
  const timer = setInterval(load, refresh);
  return () => clearInterval(timer);
}

// clockSkew lists the nodes the server flags because their clocks are off
// (Tree.clock_skew: node, offset_seconds): their ticks are refused or land
// at the wrong time, so they look silent or stale elsewhere.
export function clockSkew(tree: J): HTMLElement | null {
  if (tree === null || typeof tree !== "object" || Array.isArray(tree)) return null;
  const list = Array.isArray(tree.clock_skew) ? tree.clock_skew : [];
  const total = typeof tree.nodes_clock_skew === "number" ? tree.nodes_clock_skew : list.length;
  if (total === 0) return null;
  return h("div.clock-skew", null,
    h("div.thead", null, h("span.badge.skew", null, "clock skew"),
      h("strong", null, `${total} node${total === 1 ? "" : "s"}`),
      h("span.muted", null, "ticks refused or misplaced until their clocks are fixed")),
    h("ul", null, list.map((n) => {
      const o = n !== null && typeof n === "object" && !Array.isArray(n) ? n : {};
      return h("li", null, h("span.badge.skew", null, "clock skew"), " ", h("strong", null, String(o.node)), " ", h("span.muted", null, offset(Number(o.offset_seconds))));
    })),
    total > list.length ? h("p.muted", null, `… and ${total - list.length} more`) : null,
  );
}

// downNodes names the nodes that are down (Tree.down_ranges: host ranges
// such as cn[004-005]), those expected but never connected included.
export function downNodes(tree: J): HTMLElement | null {
  if (tree === null || typeof tree !== "object" || Array.isArray(tree)) return null;
  const ranges = Array.isArray(tree.down_ranges) ? tree.down_ranges.map(String) : [];
  const listed = Array.isArray(tree.down) ? tree.down.length : 0;
  const total = typeof tree.nodes_down === "number" ? tree.nodes_down : listed;
  if (total === 0 || ranges.length === 0) return null;
  return h("div.down-nodes", null,
    h("div.thead", null, h("span.badge.down", null, "down"),
      h("strong", null, `${total} node${total === 1 ? "" : "s"}`),
      h("span.muted", null, "silent, reported down or expected and never connected")),
    h("p.names", null, ranges.join(" ")),
    total > listed ? h("p.muted", null, `… and ${total - listed} more`) : null,
  );
}

// offset writes seconds as "2h 0m ahead" / "1h 0m behind".
export function offset(s: number): string {
  if (!Number.isFinite(s)) return "?";
  const a = Math.abs(Math.round(s));
  const d = a >= 3600 ? `${Math.floor(a / 3600)}h ${Math.floor((a % 3600) / 60)}m` : a >= 60 ? `${Math.floor(a / 60)}m ${a % 60}s` : `${a}s`;
  return `${d} ${s < 0 ? "behind" : "ahead"}`;
}

function render(v: J): HTMLElement {
  if (Array.isArray(v)) return h("ul", null, v.map((c) => h("li", null, render(c))));
  if (v === null || typeof v !== "object") return h("span", null, String(v));
  const name = nameKeys.map((k) => v[k]).find((x) => typeof x === "string") as string | undefined;
  const up = v.up;
  const kids = Array.isArray(v.children) ? v.children : [];
  const upKids = kids.filter((c) => c && typeof c === "object" && !Array.isArray(c) && (c.up === true || c.up === 1)).length;
  const fields = Object.entries(v).filter(([k, x]) => !skip.has(k) && (x === null || typeof x !== "object"));
  const nested = Object.entries(v).filter(([k, x]) => !skip.has(k) && x !== null && typeof x === "object");
  return h("div.tnode", null,
    h("div.thead", null,
      up === undefined ? null : h("span", { class: "badge " + (up === true || up === 1 ? "up" : "down") }, up === true || up === 1 ? "up" : "down"),
      h("strong", null, name ?? "(unnamed)"),
      kids.length ? h("span.muted", null, ` ${upKids}/${kids.length} children up`) : null,
      fields.map(([k, x]) => h("span.kv", null, h("span.k", null, k), "=", String(x))),
    ),
    nested.map(([k, x]) => h("div.nested", null, h("span.k", null, k), render(x))),
    kids.length ? h("ul", null, kids.map((c) => h("li", null, render(c)))) : null,
  );
}
