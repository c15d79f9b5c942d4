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
