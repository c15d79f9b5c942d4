// Browser test of the dashboard behind basic auth. Usage: node
// test/auth-e2e.mjs URL. Run by TestBrowserAuth in internal/web: the fake
// cluster of 50 nodes behind user "ops", password "s3cret", with
// GET test/state telling the live streams open and how many slow_metric
// queries started and were given up by the browser.
import { launch, check } from "./browser.mjs";

const base = process.argv[2];
if (!base) {
  console.error("usage: node test/auth-e2e.mjs URL");
  process.exit(2);
}
const { page, close } = await launch(undefined, { httpCredentials: { username: "ops", password: "s3cret" } });
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => m.type() === "error" && !/Failed to load resource/.test(m.text()) && errors.push(m.text()));
const state = () => page.evaluate(async () => (await fetch("test/state")).json());
const until = async (what, cond) => {
  for (const end = Date.now() + 15000; ;) {
    const s = await state();
    if (cond(s)) return s;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(s)}`);
    await page.waitForTimeout(100);
  }
};

try {
  // The live stream (EventSource) carries the credentials.
  await page.goto(base + "/#/heatmap?m=cpu");
  await page.waitForFunction(() => window.__vigil?.heatmap?.frames >= 1, null, { timeout: 15000 });
  check((await page.evaluate(() => window.__vigil.heatmap.nodes)) === 50, "heatmap streams behind basic auth");
  check((await state()).streams === 1, "one live stream open");

  // Queries (POST) carry them too.
  await page.goto(base + "/#/explore?q=node_load1");
  await page.waitForSelector("table.results tbody tr");
  check(true, "explore queries behind basic auth");
  await until("the heatmap's stream to end after leaving it", (s) => s.streams === 0);
  check(true, "leaving the heatmap closed its live stream");

  // Leaving a view aborts its requests: both queries of a slow Explore.
  await page.goto(base + "/#/explore?q=slow_metric");
  await until("both slow queries to start", (s) => s.slowStarted === 2);
  await page.click("nav a[href='#/tree']");
  await page.waitForSelector(".tnode");
  check(true, "tree loads behind basic auth");
  await until("the slow queries to be given up", (s) => s.slowCancelled === 2);
  check(true, "leaving Explore aborted its two queries");

  // The log API (GET) answers with its reason.
  await page.click("nav a[href='#/logs']");
  await page.waitForSelector(".logs-view .error:not([hidden])");
  check(/^Logs unavailable: log intake is off/.test(await page.textContent(".logs-view .error")), "logs API behind basic auth");

  check(errors.length === 0, "no page errors" + (errors.length ? ": " + errors.join("; ") : ""));
  console.log("auth e2e passed");
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await close();
}
