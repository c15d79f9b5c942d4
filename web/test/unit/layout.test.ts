import { test } from "node:test";
import assert from "node:assert/strict";
import { computeLayout, groupRacks, hitTest, placeNode, RACK_SIZE } from "../../src/layout";

const names = (prefix: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => ({ name: prefix + String(from + i).padStart(5, "0") }));

test("nodes are placed by name prefix and racks of 32 counted from 1", () => {
  assert.deepEqual(placeNode({ name: "cn00045" }), { partition: "cn", rack: "r2" });
  assert.deepEqual(placeNode({ name: "gpu-007" }), { partition: "gpu", rack: "r1" });
  // The demo's nodes are cn00001..: the first rack holds 1..32, not 1..31.
  assert.deepEqual(placeNode({ name: "cn00001" }), { partition: "cn", rack: "r1" });
  assert.deepEqual(placeNode({ name: "cn00032" }), { partition: "cn", rack: "r1" });
  assert.deepEqual(placeNode({ name: "cn00033" }), { partition: "cn", rack: "r2" });
  assert.deepEqual(placeNode({ name: "cn00512" }), { partition: "cn", rack: "r16" });
  assert.deepEqual(placeNode({ name: "cn00000" }), { partition: "cn", rack: "r0" });
  assert.deepEqual(placeNode({ name: "login" }), { partition: "other", rack: "other" });
  assert.deepEqual(placeNode({ name: "x1", group: "rackA" }), { partition: "", rack: "rackA" });
});

test("racks hold at most 32 nodes and partitions stay together", () => {
  const nodes = [...names("cn", 1, 70), ...names("gpu", 1, 10), ...names("cn", 71, 5)];
  const racks = groupRacks(nodes);
  assert.deepEqual(racks.map((r) => `${r.partition}/${r.label}:${r.nodes.length}`), ["cn/r1:32", "cn/r2:32", "cn/r3:11", "gpu/r1:10"]);
  const big = groupRacks(Array.from({ length: 70 }, (_, i) => ({ name: "n" + i, group: "g" })));
  assert.deepEqual(big.map((r) => r.nodes.length), [RACK_SIZE, RACK_SIZE, 6]);
});

test("layout places every node in a distinct cell that hit-tests back", () => {
  const nodes = [...names("cn", 1, 512), ...names("gpu", 1, 40)];
  const l = computeLayout(nodes, 1200, 800);
  const seen = new Set<string>();
  for (let i = 0; i < nodes.length; i++) {
    const key = `${l.cellX[i]},${l.cellY[i]}`;
    assert.ok(!seen.has(key), "cells overlap at " + key);
    seen.add(key);
    assert.ok(l.cellX[i] >= 0 && l.cellX[i] + l.cell <= l.width, "cell inside the width");
    assert.ok(l.cellY[i] + l.cell <= l.height, "cell inside the height");
    assert.equal(hitTest(l, l.cellX[i] + 1, l.cellY[i] + l.cell - 1), i);
  }
  assert.ok(l.height <= 800, `552 nodes fit in 800 px (height ${l.height}, cell ${l.cell})`);
  assert.equal(hitTest(l, -5, -5), -1);
  if (l.pitch > l.cell) assert.equal(hitTest(l, l.cellX[0] + l.cell, l.cellY[0]), -1, "the gap between cells hits nothing");
  assert.equal(l.partitions.map((p) => p.label).join(), "cn,gpu");
});

test("20,000 nodes shrink to small cells; fewer nodes get bigger ones", () => {
  const big = computeLayout(names("cn", 0, 20000), 1600, 900);
  const small = computeLayout(names("cn", 0, 300), 1600, 900);
  assert.ok(big.height <= 900, `20,000 nodes fit 1600x900 (height ${big.height}, cell ${big.cell})`);
  assert.ok(big.cell >= 3, `cell ${big.cell}`);
  assert.ok(small.cell > big.cell);
  // Past the smallest cell the page scrolls rather than shrinking further.
  const huge = computeLayout(names("cn", 0, 100000), 800, 600);
  assert.equal(huge.cell, 3);
  assert.ok(huge.height > 600);
});
