import { test } from "node:test";
import assert from "node:assert/strict";
import { formatHash, parseDuration, parseHash, resolveTime, stepFor, timeRange } from "../../src/route";

test("hash round trip keeps view, node and params", () => {
  const cases = [
    "#/heatmap?m=cpu",
    "#/node/cn00001?from=now-6h&to=now",
    "#/explore?q=sum+by+%28node%29%28up%29",
    "#/tree",
    "#/node/rack%2F1%20n?from=1&to=2",
    "#/fabric?color=wait&link=0x0002c90200100011%2F3",
  ];
  for (const h of cases) assert.equal(formatHash(parseHash(h)), h);
  const r = parseHash("#/node/rack%2F1%20n");
  assert.equal(r.node, "rack/1 n");
});

test("unknown or partial routes fall back to the heatmap", () => {
  assert.equal(parseHash("").view, "heatmap");
  assert.equal(parseHash("#/nope?x=1").view, "heatmap");
  assert.equal(parseHash("#/node").view, "heatmap");
  assert.equal(parseHash("#/node/%E0%A4%A").node, "%E0%A4%A"); // malformed escape kept
});

test("durations", () => {
  assert.equal(parseDuration("90s"), 90e3);
  assert.equal(parseDuration("1h30m"), 5400e3);
  assert.equal(parseDuration("7d"), 7 * 86400e3);
  for (const bad of ["", "h", "5x", "1h junk", "-1h"]) assert.equal(parseDuration(bad), null, bad);
});

test("time bounds resolve relative to now", () => {
  const now = 1_700_000_000_000;
  assert.equal(resolveTime("now", now, 0), now);
  assert.equal(resolveTime("now-15m", now, 0), now - 900e3);
  assert.equal(resolveTime("123", now, 0), 123);
  assert.equal(resolveTime("now-zz", now, 7), 7);
  assert.equal(resolveTime(null, now, 7), 7);
  const r = timeRange(new URLSearchParams("from=now-6h&to=now-1h"), now);
  assert.deepEqual(r, { start: now - 6 * 3600e3, end: now - 3600e3 });
  // An inverted range is repaired to end at `to`.
  const bad = timeRange(new URLSearchParams("from=now&to=now-1h"), now);
  assert.ok(bad.start < bad.end && bad.end === now - 3600e3);
});

test("step gives at most ~400 points and a round number", () => {
  assert.equal(stepFor({ start: 0, end: 3600e3 }), 10);
  assert.equal(stepFor({ start: 0, end: 60e3 }), 1);
  assert.equal(stepFor({ start: 0, end: 7 * 86400e3 }), 1800);
  assert.ok((365 * 86400) / stepFor({ start: 0, end: 365 * 86400e3 }) <= 400);
});
