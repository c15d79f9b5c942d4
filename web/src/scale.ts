import { QUANT_MAX } from "./frame";

// The heatmap's colour scale. Frames arrive quantised against their own
// min..max (internal/web/frame.go); painting those codes as they are would
// stretch every frame over the whole palette, so a quiet cluster looks as
// alarming as a busy one and colours mean nothing from one frame to the
// next. A fixed scale maps each value onto lo..hi instead; "auto" keeps the
// frame's own range, and the legend says which is in use.

export interface Scale {
  auto: boolean;
  lo: number;
  hi: number;
}

// remapTable maps the codes of a frame quantised over fmin..fmax to codes of
// the scale lo..hi; values outside it clamp to its ends. Down and missing
// codes (above QUANT_MAX) stay as they are.
export function remapTable(fmin: number, fmax: number, s: Scale, out = new Uint8Array(256)): Uint8Array {
  for (let c = 0; c < 256; c++) out[c] = c;
  if (s.auto) return out;
  const span = s.hi - s.lo;
  for (let c = 0; c <= QUANT_MAX; c++) {
    const v = fmin + (c / QUANT_MAX) * (fmax - fmin);
    const x = span > 0 ? ((v - s.lo) / span) * QUANT_MAX : v >= s.hi ? QUANT_MAX : 0;
    out[c] = Math.min(QUANT_MAX, Math.max(0, Math.round(x)));
  }
  return out;
}

export function remap(q: Uint8Array, table: Uint8Array, out: Uint8Array): Uint8Array {
  for (let i = 0; i < q.length; i++) out[i] = table[q[i]];
  return out;
}

// parseScale reads ?scale=auto or ?lo=&hi= (numbers, lo < hi); without
// either the preset's fixed range applies, and with none either, auto.
export function parseScale(p: URLSearchParams, preset?: [number, number]): Scale {
  if (p.get("scale") === "auto") return { auto: true, lo: 0, hi: 0 };
  const lo = Number(p.get("lo") ?? NaN), hi = Number(p.get("hi") ?? NaN);
  if (p.has("lo") && p.has("hi") && Number.isFinite(lo) && Number.isFinite(hi) && lo < hi) return { auto: false, lo, hi };
  if (preset) return { auto: false, lo: preset[0], hi: preset[1] };
  return { auto: true, lo: 0, hi: 0 };
}
