import { test } from "node:test";
import assert from "node:assert/strict";
import { lustreColumns, lustreRow, validLustre } from "../../src/lustre";

test("lustre section: shape checked, hostile values count as nothing", () => {
  assert.equal(validLustre(null), null);
  assert.equal(validLustre({ fs: "scratch" }), null);
  assert.equal(validLustre([{ fs: "" }, { fs: 3 }, null]), null);
  const fs = validLustre([
    { fs: "scratch", read_bytes: 3 * 2 ** 30, write_bytes: 512, reads: 12000, writes: 4, metadata_ops: 17, ost_ops: 2, osts: 8, mdts: 1 },
    { fs: 7 },
    { fs: "home", read_bytes: "lots", write_bytes: -1, reads: Infinity, writes: NaN, osts: 2.5 },
  ]);
  assert.ok(fs);
  assert.equal(fs.length, 2);
  assert.deepEqual(fs[1], { fs: "home", read_bytes: 0, write_bytes: 0, reads: 0, writes: 0, metadata_ops: 0, ost_ops: 0, osts: 2, mdts: 0 });
  const many = validLustre(Array.from({ length: 100 }, (_, i) => ({ fs: "fs" + i })));
  assert.equal(many?.length, 64);
});

test("lustre rows: a cell per column, sizes and counts formatted", () => {
  const fs = validLustre([{ fs: "scratch", read_bytes: 3 * 2 ** 30, write_bytes: 512, reads: 12000, writes: 4, metadata_ops: 17, ost_ops: 0, osts: 8, mdts: 1 },
    { fs: "home" }]);
  assert.ok(fs);
  const row = lustreRow(fs[0]);
  assert.equal(row.length, lustreColumns.length);
  assert.deepEqual(row, ["scratch", "3.0 GiB", "512 B", "12.0k", "4", "17", "0", "8 OSTs, 1 MDT"]);
  assert.equal(lustreRow(fs[1]).at(-1), "–");
});
