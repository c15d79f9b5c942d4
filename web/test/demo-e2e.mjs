// Browser end-to-end test against a real `vigil demo` (server, aggregator,
// this machine's sampler, simulated nodes and syslog traffic).
// Usage: node test/demo-e2e.mjs URL NODES [SCREENSHOT_DIR]
// Run by TestWebDemoE2E in cmd/vigil, which starts the demo.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { launch, check } from "./browser.mjs";

const [base, nodesArg, shotsArg] = process.argv.slice(2);
const simulated = Number(nodesArg);
if (!base || !(simulated > 0)) {
  console.error("usage: node test/demo-e2e.mjs URL NODES [SCREENSHOT_DIR]");
  process.exit(2);
}
const shots = shotsArg ?? "build/screenshots";
await mkdir(shots, { recursive: true });
const { page, close } = await launch();
page.setDefaultTimeout(15000);
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
const shot = (name, fullPage = false) => page.screenshot({ path: path.join(shots, name), fullPage });
const sim = (i) => "cn" + String(i).padStart(5, "0");

try {
  // 1. The heatmap fills with every simulated node plus this machine.
  await page.goto(base + "/#/heatmap?m=cpu");
  await page.waitForFunction((n) => window.__vigil?.heatmap?.frames >= 2 && window.__vigil.heatmap.valued >= n, simulated + 1, { timeout: 20000 });
  const hm = await page.evaluate(() => window.__vigil.heatmap);
  check(hm.nodes === simulated + 1, `heatmap has ${simulated} simulated nodes + this machine (got ${hm.nodes})`);
  check(hm.valued === hm.nodes, `every node has a CPU value (${hm.valued}/${hm.nodes})`);
  const colours = await page.evaluate(() => {
    const c = document.querySelector(".hm-wrap canvas");
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const s = new Set();
    for (let i = 0; i < d.length; i += 4) s.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return s.size;
  });
  // Background, grid and at least four cell colours: the simulated nodes'
  // load is bimodal (idle or busy), so the count hovers around 10.
  check(colours >= 6, `cells are painted in several colours (${colours})`);
  // Racks of 32 from the first node: cn00001..cn00032 share rack r1.
  const racks = await page.evaluate((ns) => ns.map((n) => window.__vigil.rack(n)), [sim(1), sim(32), sim(33)]);
  check(racks.join(",") === "r1,r1,r2", `demo racks count from 1: ${sim(1)}, ${sim(32)}, ${sim(33)} in ${racks.join(", ")}`);
  const legend = await page.textContent(".legend");
  check(/CPU busy \(%\):\s*0%\s*≥ 100%/.test(legend), `the CPU legend is a fixed 0–100 % scale: "${legend.trim()}"`);
  await shot("demo-heatmap.png");

  // 2. Click a simulated node: its charts hold data points.
  const node = sim(Math.min(10, simulated));
  const pos = await page.evaluate((n) => window.__vigil.locate(n), node);
  check(pos !== null, `${node} is on the heatmap`);
  await page.mouse.move(pos.x, pos.y);
  await page.waitForFunction((n) => document.querySelector(".tooltip")?.textContent.startsWith(n + ":"), node);
  await page.mouse.click(pos.x, pos.y);
  await page.waitForFunction((n) => location.hash.startsWith("#/node/" + n), node);
  await page.waitForFunction(() => (window.__vigil?.charts ?? []).some((c) => c.title === "Load" && c.points > 0), null, { timeout: 20000 });
  await page.waitForFunction(() => document.querySelectorAll(".chart:not(.has-data) .chart-msg").length === 0 || document.querySelectorAll(".chart.has-data").length >= 3);
  const charts = await page.evaluate(() => window.__vigil.charts);
  const withPoints = charts.filter((c) => c.points > 0).map((c) => `${c.title} (${c.points})`);
  check(withPoints.length >= 3, `node charts with data points: ${withPoints.join(", ")}`);
  check((await page.textContent(".node-view .badge")) === "up", `${node} is up`);
  await shot("demo-node.png", true);

  // 3. Explore runs PromQL against the real store.
  await page.click("nav a[href='#/explore']");
  await page.fill("textarea.promql", "node_load1");
  await page.click("button.run");
  await page.waitForSelector("table.results tbody tr");
  await page.waitForSelector(".explore-view .chart.has-data canvas");
  const rows = await page.$$eval("table.results tbody tr", (l) => l.map((r) => r.textContent));
  check(rows.length === simulated + 1, `explore table has one node_load1 row per node (${rows.length})`);
  check(rows.some((r) => r.includes(`node="${sim(1)}"`)), "rows carry node labels");
  await shot("demo-explore.png");
  // A bad query is reported once, in Explore (range and instant query
  // both fail) and on the heatmap's live stream.
  await page.fill("textarea.promql", "rate(node_load1");
  await page.click("button.run");
  await page.waitForSelector(".explore-view .error:not([hidden])");
  const xerr = await page.textContent(".explore-view .error");
  check(/parse error/.test(xerr) && xerr.split("parse error").length === 2, `explore shows a bad query once: "${xerr}"`);
  await page.goto(base + "/#/heatmap?expr=" + encodeURIComponent("rate(node_load1"));
  await page.waitForSelector(".heatmap-view .error:not([hidden])");
  const herr = await page.textContent(".heatmap-view .error");
  check(/parse error/.test(herr) && herr.split("bad query").length <= 2, `heatmap shows a bad expression once: "${herr}"`);

  // 4. The tree shows the demo's aggregator with its children up.
  await page.click("nav a[href='#/tree']");
  await page.waitForSelector(".tnode");
  const tree = await page.textContent(".tree");
  check(/demo-agg/.test(tree), "tree shows the aggregator demo-agg");
  const kvs = await page.$$eval(".tree .kv", (l) => l.map((e) => e.textContent));
  check(kvs.includes(`children_up=${simulated + 1}`) && kvs.includes("children_down=0"), `the aggregator has all ${simulated + 1} children up`);
  await shot("demo-tree.png");

  // 5. Logs: messages newest first, patterns with counts over time. The
  // demo sends 20 messages a second; wait for more than one page (200).
  for (const end = Date.now() + 20000; ;) {
    const n = await page.evaluate(async () => (await (await fetch("api/v1/logs/stats")).json()).accepted);
    if (n > 250) break;
    if (Date.now() > end) throw new Error(`only ${n} log messages after 20 s`);
    await page.waitForTimeout(500);
  }
  await page.click("nav a[href='#/logs']");
  await page.waitForFunction(() => window.__vigil?.logs?.pages >= 1 && window.__vigil.logs.patterns > 0);
  let st = await page.evaluate(() => window.__vigil.logs);
  check(st.error === "", "logs load without error");
  check(st.rows > 0, `log messages shown (${st.rows})`);
  const seqs = () => page.$$eval("table.logs tbody tr", (l) => l.map((tr) => Number(tr.dataset.seq)));
  const newestFirst = (s) => s.every((x, i) => i === 0 || x < s[i - 1]); // strictly: no repeats
  const first = await seqs();
  check(newestFirst(first), "messages are newest first");
  const hosts = await page.$$eval("table.logs tbody td.host", (l) => l.map((td) => td.textContent));
  check(hosts.every((h) => /^cn\d{5}$/.test(h)), "messages come from the simulated nodes");
  const pats = await page.$$eval("a.pattern", (l) => l.map((a) => ({
    id: a.dataset.id, count: a.querySelector(".pcount").textContent, spark: a.querySelector("svg.spark path:not(.base)").getAttribute("d"),
  })));
  check(pats.length >= 3, `patterns are listed (${pats.length})`);
  check(pats.every((p) => p.spark !== ""), "every pattern has a count-over-time sparkline with bars");
  await shot("demo-logs.png");

  // Load more: the next page is older and repeats nothing.
  check(await page.isVisible("button.more"), "more than a page of messages offers \"load more\"");
  const before = st.rows;
  await page.click("button.more");
  await page.waitForFunction((n) => window.__vigil.logs.rows > n, before);
  const paged = await seqs();
  check(newestFirst(paged) && paged.slice(0, before).join() === first.join(), `load more appends older messages, none twice (${before} → ${paged.length})`);

  // Clicking a pattern filters the search by it; the URL carries the query.
  const pid = pats[0].id;
  await page.click(`a.pattern[data-id="${pid}"]`);
  await page.waitForFunction((id) => decodeURIComponent(location.hash).includes("q=pattern:" + id), pid);
  await page.waitForFunction(() => window.__vigil?.logs?.pages >= 1);
  const patCells = await page.$$eval("table.logs tbody td.pat", (l) => l.map((td) => td.textContent));
  check(patCells.length > 0 && patCells.every((c) => c === "#" + pid), `pattern filter shows only #${pid} (${patCells.length} rows)`);
  check(await page.isVisible(`a.pattern.active[data-id="${pid}"]`), "the chosen pattern is highlighted");
  check((await page.inputValue("input.logq")) === "pattern:" + pid, "the query box shows the filter");

  // Live tail streams new messages matching the query.
  await page.click("button.live");
  await page.waitForFunction(() => location.hash.includes("live=1"));
  await page.waitForFunction(() => window.__vigil?.logs?.liveReceived > 0, null, { timeout: 20000 });
  st = await page.evaluate(() => window.__vigil.logs);
  const livePats = await page.$$eval("table.logs tbody td.pat", (l) => l.map((td) => td.textContent));
  check(newestFirst(await seqs()), "live messages go on top in order, none twice");
  check(livePats.every((c) => c === "#" + pid), `live tail adds ${st.liveReceived} new messages, all #${pid}`);
  check(/live/.test(await page.textContent(".live-state")), "live state is shown");
  await shot("demo-logs-live.png");

  // Free text plus a filter; a bad filter says what is wrong.
  await page.goto(base + "/#/logs?q=" + encodeURIComponent("app:sshd Accepted"));
  await page.waitForFunction(() => window.__vigil?.logs?.pages >= 1);
  const texts = await page.$$eval("table.logs tbody tr", (l) => l.map((r) => [r.querySelector(".app").textContent, r.querySelector(".msg").textContent]));
  check(texts.length > 0 && texts.every(([a, m]) => a === "sshd" && /accepted/i.test(m)), `app filter and text search (${texts.length} rows)`);
  // The severity menu edits the query: warning or worse.
  await page.goto(base + "/#/logs");
  await page.waitForFunction(() => window.__vigil?.logs?.pages >= 1);
  await page.selectOption("select[aria-label='minimum severity']", "warning");
  await page.waitForFunction(() => decodeURIComponent(location.hash).includes("severity:warning"));
  await page.waitForFunction(() => window.__vigil?.logs?.pages >= 1);
  const sevs = await page.$$eval("table.logs tbody td.sev", (l) => l.map((td) => td.textContent));
  check(sevs.length > 0 && sevs.every((s) => ["emerg", "alert", "crit", "err", "warning"].includes(s)),
    `severity menu keeps warning or worse (${[...new Set(sevs)].join(", ")}; ${sevs.length} rows)`);
  check((await page.inputValue("input.logq")) === "severity:warning", "the menu wrote severity:warning into the query");
  await shot("demo-logs-severity.png");
  await page.fill("input.logq", "colour:red");
  await page.press("input.logq", "Enter");
  await page.waitForSelector(".logs-view .error:not([hidden])");
  check(/unknown filter "colour"/.test(await page.textContent(".logs-view .error")), "an unknown filter is reported");

  // The Status view against the real server: every node placed, whatever
  // of health, alerts and events the server offers; never an error page.
  await page.goto(base + "/#/status?refresh=off");
  await page.waitForFunction(() => window.__vigil?.status?.loads >= 1);
  const sv = await page.evaluate(() => ({ n: window.__vigil.status.nodes, c: window.__vigil.counts(), src: window.__vigil.status.sources }));
  check(sv.n === simulated + 1 && Object.values(sv.c).reduce((a, b) => a + b, 0) === sv.n, `status grid places every node (${JSON.stringify(sv)})`);
  check(await page.$eval(".status-view > .error", (e) => e.hidden), "status view: no error page");
  await page.waitForFunction(() => !/loading/.test(document.querySelector(".timeline")?.textContent ?? "loading"));
  await shot("demo-status.png");

  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
  console.log("demo e2e passed");
} catch (e) {
  await shot("demo-failure.png").catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await close();
}
