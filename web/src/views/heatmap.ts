import { getJob, isAbort, liveHeatmap } from "../api";
import { h, type ViewContext } from "../dom";
import { BG_RGB, cssRGB, DOWN_RGB, MISSING_RGB, scaleRGB } from "../color";
import { dequantise, QUANT_DOWN, QUANT_MAX, QUANT_MISSING, type NodeEntry } from "../frame";
import { formatValue } from "../format";
import { Heatmap } from "../heatmap";
import { presets, selected } from "../presets";
import { placeNode } from "../layout";
import { parseScale, remap, remapTable } from "../scale";
// heatmapView: every node a cell, coloured by the live stream of one
// expression.
export function heatmapView(root: HTMLElement, { route, navigate, expose, signal }: ViewContext): () => void {
  const sel = selected(route.params);
  // ?job=ID outlines that job's nodes (the job page's "highlight" link).
  const jobId = (route.params.get("job") ?? "").slice(0, 200);
  const keepJob = (p: URLSearchParams) => {
    if (jobId) p.set("job", jobId);
    return p;
  };
  const custom = !sel.preset;
  const scale = parseScale(route.params, sel.preset?.range);

  const select = h("select", { "aria-label": "metric" },
    presets.map((p) => h("option", { value: p.id }, p.label)),
    h("option", { value: "custom" }, "PromQL…"),
  );
  select.value = custom ? "custom" : sel.preset!.id;
  const input = h("input.expr", { type: "text", spellcheck: "false", placeholder: "PromQL giving one value per node label", value: sel.expr });
  const apply = () => {
    const p = new URLSearchParams();
    const pre = presets.find((x) => x.expr === input.value.trim());
    if (pre) p.set("m", pre.id);
    else p.set("expr", input.value.trim());
    // A user-chosen scale stays with the expression; a preset's own range
    // follows the preset.
    if (route.params.has("scale") || route.params.has("lo")) scaleParams(p);
    keepJob(p);
    navigate({ view: "heatmap", params: p });
  };
  const scaleSel = h("select", { "aria-label": "colour scale" },
    h("option", { value: "fixed" }, "fixed"),
    h("option", { value: "auto" }, "auto (each frame's min–max)"),
  );
  scaleSel.value = scale.auto ? "auto" : "fixed";
  const loIn = h("input.bound", { type: "number", step: "any", "aria-label": "scale low", value: scale.auto ? "" : String(scale.lo) });
  const hiIn = h("input.bound", { type: "number", step: "any", "aria-label": "scale high", value: scale.auto ? "" : String(scale.hi) });
  loIn.hidden = hiIn.hidden = scale.auto;
  const scaleParams = (p: URLSearchParams) => {
    const lo = Number(loIn.value), hi = Number(hiIn.value);
    if (scaleSel.value === "auto") p.set("scale", "auto");
    else if (loIn.value !== "" && hiIn.value !== "" && lo < hi) {
      p.set("lo", String(lo));
      p.set("hi", String(hi));
    }
    return p;
  };
  const rescale = () => {
    const p = new URLSearchParams(route.params);
    p.delete("scale");
    p.delete("lo");
    p.delete("hi");
    navigate({ view: "heatmap", params: scaleParams(p) });
  };
  scaleSel.addEventListener("change", () => {
    if (scaleSel.value === "fixed" && (loIn.value === "" || hiIn.value === "")) {
      // From auto to fixed: the preset's range, else the one on screen.
      const [a, b] = sel.preset?.range ?? [+min.toPrecision(3), +(max > min ? max : min + 1).toPrecision(3)];
      loIn.value = String(a);
      hiIn.value = String(b);
    }
    rescale();
  });
  loIn.addEventListener("change", rescale);
  hiIn.addEventListener("change", rescale);
  select.addEventListener("change", () => {
    if (select.value === "custom") {
      input.focus();
      input.select();
      return;
    }
    navigate({ view: "heatmap", params: keepJob(new URLSearchParams({ m: select.value })) });
  });
  input.addEventListener("keydown", (e) => e.key === "Enter" && apply());

  const status = h("span.status", null, "connecting…");
  const err = h("div.error", { hidden: true });
  const lo = h("span.num"), hi = h("span.num");
  const unitName = { fraction: "%", bytes: "bytes", "bytes/s": "bytes/s", none: "" }[sel.unit];
  const caption = h("span.caption", null,
    (sel.preset?.label ?? "value") + (unitName ? ` (${unitName})` : "") + ":");
  const mode = h("span.mode", null, scale.auto ? "auto: this frame's min–max, colours differ between frames" : "fixed scale; values beyond it take its end colour");
  if (!scale.auto) {
    lo.textContent = formatValue(scale.lo, sel.unit);
    hi.textContent = (scale.hi > scale.lo ? "≥ " : "") + formatValue(scale.hi, sel.unit);
  }
  const bar = h("canvas.scale", { width: 256, height: 1 });
  const bctx = bar.getContext("2d")!;
  const imgd = bctx.createImageData(256, 1);
  for (let c = 0; c < 256; c++) {
    const [r, g, b] = scaleRGB((c / 255) * QUANT_MAX);
    imgd.data.set([r, g, b, 255], c * 4);
  }
  bctx.putImageData(imgd, 0, 0);
  const legend = h("div.legend", null,
    caption, lo, bar, hi, mode,
    h("span.swatch.down", { title: "up == 0: silent, reported down, or expected and never connected" }), "down",
    h("span.swatch.missing", { title: "no value for this expression" }), "no data",
  );
  const tip = h("div.tooltip", { hidden: true });
  const jobBar = h("div.job-highlight", { hidden: !jobId });
  let countJob = () => {};
  const wrap = h("div.hm-wrap");
  const el = h("section.view.heatmap-view", null,
    h("div.toolbar", null, h("label", null, "Colour by ", select), input, h("button", { onclick: apply }, "Apply"),
      h("label", null, "Scale ", scaleSel), loIn, hiIn, status),
    err, legend, jobBar, wrap, tip,
  );
  // Colours of the swatches come from the same constants as the canvas.
  el.style.setProperty("--down", cssRGB(DOWN_RGB));
  el.style.setProperty("--missing", cssRGB(MISSING_RGB));
  el.style.setProperty("--cellbg", cssRGB(BG_RGB));

  let nodes: NodeEntry[] = [];
  let min = 0, max = 0, lastT = 0, lastSize = 0;
  let hoverX = 0, hoverY = 0;
  let pending: Uint8Array | null = null;
  // raw holds the last frame's codes as sent (over min..max) for the
  // tooltip; the canvas gets them remapped onto the scale.
  let raw: Uint8Array = new Uint8Array(0), shown = new Uint8Array(0);
  const table = new Uint8Array(256);

  const showTip = (i: number, x: number, y: number) => {
    hoverX = x;
    hoverY = y;
    if (i < 0) {
      tip.hidden = true;
      return;
    }
    const c = raw[i] ?? QUANT_MISSING;
    const v = c === QUANT_DOWN ? "down" : c === QUANT_MISSING ? "no data" : "≈ " + formatValue(dequantise(c, min, max), sel.unit);
    tip.textContent = `${hm.nodeName(i)}: ${v}`;
    tip.hidden = false;
    tip.style.left = x + 14 + "px";
    tip.style.top = y + 14 + "px";
  };
  const hm = new Heatmap(wrap, showTip, (i) => {
    navigate({ view: "node", node: hm.nodeName(i), params: new URLSearchParams({ from: "now-1h", to: "now" }) });
  });

  const apply1 = (q: Uint8Array) => {
    raw = q;
    if (shown.length !== q.length) shown = new Uint8Array(q.length);
    hm.update(remap(q, remapTable(min, max, scale, table), shown));
    let down = 0, missing = 0;
    for (let i = 0; i < q.length; i++) {
      if (q[i] === QUANT_DOWN) down++;
      else if (q[i] === QUANT_MISSING) missing++;
    }
    status.textContent = `${nodes.length} nodes · ${down} down · ${missing} no data · ${(lastSize / 1024).toFixed(1)} KiB/frame (${(lastSize / Math.max(1, nodes.length)).toFixed(2)} B/node)`;
    if (hm.hovered() >= 0) showTip(hm.hovered(), hoverX, hoverY);
  };
  const onVisible = () => {
    if (!document.hidden && pending) {
      apply1(pending);
      pending = null;
    }
  };
  document.addEventListener("visibilitychange", onVisible);

  liveHeatmap(sel.expr, {
    nodes(n) {
      nodes = n;
      hm.setNodes(n);
      countJob();
    },
    frame(f, wire) {
      err.hidden = true;
      lastT = f.t;
      lastSize = wire;
      if (f.min !== min || f.max !== max) {
        min = f.min;
        max = f.max;
        if (scale.auto) {
          lo.textContent = formatValue(min, sel.unit);
          hi.textContent = formatValue(max, sel.unit);
        }
      }
      // A hidden tab keeps only the latest frame and paints it on return.
      if (document.hidden) pending = f.q;
      else apply1(f.q);
    },
    error(msg, fatal) {
      err.textContent = (fatal ? "Query failed: " : "Live update failed, retrying: ") + msg;
      err.hidden = false;
    },
    state(s) {
      if (s === "live") return;
      // A refused stream (503: too many viewers) or a lost server is
      // reconnecting; only a bad expression closes it (error says why).
      status.textContent = s === "closed" ? "stream closed" : s + "…";
    },
  }, signal);
  if (jobId) {
    jobBar.textContent = `job ${jobId}: loading…`;
    getJob(jobId, { signal }).then((j) => {
      const nodes = j.nodes ?? [];
      hm.setHighlight(nodes);
      const count = h("span");
      // The node list may come before or after the job, and change.
      countJob = () => (count.textContent = `${hm.highlighted().length} of its ${nodes.length} node${nodes.length === 1 ? "" : "s"} on this map`);
      countJob();
      jobBar.replaceChildren("Outlined: ", h("a", { href: "#/job/" + encodeURIComponent(j.id) }, "job " + j.id),
        ` (${j.user ?? "?"}, ${j.state}): `, count, " ",
        h("a", { href: "#/heatmap?" + new URLSearchParams([...route.params].filter(([k]) => k !== "job")) }, "✕ clear"));
    }).catch((e: Error) => {
      if (!isAbort(e)) jobBar.replaceChildren(h("span.error", null, `job ${jobId}: ${e.message}`));
    });
  }
  expose({ heatmap: hm.stats, highlighted: () => hm.highlighted(), lastFrame: () => lastT, expr: sel.expr, scale, code: (n: string) => hm.code(nodes.findIndex((x) => x.name === n)), locate: (n: string) => hm.clientPos(n),
    rack: (n: string) => { const x = nodes.find((e) => e.name === n); return x ? placeNode(x).rack : null; } });

  root.append(el);
  return () => {
    hm.destroy();
    document.removeEventListener("visibilitychange", onVisible);
  };
}
