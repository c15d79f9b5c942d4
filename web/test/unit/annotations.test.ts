import { test } from "node:test";
import assert from "node:assert/strict";
import type { VigilEvent } from "../../src/api";
import { nearest, placeMarkers } from "../../src/annotations";

const ev = (id: string, sec: number, kind = "job_start"): VigilEvent => ({ id, time: sec * 1000, kind, severity: "info", summary: "" });

test("markers: inside the range only, placed by time, sorted by x", () => {
  // A 600 px wide plot over 1000..2000 s.
  const toX = (t: number) => ((t - 1000) / 1000) * 600;
  const p = placeMarkers([ev("a", 1500), ev("b", 999), ev("c", 1000), ev("d", 2000), ev("e", 2001), ev("f", 1250)], 1000, 2000, toX);
  assert.deepEqual(p.map((m) => [m.e.id, m.x]), [["c", 0], ["f", 150], ["a", 300], ["d", 600]]);
});

test("tooltip: the markers near the pointer, nearest first", () => {
  const toX = (t: number) => t;
  const p = placeMarkers([ev("a", 100), ev("b", 103), ev("c", 110), ev("d", 300)], 0, 1000, toX);
  assert.deepEqual(nearest(p, 104, 5).map((m) => m.e.id), ["b", "a"]);
  assert.deepEqual(nearest(p, 109, 5).map((m) => m.e.id), ["c"]);
  assert.deepEqual(nearest(p, 200, 5), []);
  assert.deepEqual(nearest(p, 300, 0).map((m) => m.e.id), ["d"]);
  assert.deepEqual(nearest([], 1, 5), []);
});
