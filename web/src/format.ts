export type Unit = "fraction" | "bytes" | "bytes/s" | "none";

const si = ["", "k", "M", "G", "T", "P", "E"];
const iec = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

export function formatValue(v: number | null | undefined, unit: Unit = "none"): string {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (!Number.isFinite(v)) return v > 0 ? "+Inf" : "-Inf";
  switch (unit) {
    case "fraction":
      if (v === 0) return "0%";
      return (v * 100).toFixed(Math.abs(v) < 0.1 ? 1 : 0) + "%";
    case "bytes":
    case "bytes/s": {
      let i = 0;
      let x = Math.abs(v);
      while (x >= 1024 && i < iec.length - 1) {
        x /= 1024;
        i++;
      }
      const s = (v < 0 ? "-" : "") + (x >= 100 || i === 0 ? x.toFixed(0) : x.toFixed(1)) + " " + iec[i];
      return unit === "bytes/s" ? s + "/s" : s;
    }
  }
  return formatNumber(v);
}

export function formatNumber(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return "0";
  if (a >= 1e4) {
    let i = 0;
    let x = a;
    while (x >= 1000 && i < si.length - 1) {
      x /= 1000;
      i++;
    }
    return (v < 0 ? "-" : "") + (x >= 100 ? x.toFixed(0) : x.toFixed(1)) + si[i];
  }
  if (a >= 100) return v.toFixed(0);
  if (a >= 1) return v.toFixed(2).replace(/\.?0+$/, "");
  if (a >= 0.001) return v.toPrecision(3).replace(/\.?0+$/, "");
  return v.toExponential(2);
}

export function formatLabels(metric: Record<string, string>, omit: string[] = []): string {
  const name = metric.__name__ ?? "";
  const parts = Object.keys(metric)
    .filter((k) => k !== "__name__" && !omit.includes(k))
    .sort()
    .map((k) => `${k}="${metric[k]}"`);
  if (parts.length === 0) return name || "{}";
  return `${name}{${parts.join(", ")}}`;
}

export function formatTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

// byteIncrs are the tick steps of a byte axis: powers of two of each binary
// unit, so ticks land on 256 MiB, 512 MiB, 1 GiB… and read as round numbers
// in the binary units formatValue uses (decimal steps would read 191 MiB).
export const byteIncrs: number[] = (() => {
  const out: number[] = [];
  for (let k = 0; k < 7; k++) for (let m = 1; m < 1024; m *= 2) out.push(m * 1024 ** k);
  return out;
})();

// axisLabels formats one axis's tick values in one unit (that of the
// largest), with as few decimals as keep every label exact, e.g.
// 0, 0.25, 0.5 GiB rather than 0 B, 256 MiB, 0.5 GiB.
export function axisLabels(vals: number[], unit: Unit = "none"): string[] {
  const finite = vals.filter((v) => Number.isFinite(v));
  const top = Math.max(0, ...finite.map((v) => Math.abs(v)));
  if (unit === "bytes" || unit === "bytes/s") {
    let i = 0;
    while (top >= 1024 ** (i + 1) && i < iec.length - 1) i++;
    const d = decimals(finite.map((v) => v / 1024 ** i));
    const sfx = " " + iec[i] + (unit === "bytes/s" ? "/s" : "");
    return vals.map((v) => (Number.isFinite(v) ? (v / 1024 ** i).toFixed(d) + sfx : formatValue(v, unit)));
  }
  if (unit === "fraction") {
    const d = decimals(finite.map((v) => v * 100));
    return vals.map((v) => (Number.isFinite(v) ? (v * 100).toFixed(d) + "%" : formatValue(v, unit)));
  }
  return vals.map((v) => formatValue(v, unit));
}

function decimals(xs: number[]): number {
  for (let d = 0; d < 3; d++) if (xs.every((x) => Math.abs(x * 10 ** d - Math.round(x * 10 ** d)) < 1e-6 * 10 ** d)) return d;
  return 3;
}
