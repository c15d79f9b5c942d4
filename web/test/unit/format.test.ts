import { test } from "node:test";
import assert from "node:assert/strict";
import { formatLabels, formatValue } from "../../src/format";
import { alignSeries } from "../../src/series";

test("values format by unit", () => {
  assert.equal(formatValue(0.456, "fraction"), "46%");
  assert.equal(formatValue(0.05, "fraction"), "5.0%");
  assert.equal(formatValue(1536, "bytes"), "1.5 KiB");
  assert.equal(formatValue(3 * 1024 ** 3, "bytes/s"), "3.0 GiB/s");
  assert.equal(formatValue(12, "bytes"), "12 B");
  assert.equal(formatValue(123456), "123k");
  assert.equal(formatValue(12345), "12.3k");
  assert.equal(formatValue(2.5e9), "2.5G");
  assert.equal(formatValue(2.5), "2.5");
  assert.equal(formatValue(null), "–");
  assert.equal(formatValue(NaN), "–");
  assert.equal(formatValue(-Infinity), "-Inf");
});

test("labels format like PromQL selectors", () => {
  assert.equal(formatLabels({ __name__: "up", node: "cn1", job: "x" }), 'up{job="x", node="cn1"}');
  assert.equal(formatLabels({}), "{}");
  assert.equal(formatLabels({ node: "a" }, ["node"]), "{}");
});

test("series align on the union of timestamps with gaps as null", () => {
  const d = alignSeries([
    { metric: {}, values: [[10, "1"], [20, "2"]] },
    { metric: {}, values: [[20, "5"], [30, "NaN"]] },
  ]);
  assert.deepEqual(d, [[10, 20, 30], [1, 2, null], [null, 5, null]]);
  assert.deepEqual(alignSeries([]), [[]]);
});

test("byte axes tick on binary steps and label them exactly", async () => {
  const { axisLabels, byteIncrs } = await import("../../src/format");
  assert.ok(byteIncrs.includes(256 * 1024 ** 2) && byteIncrs.includes(1024 ** 3));
  assert.ok(!byteIncrs.includes(200e6), "no decimal steps on a binary axis");
  const mi = 1024 ** 2;
  assert.deepEqual(axisLabels([0, 256 * mi, 512 * mi, 768 * mi, 1024 * mi, 1280 * mi], "bytes"),
    ["0.00 GiB", "0.25 GiB", "0.50 GiB", "0.75 GiB", "1.00 GiB", "1.25 GiB"]);
  assert.deepEqual(axisLabels([0, 512 * mi, 1024 * mi], "bytes/s"), ["0.0 GiB/s", "0.5 GiB/s", "1.0 GiB/s"]);
  assert.deepEqual(axisLabels([0, 2048, 4096], "bytes"), ["0 KiB", "2 KiB", "4 KiB"]);
  assert.deepEqual(axisLabels([0, 0.25, 0.5], "fraction"), ["0%", "25%", "50%"]);
  assert.deepEqual(axisLabels([0, 0.005, 0.01], "fraction"), ["0.0%", "0.5%", "1.0%"]);
});
