import { QUANT_DOWN } from "./frame";

// paintCell fills one heatmap cell of side s at (x, y) in px, a Uint32Array
// view of an ImageData of width w, with the colour of code c from lut. A
// down node (up == 0, also one that was expected but never connected) gets
// a diagonal hatch of lut[QUANT_DOWN] on downBg: unmistakable next to any
// scale colour and next to grey "no data".
export function paintCell(px: Uint32Array, w: number, x: number, y: number, s: number, c: number, lut: Uint32Array, downBg: number): void {
  if (c === QUANT_DOWN) {
    const fg = lut[c];
    for (let dy = 0; dy < s; dy++) {
      let o = (y + dy) * w + x;
      for (let dx = 0; dx < s; dx++) px[o++] = (dx + dy) % 4 < 2 ? fg : downBg;
    }
    return;
  }
  const col = lut[c];
  for (let dy = 0; dy < s; dy++) {
    const o = (y + dy) * w + x;
    px.fill(col, o, o + s);
  }
}
