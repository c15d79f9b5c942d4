// Browser test of the Status view and the node view's event annotations.
// Usage: node test/status-e2e.mjs FULL DEGRADED BARE BIG [SCREENSHOT_DIR]
// Run by TestBrowserStatus (internal/web/status_browser_test.go) against
// fixture servers: FULL has every issue 15 API; DEGRADED lacks health (the
// plugin's series answer), alerts and the event stream (polling); BARE lacks
// all of them; BIG has 20,000 nodes.
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { launch, check } from "./browser.mjs";

const [full, degraded, bare, big, shots] = process.argv.slice(2);
if (!big) {
  console.error("usage: node test/status-e2e.mjs FULL DEGRADED BARE BIG");
  process.exit(2);
}
if (shots) await mkdir(shots, { recursive: true });
const { page, close } = await launch();
const shot = (name) => (shots ? page.screenshot({ path: path.join(shots, name) }) : null);
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));

// cellColours returns the distinct colours of a node's cell on the grid.
const cellColours = (node) => page.evaluate((n) => {
  const p = window.__vigil.locate(n);
  const c = document.querySelector(".status-view .hm-wrap canvas");
  const r = c.getBoundingClientRect();
  const dpr = c.width / r.width;
  const x = Math.round((p.x - r.left) * dpr), y = Math.round((p.y - r.top) * dpr);
  const d = c.getContext("2d").getImageData(x - 2, y - 2, 5, 5).data;
  const out = new Set();
  for (let i = 0; i < d.length; i += 4) out.add(`${d[i]},${d[i + 1]},${d[i + 2]}`);
  return [...out];
}, node);
const loaded = (n = 1) => page.waitForFunction((k) => window.__vigil?.status?.loads >= k, n, { timeout: 10000 });

try {
  // 1. Full server: states, colours, counts.
  await page.goto(full + "/#/status?refresh=off");
  await loaded();
  const states = await page.evaluate(() => window.__vigil.states());
  check(JSON.stringify(states) === JSON.stringify({ cn00001: "down", cn00002: "check", cn00003: "ok" }), `states: ${JSON.stringify(states)}`);
  const counts = await page.evaluate(() => window.__vigil.counts());
  check(counts.down === 1 && counts.check === 1 && counts.ok === 1 && counts.critical === 0 && counts.warning === 0, `legend counts: ${JSON.stringify(counts)}`);
  const legendText = (await page.innerText(".status-legend")).replace(/\s+/g, " ").trim();
  check(legendText === "down 1 failing check 1 critical alert 0 warning alert 0 ok 1", `legend names each state with its count: "${legendText}"`);
  const down = await cellColours("cn00001"), failing = await cellColours("cn00002"), ok = await cellColours("cn00003");
  check(down.includes("214,48,49"), `the down node is hatched red (${down})`);
  check(failing.length === 1 && failing[0] === "247,129,37", `the failing node is orange (${failing})`);
  check(ok.length === 1 && ok[0] === "46,160,67", `the ok node is green (${ok})`);
  check(/3 nodes · 2 not ok/.test(await page.textContent(".status-view .toolbar .status")), "summary counts the nodes not ok");

  // Active alerts: firing first, pending marked.
  const alerts = await page.$$eval(".alerts-table tbody tr", (l) => l.map((r) => r.textContent));
  check(alerts.length === 2 && /^InstanceDown\s*cn00001\s*critical\s*2[45]m\s*cn00001 has sent nothing/.test(alerts[0]) && /HighLoad \(pending\)cn00003warning/.test(alerts[1]),
    `alerts listed with node, severity, since and summary: ${JSON.stringify(alerts)}`);

  // Timeline: the first page (the server gives 4), the streamed event on
  // top, then the older page.
  await page.waitForFunction(() => window.__vigil.events()[0] === "7" && document.querySelector(".timeline .event")?.dataset.id === "7", null, { timeout: 10000 });
  let ids = await page.$$eval(".timeline .event", (l) => l.map((e) => e.dataset.id).join(","));
  check(ids === "7,6,5,4,3", `timeline newest first, streamed event on top: ${ids}`);
  await page.click("button.more");
  await page.waitForFunction(() => window.__vigil.events().length === 7);
  ids = await page.$$eval(".timeline .event", (l) => l.map((e) => e.dataset.id).join(","));
  check(ids === "7,6,5,4,3,2,1" && (await page.$eval("button.more", (b) => b.hidden)), `older events paged in, none left: ${ids}`);
  check((await page.textContent(".live-state")) === "● live", "timeline says live");
  const row = await page.$eval(".timeline .event[data-id='2']", (e) => ({ text: e.textContent, node: e.querySelector("a.node")?.getAttribute("href"), link: e.querySelector("a.link")?.getAttribute("href"), cls: e.className }));
  check(/critical\s*check failed\s*cn00002\s*→\s*gpu_ecc: 3 uncorrectable ECC errors/.test(row.text) && row.node === "#/node/cn00002?from=now-1h&to=now" && row.link === "#/node/cn00002" && /sev-critical/.test(row.cls),
    `an event row: severity, kind, node link, summary, link (${JSON.stringify(row)})`);
  const job = await page.$eval(".timeline .event[data-id='6'] a.job", (a) => a.getAttribute("href"));
  check(job === "#/job/1001", "job events link the job");
  await shot("status.png");

  // Filter by severity: asked of the server, kept in the URL.
  await page.selectOption("select[aria-label='event severity']", "critical");
  await page.waitForFunction(() => location.hash === "#/status?refresh=off&severity=critical" && window.__vigil?.events?.().length > 0);
  const crit = await page.$$eval(".timeline .event", (l) => l.map((e) => e.dataset.id).join(","));
  check(crit === "4,3,2", `critical only: ${crit}`);
  await page.selectOption("select[aria-label='event kind']", "node_down");
  await page.waitForFunction(() => /kind=node_down/.test(location.hash) && window.__vigil?.events?.().length > 0);
  check((await page.$$eval(".timeline .event", (l) => l.map((e) => e.dataset.id).join(","))) === "3", "kind filter");

  // A click on a cell opens the node.
  await page.goto(full + "/#/status?refresh=off");
  await loaded();
  const pos = await page.evaluate(() => window.__vigil.locate("cn00002"));
  await page.mouse.move(pos.x, pos.y);
  await page.waitForSelector(".tooltip:not([hidden])");
  const tip = await page.textContent(".tooltip");
  check(/^cn00002: failing check.*gpu_ecc failing: 3 uncorrectable ECC errors/.test(tip), `tooltip: ${tip}`);
  await page.mouse.click(pos.x, pos.y);
  await page.waitForFunction(() => location.hash.startsWith("#/node/cn00002?"));

  // 2. Node view: current problems and the node's events on every chart.
  await page.waitForFunction(() => window.__vigil?.node?.events >= 1 && window.__vigil.charts?.length >= 6, null, { timeout: 15000 });
  const ann = await page.evaluate(() => window.__vigil.node.annotations("CPU by mode"));
  check(ann.map((a) => a.kind).join(",") === "job_start,health_fail,job_end", `CPU chart marks the node's events in time order: ${JSON.stringify(ann.map((a) => a.kind))}`);
  const all = await page.evaluate(() => window.__vigil.charts.map((c) => window.__vigil.node.annotations(c.title).length));
  check(all.every((n) => n === 3), `every chart carries the 3 markers: ${all}`);
  const fail = ann.find((a) => a.kind === "health_fail");
  const column = await page.evaluate((cx) => {
    const c = document.querySelector(".chart[data-title='CPU by mode'] canvas");
    const d = c.getContext("2d").getImageData(Math.round(cx), 0, 1, c.height).data;
    let red = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] === 248 && d[i + 1] === 81 && d[i + 2] === 73) red++;
    return { red, h: c.height };
  }, fail.cx);
  check(column.red > column.h / 2, `the failed check is a red line across the plot (${column.red} of ${column.h} px)`);
  const box = await page.locator(".chart[data-title='CPU by mode'] .u-over").boundingBox();
  await page.mouse.move(box.x + fail.x, box.y + box.height / 2);
  await page.waitForSelector(".chart[data-title='CPU by mode'] .ann-tip:not([hidden])");
  const atip = await page.textContent(".chart[data-title='CPU by mode'] .ann-tip");
  check(/check failed \(critical\): gpu_ecc: 3 uncorrectable ECC errors/.test(atip), `marker tooltip: ${atip}`);
  const now = await page.textContent(".node-now");
  check(/failing: gpu_ecc \(3 uncorrectable ECC errors\)/.test(now) && /no firing alerts/.test(now), `node view lists its failing check and alerts: ${now}`);
  await shot("node-annotations.png");
  await page.goto(full + "/#/node/cn00001?from=now-1h&to=now&refresh=off");
  await page.waitForFunction(() => /firing/.test(document.querySelector(".node-now")?.textContent ?? ""));
  check(/firing: InstanceDown \(cn00001 has sent nothing for 30 s\)/.test(await page.textContent(".node-now")), "a node's firing alert is listed");

  // 3. Degraded server: health from vigil_health_check_ok, alerts 404,
  // events by polling.
  await page.goto(degraded + "/#/status?refresh=5s");
  await loaded();
  const st2 = await page.evaluate(() => window.__vigil.states());
  check(JSON.stringify(st2) === JSON.stringify({ cn00001: "down", cn00002: "ok", cn00003: "check" }), `health from the plugin's series: ${JSON.stringify(st2)}`);
  const src = await page.textContent(".sources");
  check(/from vigil_health_check_ok/.test(src) && /alerts unavailable: no alerting rules on this server/.test(src), `sources say what is missing: ${src}`);
  check(await page.$eval(".status-view > .error", (e) => e.hidden), "no error shown for a missing source");
  check(/alerts unavailable/.test(await page.textContent(".alerts")), "the alert list says it is unavailable");
  await page.waitForFunction(() => window.__vigil.events()[0] === "8", null, { timeout: 15000 });
  check(/^polling/.test(await page.textContent(".live-state")), "without a stream the timeline polls, and says so");
  await page.goto(degraded + "/#/node/cn00003?from=now-1h&to=now&refresh=off");
  await page.waitForFunction(() => /failing/.test(document.querySelector(".node-now")?.textContent ?? ""));
  const now2 = await page.textContent(".node-now");
  check(/failing: ib_link \(port 1 down\)/.test(now2) && /alerts: not available on this server/.test(now2), `node view from the series, alerts missing: ${now2}`);

  // 4. Bare server: every source but the node list missing.
  await page.goto(bare + "/#/status?refresh=off");
  await loaded();
  await page.waitForFunction(() => /events unavailable/.test(document.querySelector(".timeline")?.textContent ?? ""));
  check(/no event store on this server/.test(await page.textContent(".timeline")), "timeline says there is no event store");
  check(await page.$eval(".status-view > .error", (e) => e.hidden), "still no error page");
  await page.goto(bare + "/#/node/cn00002?from=now-1h&to=now&refresh=off");
  await page.waitForFunction(() => /no event store/.test(document.querySelector(".ann-count")?.textContent ?? ""), null, { timeout: 15000 });
  check(true, "node view without events says so");

  // 5. 20,000 nodes: the first render (layout, every cell, upload) timed.
  await page.goto(big + "/#/status?refresh=off");
  await loaded();
  const s = await page.evaluate(() => ({ ms: window.__vigil.status.renderMs, n: window.__vigil.status.nodes, c: window.__vigil.counts() }));
  console.log(`status grid in Chromium, 20,000 nodes: ${s.ms.toFixed(1)} ms, counts ${JSON.stringify(s.c)}`);
  check(s.n === 20000 && s.c.down === 207, `20,000 nodes drawn, 207 down (${s.n}, ${s.c.down})`);
  check(s.ms < 1000, `rendered in ${s.ms.toFixed(1)} ms`);
  await shot("status-20k.png");

  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
  console.log("status e2e passed");
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await close();
}
