import { test } from "node:test";
import assert from "node:assert/strict";
import { parseScale, remap, remapTable } from "../../src/scale";
import { QUANT_DOWN, QUANT_MAX, QUANT_MISSING } from "../../src/frame";

test("a quiet frame on a fixed 0..1 scale stays dark, not stretched over the palette", () => {
  // Frame values 1 %..3 %: the server quantises them to 0..253 over their own range.
  const t = remapTable(0.01, 0.03, { auto: false, lo: 0, hi: 1 });
  assert.equal(t[0], Math.round(0.01 * QUANT_MAX));
  assert.equal(t[QUANT_MAX], Math.round(0.03 * QUANT_MAX));
  assert.equal(t[QUANT_DOWN], QUANT_DOWN);
  assert.equal(t[QUANT_MISSING], QUANT_MISSING);
  const q = Uint8Array.from([0, QUANT_MAX, QUANT_DOWN, QUANT_MISSING]);
  assert.deepEqual([...remap(q, t, new Uint8Array(4))], [3, 8, QUANT_DOWN, QUANT_MISSING]);
});

test("the same value gets the same colour in frames of different ranges", () => {
  const s = { auto: false, lo: 0, hi: 1 };
  // 0.5 is the top of frame A (0..0.5) and the middle of frame B (0..1).
  assert.equal(remapTable(0, 0.5, s)[QUANT_MAX], remapTable(0, 1, s)[Math.round(QUANT_MAX / 2)]);
});

test("values outside the scale clamp to its ends; a flat frame maps to its value", () => {
  const t = remapTable(-5, 10, { auto: false, lo: 0, hi: 1 });
  assert.equal(t[0], 0);
  assert.equal(t[QUANT_MAX], QUANT_MAX);
  assert.equal(remapTable(0.25, 0.25, { auto: false, lo: 0, hi: 1 })[0], Math.round(0.25 * QUANT_MAX));
});

test("auto keeps the frame's own codes", () => {
  const t = remapTable(3, 7, { auto: true, lo: 0, hi: 0 });
  for (let c = 0; c < 256; c++) assert.equal(t[c], c);
});

test("scale from the URL, else the preset's range, else auto", () => {
  const p = (s: string) => new URLSearchParams(s);
  assert.deepEqual(parseScale(p(""), [0, 1]), { auto: false, lo: 0, hi: 1 });
  assert.deepEqual(parseScale(p("scale=auto"), [0, 1]), { auto: true, lo: 0, hi: 0 });
  assert.deepEqual(parseScale(p("lo=2&hi=8"), [0, 1]), { auto: false, lo: 2, hi: 8 });
  assert.deepEqual(parseScale(p("lo=8&hi=2"), [0, 1]), { auto: false, lo: 0, hi: 1 });
  assert.deepEqual(parseScale(p("lo=x&hi=2")), { auto: true, lo: 0, hi: 0 });
  assert.deepEqual(parseScale(p("")), { auto: true, lo: 0, hi: 0 });
});
