import { test } from "node:test";
import assert from "node:assert/strict";
import type { Alert, HealthFailure, NodeState, VigilEvent } from "../../src/api";
import {
  ALERT_CRITICAL, ALERT_WARNING, CHECK_FAILING, DOWN, OK, activeAlerts, countStates, healthFromSeries, mergeEvents, nodeStates, rank,
  rfc3339, safeLink, severityAtLeast, stateInfo, statusLUT, type State,
} from "../../src/status";
import { paintCell } from "../../src/cells";
import { computeLayout, groupRacks } from "../../src/layout";
import { DOWN_BG_RGB, packRGBA } from "../../src/color";

const alert = (node: string, severity: string, state = "firing", name = "A"): Alert =>
  ({ labels: { alertname: name, node, severity }, annotations: {}, state, activeAt: "2026-11-25T10:00:00Z" });

const keys = (s: Uint8Array) => [...s].map((x) => stateInfo[x as State].key);

test("a node shows its worst state: down > failing check > critical alert > warning alert > ok", () => {
  const nodes: NodeState[] = ["a", "b", "c", "d", "e", "f"].map((name) => ({ name, up: name !== "a" }));
  const health = new Map<string, HealthFailure[]>([["a", [{ check: "x" }]], ["b", [{ check: "gpu" }]], ["c", []]]);
  const alerts = [alert("a", "critical"), alert("b", "critical"), alert("c", "critical"), alert("c", "warning"),
    alert("d", "warning"), alert("e", "critical", "pending"), alert("zz", "critical")];
  assert.deepEqual(keys(nodeStates({ nodes, health, alerts })), ["down", "check", "critical", "warning", "ok", "ok"]);
  // The ranks behind it, DOWN's code (254) included.
  assert.deepEqual([OK, ALERT_WARNING, ALERT_CRITICAL, CHECK_FAILING, DOWN].map(rank), [0, 1, 2, 3, 4]);
});

test("a missing source leaves the others: no health, no alerts", () => {
  const nodes: NodeState[] = [{ name: "a", up: false }, { name: "b", up: true }, { name: "c", up: true }];
  assert.deepEqual(keys(nodeStates({ nodes, health: null, alerts: [alert("b", "page")] })), ["down", "critical", "ok"]);
  assert.deepEqual(keys(nodeStates({ nodes, health: new Map([["c", [{ check: "disk" }]]]), alerts: null })), ["down", "ok", "check"]);
  const c = countStates(nodeStates({ nodes, health: null, alerts: null }));
  assert.equal(c.get(DOWN), 1);
  assert.equal(c.get(OK), 2);
  assert.equal(c.get(CHECK_FAILING), 0);
});

test("health from the plugin's series: failing pairs with their reasons", () => {
  const m = healthFromSeries(
    [{ metric: { node: "cn1", check: "gpu" } }, { metric: { node: "cn1", check: "gpu", instance: "x" } }, { metric: { node: "cn2", check: "ib" } }, { metric: { check: "nolabel" } }],
    [{ metric: { node: "cn1", check: "gpu", reason: "ECC errors: 3" } }],
  );
  assert.deepEqual([...m], [["cn1", [{ check: "gpu", reason: "ECC errors: 3" }]], ["cn2", [{ check: "ib", reason: undefined }]]]);
});

test("active alerts: firing first, critical first, oldest first; inactive dropped", () => {
  const l = [
    { ...alert("a", "warning", "firing", "W"), activeAt: "2026-11-25T09:00:00Z" },
    { ...alert("b", "critical", "pending", "P") },
    { ...alert("c", "critical", "firing", "C2"), activeAt: "2026-11-25T11:00:00Z" },
    { ...alert("c", "critical", "firing", "C1"), activeAt: "2026-11-25T08:00:00Z" },
    { ...alert("d", "critical", "inactive", "I") },
  ];
  assert.deepEqual(activeAlerts(l).map((a) => a.labels.alertname), ["C1", "C2", "W", "P"]);
});

const ev = (id: number, t: number, kind = "node_down"): VigilEvent => ({ id: String(id), time: t, kind, severity: "info", summary: "" });

test("events merge newest first, without repeats, capped", () => {
  let l: VigilEvent[] = [];
  l = mergeEvents(l, [ev(1, 1000), ev(3, 3000), ev(2, 2000)], 10);
  assert.deepEqual(l.map((e) => e.id), ["3", "2", "1"]);
  l = mergeEvents(l, [ev(3, 3000), ev(4, 3000), ev(10, 3000)], 10);
  assert.deepEqual(l.map((e) => e.id), ["10", "4", "3", "2", "1"], "same time: the larger id (numerically) first");
  l = mergeEvents(l, [ev(5, 500)], 5);
  assert.deepEqual(l.map((e) => e.id), ["10", "4", "3", "2", "1"], "over the cap the oldest goes");
});

test("filters and links", () => {
  assert.equal(severityAtLeast("warning"), "warning,critical");
  assert.equal(severityAtLeast("critical"), "critical");
  assert.equal(severityAtLeast("bogus"), "");
  assert.equal(safeLink("#/node/cn1"), "#/node/cn1");
  assert.equal(safeLink("javascript:alert(1)"), null);
  assert.equal(safeLink("https://evil.example/"), null);
  assert.equal(safeLink(undefined), null);
  assert.equal(rfc3339(Date.UTC(2026, 10, 25, 10, 0, 0, 999)), "2026-11-25T10:00:00Z");
  assert.equal(rfc3339(Date.UTC(2026, 10, 25, 10, 0, 0, 1), true), "2026-11-25T10:00:01Z");
  assert.equal(rfc3339(Date.UTC(2026, 10, 25, 10, 0, 0), true), "2026-11-25T10:00:00Z");
});

// Everything the view does for a list of nodes but the canvas upload:
// states from the three sources, the heatmap's layout, every cell painted.
// 20,000 nodes must take well under 200 ms.
test("20,000 nodes: states, layout and paint under 200 ms", () => {
  const n = 20000;
  const nodes: NodeState[] = Array.from({ length: n }, (_, i) => ({ name: "cn" + String(i + 1).padStart(5, "0"), up: i % 97 !== 0 }));
  const health = new Map<string, HealthFailure[]>();
  for (let i = 5; i < n; i += 61) health.set(nodes[i].name, [{ check: "gpu", reason: "ECC" }]);
  const alerts: Alert[] = [];
  for (let i = 7; i < n; i += 43) alerts.push(alert(nodes[i].name, i % 2 ? "critical" : "warning"));
  const lut = statusLUT();
  const downBg = packRGBA(DOWN_BG_RGB);
  const run = () => {
    const t0 = performance.now();
    const s = nodeStates({ nodes, health, alerts });
    const l = computeLayout(nodes, 1000, 800);
    const px = new Uint32Array(l.width * Math.max(1, l.height));
    for (let i = 0; i < n; i++) paintCell(px, l.width, l.cellX[i], l.cellY[i], l.cell, s[i], lut, downBg);
    return { ms: performance.now() - t0, s, px, l };
  };
  run(); // warm up the JIT, as a view's second refresh is
  const times: number[] = [];
  let last = run();
  for (let k = 0; k < 5; k++) {
    last = run();
    times.push(last.ms);
  }
  times.sort((a, b) => a - b);
  const median = times[2];
  console.log(`status grid, 20,000 nodes: median ${median.toFixed(1)} ms of ${times.map((t) => t.toFixed(1)).join(", ")}`);
  assert.ok(median < 200, `median ${median.toFixed(1)} ms`);
  const c = countStates(last.s);
  assert.equal(c.get(DOWN), Math.ceil(n / 97));
  assert.equal([...c.values()].reduce((a, b) => a + b, 0), n);
  assert.equal(groupRacks(nodes).length, Math.ceil(n / 32));
  // Each state's cell carries its colour.
  const at = (i: number) => last.px[last.l.cellY[i] * last.l.width + last.l.cellX[i] + 1];
  assert.equal(at(1), lut[OK]);
  assert.equal(at(5), lut[CHECK_FAILING]);
});
