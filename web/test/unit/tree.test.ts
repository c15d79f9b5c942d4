import { test } from "node:test";
import assert from "node:assert/strict";
import { clockSkew, downNodes, offset } from "../../src/views/tree";

test("clock offsets read as ahead or behind", () => {
  assert.equal(offset(7200.2), "2h 0m ahead");
  assert.equal(offset(-3661), "1h 1m behind");
  assert.equal(offset(-90), "1m 30s behind");
  assert.equal(offset(12), "12s ahead");
  assert.equal(offset(NaN), "?");
});

test("no clock-skew section without skewed nodes", () => {
  assert.equal(clockSkew({ name: "server", nodes_clock_skew: 0 }), null);
  assert.equal(clockSkew(null), null);
});

test("no down section without down nodes", () => {
  assert.equal(downNodes({ name: "server", nodes_down: 0 }), null);
  assert.equal(downNodes(null), null);
  assert.equal(downNodes({ name: "server", nodes_down: 2 }), null); // no names to show
});
