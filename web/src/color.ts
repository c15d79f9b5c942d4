import { QUANT_MAX } from "./frame";

// A perceptually ordered dark-to-bright scale (violet, blue, teal, green,
// yellow). Grey (missing) and the red hatch (down) lie outside it, so neither
// can be mistaken for a low value.
const anchors: [number, number, number][] = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];

export const MISSING_RGB: [number, number, number] = [88, 88, 96];
export const DOWN_RGB: [number, number, number] = [214, 48, 49];
export const DOWN_BG_RGB: [number, number, number] = [40, 16, 16];
export const BG_RGB: [number, number, number] = [17, 19, 24];

export function scaleRGB(code: number): [number, number, number] {
  const x = (Math.min(Math.max(code, 0), QUANT_MAX) / QUANT_MAX) * (anchors.length - 1);
  const i = Math.min(Math.floor(x), anchors.length - 2);
  const f = x - i;
  const a = anchors[i];
  const b = anchors[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f)) as [number, number, number];
}

// packRGBA packs a colour for a Uint32Array view of ImageData, which is in
// platform byte order (little-endian everywhere we run).
export function packRGBA([r, g, b]: [number, number, number]): number {
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

// lut maps every code 0..255 to a packed colour; 254 and 255 hold the down
// and missing colours (down is additionally hatched by the painter).
export function buildLUT(): Uint32Array {
  const lut = new Uint32Array(256);
  for (let c = 0; c <= QUANT_MAX; c++) lut[c] = packRGBA(scaleRGB(c));
  lut[254] = packRGBA(DOWN_RGB);
  lut[255] = packRGBA(MISSING_RGB);
  return lut;
}

export function cssRGB([r, g, b]: [number, number, number]): string {
  return `rgb(${r},${g},${b})`;
}
