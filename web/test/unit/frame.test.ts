import { test } from "node:test";
import assert from "node:assert/strict";
import { base64Bytes, decodeFrame, decodeNodes, dequantise, QUANT_DOWN, QUANT_MAX, QUANT_MISSING } from "../../src/frame";
import { buildLUT, scaleRGB } from "../../src/color";

test("frame decodes the Go encoder's output", () => {
  // Same bytes as TestAppendFrameEvent in internal/web.
  const f = decodeFrame('{"t":1700000000123,"min":-0.5,"max":2,"q":"AAH/"}');
  assert.equal(f.t, 1700000000123);
  assert.deepEqual([...f.q], [0, 1, 255]);
  assert.equal(dequantise(f.q[0], f.min, f.max), -0.5);
  assert.equal(dequantise(QUANT_MAX, f.min, f.max), 2);
  assert.equal(dequantise(QUANT_DOWN, 0, 1), null);
  assert.equal(dequantise(QUANT_MISSING, 0, 1), null);
  assert.deepEqual([...base64Bytes("")], []);
});

test("malformed events are errors, not garbage", () => {
  assert.throws(() => decodeFrame('{"t":1,"min":0,"max":1}'), /bad frame/);
  assert.throws(() => decodeFrame("not json"));
  assert.throws(() => decodeFrame('{"t":1,"min":0,"max":1,"q":"!!"}'));
  assert.throws(() => decodeNodes('{"nodes":3}'), /bad nodes/);
  assert.deepEqual(decodeNodes('{"nodes":[{"name":"a"},{"name":"b","group":"r1"}]}'), [
    { name: "a", group: undefined },
    { name: "b", group: "r1" },
  ]);
});

test("down and missing colours are outside the value scale", () => {
  const lut = buildLUT();
  const scale = new Set(Array.from(lut.slice(0, QUANT_MAX + 1)));
  assert.ok(!scale.has(lut[QUANT_DOWN]) && !scale.has(lut[QUANT_MISSING]));
  assert.notEqual(lut[QUANT_DOWN], lut[QUANT_MISSING]);
  // The scale gets brighter monotonically (luma), so low values read as dark.
  const luma = (c: number) => {
    const [r, g, b] = scaleRGB(c);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  for (let c = 1; c <= QUANT_MAX; c++) assert.ok(luma(c) >= luma(c - 1) - 0.5, `luma drops at ${c}`);
  assert.ok(scale.size > 200, `${scale.size} distinct scale colours`);
});
