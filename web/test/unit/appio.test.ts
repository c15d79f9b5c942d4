import { test } from "node:test";
import assert from "node:assert/strict";
import { callsOf, fileCalls, filesBy, histogram, ioShares, sizeLabel, validFiles, validIO, type JobIO } from "../../src/appio";
import { presets, selected } from "../../src/presets";

const buckets = ["100", "1024", "10240", "102400", "1048576", "4194304", "10485760", "104857600", "1073741824", "+Inf"];
const zeros = () => buckets.map(() => 0);

function io(): JobIO {
  const ws = zeros(), rs = zeros();
  ws[1] = 300; ws[4] = 100; rs[4] = 50;
  return {
    buckets, read_sizes: rs, write_sizes: ws, sequential: 90, random: 10, read_seconds: 2, write_seconds: 3, meta_seconds: 5,
    fs: [{ mountpoint: "/scratch", fstype: "lustre", read_bytes: 1, write_bytes: 2, calls: { open: 4, close: 4, stat: 7, write: 400 },
      read_seconds: 2, write_seconds: 3, meta_seconds: 5, sequential: 90, random: 10, read_sizes: rs, write_sizes: ws }],
  };
}

test("access-size histogram gives each bucket its share of reads and writes", () => {
  const rows = histogram(io());
  assert.equal(rows.length, 10);
  assert.equal(rows[1].label, "≤ 1 KiB");
  assert.equal(rows[4].label, "≤ 1 MiB");
  assert.equal(rows[9].label, "> 1 GiB");
  assert.equal(rows[1].writeShare, 0.75);
  assert.equal(rows[4].writeShare, 0.25);
  assert.equal(rows[4].readShare, 1);
  assert.equal(rows[0].readShare, 0);
  // Hostile values count as nothing.
  const bad = io();
  bad.write_sizes = [NaN, -5, Infinity] as number[];
  assert.deepEqual(histogram(bad).map((r) => r.writeShare), zeros());
});

test("sequential and metadata shares", () => {
  assert.deepEqual(ioShares(io()), { sequential: 0.9, meta: 0.5 });
  const none = { ...io(), sequential: 0, random: 0, read_seconds: 0, write_seconds: 0, meta_seconds: 0 };
  assert.deepEqual(ioShares(none), { sequential: null, meta: null });
  assert.equal(callsOf(io().fs[0], "open", "close", "stat", "seek"), 15);
});

test("io section is kept only when it has the report's shape", () => {
  assert.equal(validIO(null), null);
  assert.equal(validIO({ fs: "x", buckets: [] }), null);
  assert.equal(validIO({ ...io(), fs: [] }), null);
  const many = { ...io(), fs: Array.from({ length: 100 }, () => io().fs[0]) };
  assert.equal(validIO(many)!.fs.length, 64);
  assert.equal(sizeLabel("+Inf", undefined), "larger");
});

test("heatmap presets colour by application I/O rate and metadata ops", () => {
  const p = new URLSearchParams({ m: "appio" });
  assert.equal(selected(p).expr, "sum by (node) (rate(vigil_appio_bytes_total[1m]))");
  assert.equal(selected(p).unit, "bytes/s");
  const m = selected(new URLSearchParams({ m: "appiometa" }));
  assert.match(m.expr, /vigil_appio_calls_total\{op=~"open\|close\|stat\|meta\|seek\|sync"\}/);
  assert.equal(new Set(presets.map((x) => x.id)).size, presets.length);
});

test("top files: kept when well formed, listed by the ranking asked", () => {
  const f = { path: "/scratch/x", node: "cn1", mountpoint: "/scratch", read_bytes: 0, write_bytes: 102400000, reads: 0, writes: 100000,
    meta_ops: 2, seconds: 1.5, small_writes: 100000 };
  const g = { ...f, path: "/scratch/y", writes: 5, write_bytes: 1 << 30 };
  const files = validFiles({ by_bytes: [g, f, { path: 5 }], by_calls: [f, g], by_time: "x" })!;
  assert.equal(files.by_bytes.length, 2);
  assert.equal(files.by_time.length, 0);
  assert.equal(filesBy(files, "calls")[0].path, "/scratch/x");
  assert.equal(filesBy(files, "bytes")[0].path, "/scratch/y");
  assert.equal(fileCalls(f), 100002);
  assert.equal(validFiles({ by_bytes: [], by_calls: [], by_time: [] }), null);
  // A job with files but no appio series keeps its io section.
  const only = validIO({ ...io(), fs: [], files: { by_bytes: [f], by_calls: [], by_time: [] } })!;
  assert.equal(only.fs.length, 0);
  assert.equal(only.files!.by_bytes[0].writes, 100000);
  assert.equal(validIO({ ...io(), fs: [], files: null }), null);
  const many = validFiles({ by_bytes: Array.from({ length: 500 }, () => f), by_calls: [], by_time: [] })!;
  assert.equal(many.by_bytes.length, 100);
});
