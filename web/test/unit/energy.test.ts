import { test } from "node:test";
import assert from "node:assert/strict";
import { formatJoules, validEnergy } from "../../src/energy";

test("energy section: shape checked, hostile values count as nothing", () => {
  assert.equal(validEnergy(null), null);
  assert.equal(validEnergy({ nodes: "x" }), null);
  assert.equal(validEnergy({ joules: 5, nodes: [] }), null);
  const e = validEnergy({ joules: 66000, node_joules: 132000, shared: true,
    nodes: [{ node: "cn1", joules: 66000, node_joules: 132000, share: 0.5, source: "rapl" }, { node: 7 },
      { node: "cn2", joules: "lots", node_joules: -1, share: 9, source: {} }] });
  assert.ok(e);
  assert.equal(e.nodes.length, 2);
  assert.deepEqual(e.nodes[1], { node: "cn2", joules: 0, node_joules: 0, share: 1, source: "" });
  assert.equal(e.shared, true);
});

test("joules are shown with three significant digits", () => {
  assert.equal(formatJoules(0), "0 J");
  assert.equal(formatJoules(950), "950 J");
  assert.equal(formatJoules(66000), "66 kJ");
  assert.equal(formatJoules(348000), "348 kJ");
  assert.equal(formatJoules(1234567), "1.23 MJ");
});
