import type { Route } from "./route";

// Tiny DOM helper: h("div.cls", {attr: v}, children...).
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K | `${K}.${string}`,
  attrs: Record<string, string | number | boolean | EventListener> | null = null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const [name, ...classes] = tag.split(".");
  const el = document.createElement(name as K);
  if (classes.length) el.className = classes.join(" ");
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
      else if (v === false) continue;
      else if (v === true) el.setAttribute(k, "");
      else el.setAttribute(k, String(v));
    }
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

// ViewContext is what the router gives a view.
export interface ViewContext {
  route: Route;
  navigate(r: Route): void;
  // expose publishes state for the browser tests and the perf script.
  expose(stats: object): void;
  // signal is aborted when the view is left: every request and stream of
  // the view is started with it (api.ts), so leaving ends them all.
  signal: AbortSignal;
}

// A view renders into root and returns its cleanup (charts, timers,
// listeners), which the router calls after aborting ctx.signal.
export type View = (root: HTMLElement, ctx: ViewContext) => () => void;

// promLabel quotes a label value for a PromQL selector.
export function promString(s: string): string {
  return '"' + s.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
}
