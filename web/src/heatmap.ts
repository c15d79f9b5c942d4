import { paintCell } from "./cells";
import { buildLUT, DOWN_BG_RGB, BG_RGB, packRGBA } from "./color";
import { QUANT_DOWN, type NodeEntry } from "./frame";
import { computeLayout, hitTest, type Layout } from "./layout";

// Counters for tests and the perf script (read via window.__vigil).
export interface HeatmapStats {
  frames: number;
  cellsPainted: number;
  nodes: number;
  valued: number; // cells currently showing a value (not down, not missing)
}

// Heatmap draws one cell per node on a canvas. Cells live in an ImageData
// buffer; a frame repaints only cells whose code changed and uploads the
// bounding box of those cells. Labels and the hover outline are on a second
// canvas on top, so uploads never erase them. No per-node DOM.
export class Heatmap {
  readonly stats: HeatmapStats = { frames: 0, cellsPainted: 0, nodes: 0, valued: 0 };
  private base: HTMLCanvasElement;
  private overlay: HTMLCanvasElement;
  private ctx: CanvasRenderingContext2D;
  private octx: CanvasRenderingContext2D;
  private img: ImageData | null = null;
  private px: Uint32Array | null = null;
  private lut: Uint32Array;
  private downBg = packRGBA(DOWN_BG_RGB);
  private bg = packRGBA(BG_RGB);
  private nodes: NodeEntry[] = [];
  private codes = new Uint8Array(0);
  private layout: Layout | null = null;
  private hover = -1;
  private highlight = new Set<string>();
  private marked: number[] = []; // indices of highlighted nodes
  private dpr = 1;
  private ro: ResizeObserver;

  constructor(
    private wrap: HTMLElement,
    private onHover: (node: number, clientX: number, clientY: number) => void,
    private onClick: (node: number) => void,
    // lut colours the codes (the Status view paints states with its own).
    lut: Uint32Array = buildLUT(),
  ) {
    this.lut = lut;
    wrap.classList.add("heatmap");
    this.base = document.createElement("canvas");
    this.overlay = document.createElement("canvas");
    this.overlay.className = "overlay";
    wrap.append(this.base, this.overlay);
    this.ctx = this.base.getContext("2d", { alpha: false })!;
    this.octx = this.overlay.getContext("2d")!;
    this.overlay.addEventListener("mousemove", (e) => this.move(e));
    this.overlay.addEventListener("mouseleave", () => this.setHover(-1, 0, 0));
    this.overlay.addEventListener("click", (e) => {
      const i = this.nodeAt(e);
      if (i >= 0) this.onClick(i);
    });
    let lastW = 0;
    this.ro = new ResizeObserver(() => {
      const w = wrap.clientWidth;
      if (w !== lastW) {
        lastW = w;
        this.relayout();
      }
    });
    this.ro.observe(wrap);
  }

  destroy(): void {
    this.ro.disconnect();
    this.wrap.replaceChildren();
  }

  setNodes(nodes: NodeEntry[]): void {
    this.nodes = nodes;
    this.codes = new Uint8Array(nodes.length).fill(255);
    this.stats.nodes = nodes.length;
    this.stats.valued = 0;
    this.hover = -1;
    this.markHighlight();
    this.relayout();
  }

  // setHighlight outlines the cells of these nodes (a job's), whatever the
  // frames say; it returns how many of them are on the map.
  setHighlight(names: Iterable<string>): number {
    this.highlight = new Set(names);
    this.markHighlight();
    this.drawOverlay();
    return this.marked.length;
  }

  highlighted(): string[] {
    return this.marked.map((i) => this.nodes[i].name);
  }

  private markHighlight(): void {
    this.marked = [];
    if (this.highlight.size === 0) return;
    this.nodes.forEach((n, i) => this.highlight.has(n.name) && this.marked.push(i));
  }

  nodeName(i: number): string {
    return this.nodes[i]?.name ?? "";
  }

  code(i: number): number {
    return this.codes[i] ?? 255;
  }

  // update applies a frame's codes, repainting changed cells only.
  update(q: Uint8Array): void {
    this.stats.frames++;
    const l = this.layout;
    if (!l || !this.px || q.length !== this.codes.length) return;
    let x0 = Infinity, y0 = Infinity, x1 = -1, y1 = -1;
    let painted = 0;
    let valued = 0;
    for (let i = 0; i < q.length; i++) {
      const c = q[i];
      if (c < QUANT_DOWN) valued++;
      if (c === this.codes[i]) continue;
      this.codes[i] = c;
      const x = l.cellX[i], y = l.cellY[i];
      this.paintCell(x, y, c);
      painted++;
      if (x < x0) x0 = x;
      if (y < y0) y0 = y;
      if (x > x1) x1 = x;
      if (y > y1) y1 = y;
    }
    this.stats.valued = valued;
    if (painted === 0) return;
    this.stats.cellsPainted += painted;
    this.ctx.putImageData(this.img!, 0, 0, x0, y0, x1 - x0 + l.cell, y1 - y0 + l.cell);
  }

  private paintCell(x: number, y: number, c: number): void {
    paintCell(this.px!, this.img!.width, x, y, this.layout!.cell, c, this.lut, this.downBg);
  }

  private relayout(): void {
    const dpr = (this.dpr = window.devicePixelRatio || 1);
    const cssW = Math.max(200, this.wrap.clientWidth);
    const top = this.wrap.getBoundingClientRect().top;
    const avail = Math.max(240, window.innerHeight - Math.max(0, top) - 16);
    const l = (this.layout = computeLayout(this.nodes, Math.floor(cssW * dpr), Math.floor(avail * dpr), dpr));
    const w = Math.floor(cssW * dpr);
    const h = Math.max(1, l.height);
    for (const c of [this.base, this.overlay]) {
      c.width = w;
      c.height = h;
      c.style.width = w / dpr + "px";
      c.style.height = h / dpr + "px";
    }
    this.img = this.ctx.createImageData(w, h);
    this.px = new Uint32Array(this.img.data.buffer);
    this.px.fill(this.bg);
    for (let i = 0; i < this.nodes.length; i++) this.paintCell(l.cellX[i], l.cellY[i], this.codes[i]);
    this.ctx.putImageData(this.img, 0, 0);
    this.drawOverlay();
  }

  private drawOverlay(): void {
    const l = this.layout;
    const o = this.octx;
    o.clearRect(0, 0, this.overlay.width, this.overlay.height);
    if (!l) return;
    const dpr = this.dpr;
    o.fillStyle = "#c9d1d9";
    o.textBaseline = "top";
    o.font = `${Math.round(12 * dpr)}px system-ui, sans-serif`;
    for (const p of l.partitions) o.fillText(p.label || "racks", 0, p.y + 2 * dpr);
    if (l.labelH > 0) {
      o.fillStyle = "#8b949e";
      o.font = `${Math.round(10 * dpr)}px system-ui, sans-serif`;
      for (const r of l.racks) o.fillText(r.label, r.x, r.y - l.labelH + dpr, l.rackW);
    }
    if (this.marked.length) {
      o.strokeStyle = "#ff7b72";
      o.lineWidth = Math.max(2, Math.round(dpr * 2.5));
      const w = o.lineWidth;
      for (const i of this.marked) o.strokeRect(l.cellX[i] - w / 2, l.cellY[i] - w / 2, l.cell + w, l.cell + w);
    }
    if (this.hover >= 0) {
      const x = l.cellX[this.hover], y = l.cellY[this.hover];
      o.strokeStyle = "#ffffff";
      o.lineWidth = Math.max(1, Math.round(dpr * 1.5));
      o.strokeRect(x - o.lineWidth / 2, y - o.lineWidth / 2, l.cell + o.lineWidth, l.cell + o.lineWidth);
    }
  }

  private nodeAt(e: MouseEvent): number {
    if (!this.layout) return -1;
    const r = this.overlay.getBoundingClientRect();
    return hitTest(this.layout, (e.clientX - r.left) * this.dpr, (e.clientY - r.top) * this.dpr);
  }

  private move(e: MouseEvent): void {
    this.setHover(this.nodeAt(e), e.clientX, e.clientY);
  }

  private setHover(i: number, x: number, y: number): void {
    this.overlay.style.cursor = i >= 0 ? "pointer" : "default";
    if (i !== this.hover) {
      this.hover = i;
      this.drawOverlay();
    }
    this.onHover(i, x, y);
  }

  // clientPos returns the viewport position of a node's cell centre (tests).
  clientPos(name: string): { x: number; y: number } | null {
    const i = this.nodes.findIndex((n) => n.name === name);
    if (i < 0 || !this.layout) return null;
    const r = this.overlay.getBoundingClientRect();
    const c = this.layout.cell / 2;
    return { x: r.left + (this.layout.cellX[i] + c) / this.dpr, y: r.top + (this.layout.cellY[i] + c) / this.dpr };
  }

  hovered(): number {
    return this.hover;
  }
}
