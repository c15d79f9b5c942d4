// Browser end-to-end test of the dashboard. Usage: node test/e2e.mjs URL [SCREENSHOT_DIR]
// Run by TestBrowserE2E in internal/web against a fake cluster of 300 nodes.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { launch, check } from "./browser.mjs";

const base = process.argv[2];
const shots = process.argv[3] ?? "build/screenshots";
if (!base) {
  console.error("usage: node test/e2e.mjs URL [SCREENSHOT_DIR]");
  process.exit(2);
}
await mkdir(shots, { recursive: true });
const { page, close } = await launch();
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
// Static files the page asks for (icon, bundle) must all exist.
const missing = [];
page.on("response", (r) => r.status() === 404 && !new URL(r.url()).pathname.startsWith("/api/") && missing.push(r.url()));
const shot = (name, fullPage = false) => page.screenshot({ path: path.join(shots, name), fullPage });

try {
  // 1. Heatmap fills from the live stream.
  await page.goto(base + "/#/heatmap?m=cpu");
  await page.waitForFunction(() => window.__vigil?.heatmap?.frames >= 2 && window.__vigil.heatmap.valued > 0, null, { timeout: 15000 });
  const hm = await page.evaluate(() => window.__vigil.heatmap);
  check(hm.nodes === 300, `heatmap has 300 nodes (got ${hm.nodes})`);
  // 300 nodes: 8 down (every 37th), 5 without value (every 53rd, one of them... none overlap below 300).
  check(hm.valued === 300 - 8 - 5, `cells with a value = 287 (got ${hm.valued})`);
  const px = await page.evaluate(() => {
    const c = document.querySelector(".hm-wrap canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const colours = new Set();
    let down = 0, grey = 0;
    for (let i = 0; i < d.length; i += 4) {
      colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (d[i] === 214 && d[i + 1] === 48 && d[i + 2] === 49) down++;
      if (d[i] === 88 && d[i + 1] === 88 && d[i + 2] === 96) grey++;
    }
    return { colours: colours.size, down, grey };
  });
  check(px.colours > 20, `canvas shows a range of colours (${px.colours} distinct)`);
  check(px.down > 0 && px.grey > 0, `down (hatched red) and missing (grey) cells are drawn (${px.down}, ${px.grey} px)`);
  const legend = await page.textContent(".legend");
  check(/CPU busy \(%\):\s*0%\s*≥ 100%\s*fixed scale/.test(legend), `legend shows a fixed 0–100 % scale with its unit: "${legend.trim()}"`);

  // 2. Hover shows name and value.
  const pos = await page.evaluate(() => window.__vigil.locate("cn00002"));
  await page.mouse.move(pos.x, pos.y);
  await page.waitForSelector(".tooltip:not([hidden])");
  const tip = await page.textContent(".tooltip");
  check(/^cn00002: ≈ \d/.test(tip), `tooltip names the node with its value: "${tip}"`);
  // On the fixed scale a cell's colour code is its value's place in 0..100 %,
  // not its place between this frame's min and max.
  // A new frame may land between reading the tooltip and the cell, so both
  // are read in one evaluation, and again if a frame came between.
  let pct = NaN, code = -1;
  for (let i = 0; i < 10; i++) {
    const r = await page.evaluate(() => {
      const f0 = window.__vigil.heatmap?.frames;
      const t = document.querySelector(".tooltip").textContent;
      const c = window.__vigil.code("cn00002");
      return { t, c, same: f0 === window.__vigil.heatmap?.frames };
    });
    pct = parseFloat(r.t.split("≈ ")[1]);
    code = r.c;
    if (r.same && Math.abs(code - (pct / 100) * 253) <= 4) break;
    await page.waitForTimeout(200);
  }
  check(Math.abs(code - (pct / 100) * 253) <= 4, `cn00002 at ${pct}% is drawn with code ${code} of 253 on the fixed scale`);
  const downPos = await page.evaluate(() => window.__vigil.locate("cn00037"));
  await page.mouse.move(downPos.x, downPos.y);
  await page.waitForFunction(() => document.querySelector(".tooltip").textContent.startsWith("cn00037"));
  check((await page.textContent(".tooltip")) === "cn00037: down", "a down node says down");
  await shot("heatmap.png");

  // The auto scale is one click away, and says what it means.
  await page.selectOption("select[aria-label='colour scale']", "auto");
  await page.waitForFunction(() => location.hash === "#/heatmap?m=cpu&scale=auto" && window.__vigil?.heatmap?.frames >= 1);
  const autoLegend = await page.textContent(".legend");
  check(/auto: this frame's min–max/.test(autoLegend), `auto scale says so in the legend: "${autoLegend.trim()}"`);
  await page.selectOption("select[aria-label='colour scale']", "fixed");
  await page.waitForFunction(() => location.hash === "#/heatmap?m=cpu&lo=0&hi=1");
  check(true, "back to fixed: the preset's 0–100 %, in the URL: " + (await page.evaluate(() => location.hash)));

  // 3. Another preset re-streams; the URL carries it.
  await page.selectOption("select[aria-label=metric]", "mem");
  await page.waitForFunction(() => location.hash === "#/heatmap?m=mem" && window.__vigil?.heatmap?.frames >= 1);
  check(true, "switching preset updates the URL and the stream");

  // 4. A bad expression gives a clear error, no frames.
  await page.goto(base + "/#/heatmap?expr=" + encodeURIComponent("rate(node_load1"));
  await page.waitForSelector(".heatmap-view .error:not([hidden])");
  const err = await page.textContent(".heatmap-view .error");
  check(/Query failed: .*parse error/.test(err), `bad expression shows the error: "${err}"`);

  // 5. Click a node: node view with charts and processes.
  await page.goto(base + "/#/heatmap?m=load1");
  await page.waitForFunction(() => window.__vigil?.heatmap?.frames >= 1);
  const p2 = await page.evaluate(() => window.__vigil.locate("cn00010"));
  await page.mouse.click(p2.x, p2.y);
  await page.waitForFunction(() => location.hash.startsWith("#/node/cn00010"));
  await page.waitForFunction(() => document.querySelectorAll(".chart.has-data canvas").length >= 6, null, { timeout: 15000 });
  const titles = await page.$$eval(".chart.has-data .u-title", (l) => l.map((e) => e.textContent));
  check(titles.join(",") === "CPU by mode,Memory,Load,Network,Disk,Up", `node view charts: ${titles.join(", ")}`);
  const legendText = await page.$$eval(".chart.has-data .u-legend", (l) => l.map((e) => e.textContent).join(" "));
  check(/user/.test(legendText) && /rx eth0/.test(legendText) && /load15/.test(legendText), "chart legends name modes, devices and load series");
  await page.waitForSelector(".procs table");
  const procRows = await page.$$eval(".procs tbody tr", (l) => l.map((r) => r.textContent));
  check(procRows.length === 6 && procRows[0].includes("lmp_mpi"), `top processes table, busiest first (${procRows.length} rows)`);
  check((await page.textContent(".badge")) === "up", "node badge says up");
  // Every chart spans the same time range, so their axes line up.
  const xr = await page.evaluate(() => window.__vigil.node.xRanges());
  check(xr.length === 6 && xr.every((x) => x[0] === xr[0][0] && x[1] === xr[0][1]), `charts share one time axis: ${JSON.stringify(xr[0])} (${xr.length} charts)`);
  // Byte axes tick on binary steps, labelled exactly in one binary unit.
  const mem = await page.evaluate(() => window.__vigil.node.yLabels("Memory"));
  check(mem.length >= 2 && mem.every((l) => /^\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)$/.test(l)) && new Set(mem.map((l) => l.split(" ")[1])).size === 1,
    `memory axis in one binary unit: ${mem.join(", ")}`);
  const memVals = mem.map((l) => parseFloat(l));
  const stepB = memVals[1] - memVals[0];
  const stepBytes = stepB * 1024 ** ["B", "KiB", "MiB", "GiB", "TiB"].indexOf(mem[0].split(" ")[1]);
  check(memVals.every((v, i) => Math.abs(v - memVals[0] - i * stepB) < 1e-6) && Number.isInteger(Math.log2(stepBytes)),
    `memory ticks evenly spaced by a power of two bytes (${stepBytes})`);
  check(/refresh|every/.test(await page.$eval("select[aria-label=refresh]", (s) => s.selectedOptions[0].textContent)), "node view has a refresh picker");
  check((await page.$eval("select[aria-label=refresh]", (s) => s.value)) === "10s", "node view refreshes every 10s by default");
  await shot("node.png", true);

  // The node view refreshes by itself while its range ends now.
  await page.goto(base + "/#/node/cn00010?from=now-15m&to=now&refresh=5s");
  await page.waitForFunction(() => window.__vigil?.node?.loads >= 2, null, { timeout: 15000 });
  check(true, "node view reloaded by itself after 5 s");

  // An unknown node says so, instead of empty panels.
  await page.goto(base + "/#/node/cn99999?from=now-1h&to=now");
  await page.waitForSelector(".no-such-node");
  const nsn = await page.textContent(".no-such-node");
  check(/No such node: "cn99999"/.test(nsn) && (await page.$$(".chart")).length === 0, `unknown node: "${nsn}"`);
  await shot("node-unknown.png");
  await page.goto(base + "/#/node/cn00010?from=now-1h&to=now");
  await page.waitForFunction(() => document.querySelectorAll(".chart.has-data canvas").length >= 6, null, { timeout: 15000 });

  // 6. Drag to zoom: absolute range lands in the URL and charts reload.
  const box = await page.locator(".chart.has-data .u-over").first().boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction(() => /from=\d+&to=\d+/.test(location.hash));
  await page.waitForFunction(() => document.querySelectorAll(".chart.has-data canvas").length >= 6);
  check(true, "drag-zoom puts an absolute range in the URL: " + (await page.evaluate(() => location.hash)));

  // 7. Explore: type a query, see chart and table.
  await page.click("nav a[href='#/explore']");
  await page.fill("textarea.promql", "node_load1");
  await page.click("button.run");
  await page.waitForSelector("table.results tbody tr");
  await page.waitForSelector(".explore-view .chart.has-data canvas");
  const rows = await page.$$eval("table.results tbody tr", (l) => l.length);
  check(rows === 295, `explore table lists every node with a value (${rows})`);
  check((await page.evaluate(() => location.hash)).includes("q=node_load1"), "explore query is in the URL");
  await shot("explore.png");
  // A counter: its raw total is graphed, with rate() offered and applied.
  await page.fill("textarea.promql", "node_cpu_seconds_total");
  await page.click("button.run");
  await page.waitForSelector(".explore-view .hint:not([hidden])");
  await page.waitForFunction(() => window.__vigil?.explore?.runs >= 1);
  check(await page.$eval(".explore-view .error", (e) => e.hidden), "a plain counter name is no error");
  await shot("explore-counter.png");
  await page.click("button.apply-hint");
  await page.waitForFunction(() => decodeURIComponent(location.hash).includes("q=rate(node_cpu_seconds_total[5m])"));
  check(true, "the counter hint applies rate()");
  await page.fill("textarea.promql", "node_cpu_seconds_total[1m]");
  await page.click("button.run");
  await page.waitForSelector("table.results tbody tr");
  check(await page.$eval(".explore-view .error", (e) => e.hidden), "a range selector gives its samples, no range-vector error");
  // Explore has a refresh picker too, off by default.
  check((await page.$eval(".explore-view select[aria-label=refresh]", (s) => s.value)) === "off", "explore refresh picker, off by default");
  await page.fill("textarea.promql", "sum(rate(x[1m])");
  await page.click("button.run");
  await page.waitForSelector(".explore-view .error:not([hidden])");
  check(/parse error/.test(await page.textContent(".explore-view .error")), "explore shows query errors");
  check((await page.$$(".explore-view .error > div")).length === 1, "a query error is shown once");

  // 8. Tree view.
  await page.click("nav a[href='#/tree']");
  await page.waitForSelector(".tnode");
  const tree = await page.textContent(".tree");
  check(/agg-b/.test(tree) && /drops=1742/.test(tree) && /1\/2 children up/.test(tree), "tree shows aggregators, children up, lag and drops");
  const skew = await page.textContent(".clock-skew");
  check(/2 nodes/.test(skew) && /cn00099\s*2h 0m ahead/.test(skew) && /cn00100\s*1h 0m behind/.test(skew) && !/clock_skew/.test(tree),
    `tree view lists the nodes in clock skew with their offsets: "${skew}"`);
  const downList = await page.textContent(".down-nodes");
  check(/8 nodes/.test(downList) && /cn00037 cn00074/.test(downList) && !/down_ranges/.test(tree),
    `tree view names the down nodes: "${downList}"`);
  await shot("tree.png");

  // 9. Logs on a server without log intake: the API's reason is shown.
  await page.click("nav a[href='#/logs']");
  await page.waitForSelector(".logs-view .error:not([hidden])");
  const lerr = await page.textContent(".logs-view .error");
  check(lerr === "Logs unavailable: log intake is off: start vigil server with --syslog-udp or --syslog-tcp", `logs view shows why it is unavailable: "${lerr}"`);
  await page.waitForFunction(() => document.querySelector(".patterns-list").textContent === "Patterns unavailable.");
  check(await page.evaluate(() => window.__vigil.logs.unavailable === true && window.__vigil.logs.rows === 0), "no rows, patterns unavailable");
  await shot("logs-unavailable.png");

  // 10. Jobs view (fixtures of internal/web/jobs_fixture_test.go): newest
  // first, sorted by efficiency from the header, filters in the URL.
  // The list re-renders after the URL changes: wait (bounded) for the rows
  // wanted, then read them, so a slow render is not a failure.
  const rowsNow = async (want) => {
    await page.waitForFunction((w) => window.__vigil?.jobs?.rows?.join(",") === w, want, { timeout: 5000 }).catch(() => {});
    return page.evaluate(() => window.__vigil.jobs.rows.join(","));
  };
  await page.click("nav a[href='#/jobs']");
  await page.waitForFunction(() => window.__vigil?.jobs?.loads >= 1);
  let jobRows = await rowsNow("1005,1001,1004_7,1002,1003");
  check(jobRows === "1005,1001,1004_7,1002,1003", `jobs listed newest first: ${jobRows}`);
  const eff = await page.$eval("tr[data-job='1001'] td.eff", (e) => e.textContent);
  check(eff === "—", `a job without summary shows "—" for its efficiency ("${eff}")`);
  await page.click("th[data-sort=cpu]");
  await page.waitForFunction(() => location.hash === "#/jobs?sort=cpu" && window.__vigil?.jobs?.loads >= 1);
  jobRows = await rowsNow("1004_7,1002,1003,1005,1001");
  check(jobRows === "1004_7,1002,1003,1005,1001", `CPU efficiency ascending, unknown last: ${jobRows}`);
  await page.fill("input[name=user]", "alice");
  await page.press("input[name=user]", "Enter");
  await page.waitForFunction(() => location.hash === "#/jobs?user=alice&sort=cpu" && window.__vigil?.jobs?.loads >= 1);
  jobRows = await rowsNow("1003,1001");
  check(jobRows === "1003,1001", `user filter in the URL and applied: ${jobRows}`);
  // A shared link opens the same list.
  await page.goto(base + "/#/jobs?partition=gpu&sort=-mem&refresh=off");
  await page.waitForFunction(() => window.__vigil?.jobs?.loads >= 1);
  check((await rowsNow("1002")) === "1002" && (await page.inputValue("input[name=partition]")) === "gpu",
    "a shared link restores the filters");
  await page.goto(base + "/#/jobs");
  await page.waitForFunction(() => window.__vigil?.jobs?.loads >= 1);
  await shot("jobs.png");

  // 11. Job page: header, one band chart per metric, the straggler in red
  // (line, legend, table), the notes.
  await page.click("tr[data-job='1002'] a[href='#/job/1002']");
  await page.waitForFunction(() => window.__vigil?.job?.loaded && document.querySelectorAll(".job-charts .chart canvas").length >= 4);
  const head = await page.textContent(".job-header");
  check(/bob/.test(head) && /chem/.test(head) && /gpu/.test(head) && /cores256/.test(head) && /memory asked512 GiB/.test(head) && /3h 00m \/ 6h 00m/.test(head),
    `job header: "${head}"`);
  const jc = await page.evaluate(() => window.__vigil.job.charts());
  check(jc.length === 4 && jc.every((c) => c.nodes.length === 8 && c.points > 0), `4 charts with 8 node lines each (${jc.map((c) => c.points).join(", ")} points)`);
  check(jc.every((c) => c.shown.join() === "cn00013"), `only the straggler's line is drawn before hover: ${jc.map((c) => c.shown.join("+")).join(", ")}`);
  const red = await page.evaluate(() => {
    const c = document.querySelector(".job-charts .chart[data-metric=cpu] canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 248 && d[i + 1] === 81 && d[i + 2] === 73) n++;
    return n;
  });
  check(red > 50, `the straggler's line is drawn in red (${red} px)`);
  check((await page.$$eval(".job-charts .u-legend .u-series.straggler", (l) => l.map((e) => e.textContent))).every((t) => t.includes("cn00013")) &&
    (await page.$$(".job-charts .u-legend .u-series.straggler")).length === 4, "each legend names the straggler");
  check((await page.$eval(".per-node tr.straggler", (e) => e.dataset.node)) === "cn00013" && (await page.$$(".per-node tr.straggler")).length === 1, "per-node table highlights the straggler");
  check(/cn00013/.test(await page.textContent(".stragglers")), "the straggler is named above the charts");
  const notes = await page.$$eval("ul.notes li", (l) => l.map((e) => e.textContent));
  check(notes.length === 2 && /ask for 40 GiB/.test(notes[0]) && /cn00013 ran 40 % below/.test(notes[1]), `notes shown: ${notes.join(" | ")}`);
  // Application I/O: a row per file system, the size histogram as bars.
  const ioRows = await page.$$eval(".job-io table.io-fs tbody tr", (l) => l.map((e) => e.dataset.mountpoint + ":" + e.children[3].textContent + ":" + e.children[7].textContent));
  check(ioRows.join(" ") === "/home:0 B:2400 /scratch:117 MiB:28.8k", `application I/O per file system: ${ioRows.join(" ")}`);
  const hist = await page.$$eval(".job-io table.io-hist tbody tr", (l) => l.map((e) => e.children[0].textContent + "=" + getComputedStyle(e.children[2].firstChild).getPropertyValue("--pct").trim()));
  check(hist.length === 10 && hist[1] === "≤ 1 KiB=100%" && hist[4] === "≤ 1 MiB=0%", `access-size bars: ${hist.join(" ")}`);
  check(/50 % of the time in I\/O/.test(await page.textContent(".job-io .io-shares")), "metadata share of the I/O time shown");
  const cbox = await page.locator(".job-charts .chart[data-metric=memory] .u-over").boundingBox();
  await page.mouse.move(cbox.x + cbox.width / 2, cbox.y + cbox.height / 2);
  await page.waitForFunction(() => window.__vigil.job.charts()[1].shown.length === 8);
  check(true, "hovering a chart draws every node's line");
  const sp = await page.evaluate(() => window.__vigil.job.pointAt(0, "cn00013"));
  await page.mouse.move(sp.x, sp.y);
  await page.waitForFunction(() => document.querySelector(".chart[data-metric=cpu] .node-readout").textContent !== "", null, { timeout: 5000 });
  const ro = await page.textContent(".chart[data-metric=cpu] .node-readout");
  check(ro === "cn00013 (straggler)", `pointing at a line names its node: "${ro}"`);
  await shot("job.png", true);

  // A job whose raw samples expired: the summary, and a word saying so.
  await page.goto(base + "/#/job/1003");
  await page.waitForFunction(() => window.__vigil?.job?.loaded);
  check(await page.evaluate(() => window.__vigil.job.expired && document.querySelectorAll(".job-charts").length === 0), "expired job: no charts");
  check(/raw samples of this job have expired/.test(await page.textContent(".expired")) && /CPU efficiency92%/.test(await page.textContent(".job-figures")),
    "expired job says so and shows its stored summary");
  await page.goto(base + "/#/job/99999");
  await page.waitForSelector(".no-such-job");
  check(/No such job: "99999"/.test(await page.textContent(".no-such-job")), "an unknown job id says so");

  // A running job: no straggler flagged, reloaded while it runs.
  await page.goto(base + "/#/job/1001?refresh=5s");
  await page.waitForFunction(() => window.__vigil?.job?.loads >= 2, null, { timeout: 15000 });
  const rc = await page.evaluate(() => window.__vigil.job.charts());
  check(rc.length === 4 && rc.every((c) => c.nodes.length === 4 && c.shown.length === 0) && (await page.$$(".stragglers")).length === 0,
    "running job: 4 node lines per chart, none flagged, reloaded after 5 s");

  // 12. Highlight this job on the heatmap: its 8 nodes outlined.
  await page.goto(base + "/#/job/1002");
  await page.waitForFunction(() => window.__vigil?.job?.loaded);
  await page.click("a.highlight");
  await page.waitForFunction(() => location.hash === "#/heatmap?job=1002" && window.__vigil?.heatmap?.frames >= 1 && window.__vigil.highlighted().length === 8);
  const hl = await page.evaluate(() => window.__vigil.highlighted().join(" "));
  check(hl === "cn00010 cn00011 cn00012 cn00013 cn00014 cn00015 cn00016 cn00017", `heatmap outlines the job's nodes: ${hl}`);
  const outline = await page.evaluate(() => {
    const c = document.querySelector(".hm-wrap canvas.overlay");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 255 && d[i + 1] === 123 && d[i + 2] === 114 && d[i + 3] === 255) n++;
    return n;
  });
  check(outline > 8 * 8, `outlines drawn on the overlay (${outline} px)`);
  check(/8 of its 8 nodes/.test(await page.textContent(".job-highlight")), "the highlight bar counts the job's nodes");
  await shot("heatmap-job.png");

  // 13. Node view: the node's current and recent jobs.
  await page.goto(base + "/#/node/cn00002?from=now-1h&to=now&refresh=off");
  await page.waitForSelector(".node-jobs table");
  const nodeJobs = await page.$$eval(".node-jobs tbody tr", (l) => l.map((r) => r.dataset.job).join(","));
  check(nodeJobs === "1001,1003", `node view lists its jobs: ${nodeJobs}`);
  await page.goto(base + "/#/node/cn00100?from=now-1h&to=now&refresh=off");
  await page.waitForFunction(() => /no jobs on this node/.test(document.querySelector(".node-jobs")?.textContent ?? ""));
  check(true, "a node without jobs says so");

  const icon = await page.evaluate(async () => {
    const r = await fetch(document.querySelector("link[rel=icon]")?.href ?? "/favicon.ico");
    return `${r.status} ${r.headers.get("content-type")}`;
  });
  check(icon === "200 image/svg+xml", `the page links its favicon and it is served (${icon})`);
  check(missing.length === 0, "no static file is missing" + (missing.length ? ": " + missing.join(", ") : ""));
  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
  console.log("e2e passed");
} catch (e) {
  await shot("failure.png").catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await close();
}
