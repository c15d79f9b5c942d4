import { test } from "node:test";
import assert from "node:assert/strict";
import { paintCell } from "../../src/cells";
import { BG_RGB, buildLUT, DOWN_BG_RGB, DOWN_RGB, MISSING_RGB, packRGBA } from "../../src/color";
import { decodeFrame, decodeNodes, QUANT_DOWN, QUANT_MISSING } from "../../src/frame";
import { computeLayout } from "../../src/layout";

// Five nodes are expected, three connect: the server lists all five and
// sends up == 0 for cn4 and cn5 as the down code. The heatmap must paint
// them down (red hatch), not leave them out or grey like "no data".
test("expected nodes that never connected are painted down", () => {
  const nodes = decodeNodes(JSON.stringify({ nodes: ["cn1", "cn2", "cn3", "cn4", "cn5"].map((name) => ({ name, group: "rack1" })) }));
  const codes = [0, 126, 253, QUANT_DOWN, QUANT_DOWN];
  const frame = decodeFrame(JSON.stringify({ t: 1, min: 0, max: 1, q: btoa(String.fromCharCode(...codes)) }));
  assert.deepEqual([...frame.q], codes);

  const width = 400;
  const l = computeLayout(nodes, width, 400);
  const px = new Uint32Array(width * Math.max(1, l.height)).fill(packRGBA(BG_RGB));
  const lut = buildLUT();
  const downBg = packRGBA(DOWN_BG_RGB);
  for (let i = 0; i < nodes.length; i++) paintCell(px, width, l.cellX[i], l.cellY[i], l.cell, frame.q[i], lut, downBg);

  const cellColours = (i: number) => {
    const set = new Set<number>();
    for (let dy = 0; dy < l.cell; dy++) for (let dx = 0; dx < l.cell; dx++) set.add(px[(l.cellY[i] + dy) * width + l.cellX[i] + dx]);
    return set;
  };
  const down = packRGBA(DOWN_RGB), missing = packRGBA(MISSING_RGB), bg = packRGBA(BG_RGB);
  assert.ok(l.cell >= 4, `cell of ${l.cell} px is too small to hatch`);
  for (let i = 0; i < 3; i++) {
    const c = cellColours(i);
    assert.equal(c.size, 1, `${nodes[i].name}: one scale colour`);
    const [col] = c;
    assert.ok(col !== down && col !== downBg && col !== missing && col !== bg, `${nodes[i].name}: a scale colour, got ${col.toString(16)}`);
  }
  for (const i of [3, 4]) {
    assert.deepEqual([...cellColours(i)].sort(), [down, downBg].sort(), `${nodes[i].name}: the red down hatch`);
  }
  // "No data" stays a different, plain grey.
  paintCell(px, width, l.cellX[4], l.cellY[4], l.cell, QUANT_MISSING, lut, downBg);
  assert.deepEqual([...cellColours(4)], [missing]);
});
