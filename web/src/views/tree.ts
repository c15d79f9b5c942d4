import { h, type ViewHandle } from "../dom";

// The tree JSON comes from Source.Tree and its shape belongs to the
// aggregator. We render any nesting: objects with a "children" array become
// nested lists; name/up/lag/drops get pride of place, other scalar fields
// are listed as key=value.
type J = null | boolean | number | string | J[] | { [k: string]: J };

const nameKeys = ["name", "id", "addr", "address"];
const skip = new Set(["children", ...nameKeys, "up"]);

export function treeView(): ViewHandle {
  const body = h("div.tree", null, "loading…");
  const el = h("section.view.tree-view", null, h("div.toolbar", null, h("h2", null, "Aggregator tree")), body);
  const abort = new AbortController();
  const load = () =>
    fetch("api/web/tree", { signal: abort.signal })
      .then((r) => r.json())
      .then((o: { tree?: J; error?: string }) => {
        if (o.error) throw new Error(o.error);
        body.replaceChildren(o.tree === null || o.tree === undefined ? h("p.muted", null, "No tree data: this server has no aggregators.") : render(o.tree));
      })
      .catch((e: Error) => e.name !== "AbortError" && body.replaceChildren(h("p.error", null, "tree: " + e.message)));
  load();
  const timer = setInterval(load, 5000);
  return {
    el,
    destroy() {
      clearInterval(timer);
      abort.abort();
    },
  };
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
