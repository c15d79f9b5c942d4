// Browser test of the Fabric view against a running Vigil with fabric
// data (`vigil demo`, which simulates a swept fat tree), then a render
// measurement on a synthetic fabric of 256 switches and 12,852 ports.
// Usage: node test/fabric-e2e.mjs URL [SCREENSHOT_DIR]
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { launch, check } from "./browser.mjs";

const [base, shotsArg] = process.argv.slice(2);
if (!base) {
  console.error("usage: node test/fabric-e2e.mjs URL [SCREENSHOT_DIR]");
  process.exit(2);
}
const shots = shotsArg ?? "build/screenshots";
await mkdir(shots, { recursive: true });
const { page, close } = await launch({ width: 1400, height: 1000 });
page.setDefaultTimeout(20000);
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
const shot = (name, fullPage = false) => page.screenshot({ path: path.join(shots, name), fullPage });
const api = async (p) => (await (await fetch(base + p)).json()).data;

try {
  const f = await api("/api/v1/fabric?window=1m");
  // 1. The tree: every switch a box, every inter-switch link an edge.
  await page.goto(base + "/#/fabric");
  await page.waitForFunction(() => window.__vigil?.fabric?.loads >= 1 && window.__vigil.fabric.edges > 0);
  const st = await page.evaluate(() => ({ ...window.__vigil.fabric }));
  const inter = f.links.filter((l) => l.remote_type === "switch").length;
  check(st.boxes === f.switches.length, `${st.boxes} switch boxes for ${f.switches.length} switches`);
  check(st.edges === inter / 2, `${st.edges} links drawn for ${inter} switch-port ends`);
  check(st.colours >= 2, `links in ${st.colours} colours`);
  check(st.cells === 0, "no matrix for a small fabric");
  const painted = await page.evaluate(() => {
    const c = document.querySelector(".fabric-canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] + d[i + 1] + d[i + 2] > 120) n++;
    return n;
  });
  check(painted > 2000, `the canvas is drawn (${painted} bright pixels)`);
  await shot("fabric-util.png");

  // 2. Colour by xmit wait: the worst link by wait is drawn, click it.
  await page.selectOption(".fabric-view select[aria-label='colour by']", "wait");
  await page.waitForFunction(() => location.hash.includes("color=wait") && window.__vigil?.fabric?.loads >= 1 && window.__vigil.fabric.edges > 0);
  await shot("fabric-wait.png");
  // The worst switch-to-switch link by wait (by bytes if none waits).
  const pick = async (by) => (await api(`/api/v1/fabric/top?by=${by}&limit=1000`)).links.filter((l) => l.remote_type === "switch" && l.up)[0];
  let worst = await pick("xmit_wait");
  if (!(worst.value > 0)) worst = await pick("bytes");
  check(worst.value > 0, `the worst link is ${worst.name} (${Math.round(worst.value)}/s)`);
  const pos = await page.evaluate((n) => window.__vigil.fabric.locateEdge(n), worst.name);
  check(pos !== null, `${worst.name} is on the canvas`);
  await page.mouse.move(pos.x, pos.y);
  await page.waitForFunction(() => !document.querySelector(".fabric-view .tooltip").hidden);
  const tipText = await page.textContent(".fabric-view .tooltip");
  check(/xmit wait/.test(tipText) && tipText.includes(" → "), `hover names the link: "${tipText.slice(0, 90)}…"`);
  await page.mouse.click(pos.x, pos.y);
  await page.waitForFunction(() => location.hash.includes("link="));
  await page.waitForFunction(() => window.__vigil?.fabric?.charts >= 3);
  const sel = await page.evaluate(() => ({ jobs: window.__vigil.fabric.jobs, charts: window.__vigil.fabric.charts, title: document.querySelector(".fabric-detail h3")?.textContent }));
  check(sel.charts >= 3, `the link's counters over time: ${sel.charts} charts`);
  check(sel.title && sel.title.includes(" → "), `detail of ${sel.title}`);
  check(Array.isArray(sel.jobs), `jobs below it: ${sel.jobs.join(" ") || "none"}`);
  await shot("fabric-link.png", true);

  // 3. A job's page lists the links its nodes use.
  const jt = await api("/api/v1/fabric/top?by=xmit_wait&limit=50");
  const withJob = jt.links.find((l) => l.jobs && l.jobs.length);
  if (withJob) {
    const id = withJob.jobs[0].id;
    await page.goto(base + "/#/job/" + id);
    await page.waitForSelector(".job-fabric tbody tr");
    const rows = await page.$$eval(".job-fabric tbody tr", (t) => t.map((r) => r.dataset.link));
    check(rows.length > 0, `job ${id}: ${rows.length} fabric links, worst ${rows[0]}`);
    await shot("fabric-job.png", true);
  }

  // 4. Render time for 256 switches and 12,852 ports (synthetic answer).
  const big = synth(18, 238, 18);
  await page.route("**/api/v1/fabric?*", (r) => r.fulfill({ contentType: "application/json", body: JSON.stringify({ status: "success", data: big }) }));
  const t0 = Date.now();
  await page.goto(base + "/#/fabric?refresh=5s&color=util");
  await page.waitForFunction(() => window.__vigil?.fabric?.loads >= 1 && window.__vigil.fabric.edges > 0);
  const firstPaint = Date.now() - t0;
  await page.waitForFunction(() => window.__vigil.fabric.loads >= 3, null, { timeout: 30000 });
  await page.evaluate(() => window.__vigil.fabric.redraw(20));
  const big1 = await page.evaluate(() => ({ ...window.__vigil.fabric }));
  const ms = [...big1.renderMs].sort((a, b) => a - b);
  check(big1.boxes === 256 && big1.edges === 238 * 18, `synthetic fabric: ${big1.boxes} switches, ${big1.edges} links, ${big.links.length} ports`);
  check(big1.cells === 238 * 18, `and a matrix of ${big1.cells} cells (18 spines × 238 leaves)`);
  console.log(`RENDER 256 switches ${big.links.length} ports (tree and matrix): 20 draws, median ${ms[Math.floor(ms.length / 2)]} ms, min ${ms[0]}, max ${ms[ms.length - 1]}; page load to first paint ${firstPaint} ms`);
  await shot("fabric-256.png");
  check(errors.length === 0, `no page errors (${errors.join("; ")})`);
} finally {
  await close();
}

function synth(spines, leaves, hosts) {
  const sw = [];
  const links = [];
  const L = (s, p, r, rp, type, u, up = true) => ({
    name: `${s} p${p} → ${r} p${rp}`, switch_guid: "g-" + s, switch: s, port: String(p), remote_guid: "g-" + r.split(" ")[0], remote: r,
    remote_port: String(rp), remote_type: type, up, capacity_bytes_per_second: 12.5e9, tx_bytes_per_second: u * 12.5e9,
    rx_bytes_per_second: u * 11e9, utilization: u, xmit_wait_per_second: u > 0.8 ? (u - 0.8) * 1e7 : 0, errors_per_second: u > 0.95 ? 3 : 0,
  });
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  for (let s = 1; s <= spines; s++) sw.push({ guid: "g-spine" + s, name: "spine" + s, level: "spine", node_count: leaves * hosts, swept: true });
  for (let l = 1; l <= leaves; l++) {
    sw.push({ guid: "g-leaf" + l, name: "leaf" + l, level: "leaf", nodes: [], node_count: hosts, swept: true });
    for (let k = 1; k <= hosts; k++) links.push(L("leaf" + l, k, `cn${l}-${k} HCA-1`, 1, "ca", rnd()));
    for (let s = 1; s <= spines; s++) {
      const u = rnd() ** 6; // mostly quiet, a few hot
      const up = rnd() > 0.01;
      links.push(L("leaf" + l, hosts + s, "spine" + s, l, "switch", u, up));
      links.push(L("spine" + s, l, "leaf" + l, hosts + s, "switch", u * 0.9, up));
    }
  }
  return { time: new Date().toISOString(), window: "1m", switches: sw, links };
}
