// Measures the heatmap's main-thread CPU in headless Chromium.
// Usage: node test/perf.mjs URL [SECONDS]; run by TestBrowserPerf
// (VIGIL_WEB_PERF=1) against a fake cluster of 20,000 nodes at 1 Hz.
// Reports CDP Performance.getMetrics TaskDuration over the window divided
// by its length: the fraction of one core the tab's renderer used.
import { launch } from "./browser.mjs";

const base = process.argv[2];
const seconds = Number(process.argv[3] ?? 20);
const shots = process.argv[4];
const { page, ctx, close } = await launch({ width: 1600, height: 1000 });
try {
  await page.goto(base + "/#/heatmap?m=cpu");
  await page.waitForFunction(() => window.__vigil?.heatmap?.frames >= 3, null, { timeout: 30000 });
  const cdp = await ctx.newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
  const s0 = await page.evaluate(() => ({ ...window.__vigil.heatmap }));
  const m0 = await metrics();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const m1 = await metrics();
  const wall = (performance.now() - t0) / 1000;
  const s1 = await page.evaluate(() => ({ ...window.__vigil.heatmap }));
  const frames = s1.frames - s0.frames;
  const out = {
    nodes: s1.nodes,
    window_s: +wall.toFixed(1),
    frames,
    cells_painted_per_frame: Math.round((s1.cellsPainted - s0.cellsPainted) / Math.max(1, frames)),
    task_core_fraction: +((m1.TaskDuration - m0.TaskDuration) / wall).toFixed(4),
    script_core_fraction: +((m1.ScriptDuration - m0.ScriptDuration) / wall).toFixed(4),
    layout_core_fraction: +((m1.LayoutDuration - m0.LayoutDuration) / wall).toFixed(4),
    js_heap_mb: +(m1.JSHeapUsedSize / 1048576).toFixed(1),
  };
  out.status = await page.textContent(".status");
  console.log(JSON.stringify(out));
  if (shots) await page.screenshot({ path: `${shots}/heatmap-${s1.nodes}.png` });
  if (out.frames < seconds * 0.8) throw new Error(`only ${frames} frames in ${seconds}s`);
  if (out.task_core_fraction > 0.5) throw new Error(`tab used ${out.task_core_fraction} of a core, budget 0.5`);
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await close();
}
