// Decoding of the live endpoint's events (see internal/web/live.go).

export const QUANT_MAX = 253;
export const QUANT_DOWN = 254;
export const QUANT_MISSING = 255;

export interface NodeEntry {
  name: string;
  group?: string;
}

export interface Frame {
  t: number; // unix ms
  min: number;
  max: number;
  q: Uint8Array; // one code per node of the last nodes event
}

export function decodeFrame(data: string): Frame {
  const o = JSON.parse(data) as { t?: unknown; min?: unknown; max?: unknown; q?: unknown };
  if (typeof o.t !== "number" || typeof o.min !== "number" || typeof o.max !== "number" || typeof o.q !== "string") {
    throw new Error("bad frame: " + data.slice(0, 80));
  }
  return { t: o.t, min: o.min, max: o.max, q: base64Bytes(o.q) };
}

export function base64Bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function decodeNodes(data: string): NodeEntry[] {
  const o = JSON.parse(data) as { nodes?: unknown };
  if (!Array.isArray(o.nodes)) throw new Error("bad nodes event");
  return o.nodes.map((n: { name?: unknown; group?: unknown }) => ({
    name: String(n.name ?? ""),
    group: typeof n.group === "string" && n.group !== "" ? n.group : undefined,
  }));
}

// dequantise returns the value a code stands for, or null for down/missing.
export function dequantise(code: number, min: number, max: number): number | null {
  if (code > QUANT_MAX) return null;
  return min + (code / QUANT_MAX) * (max - min);
}
