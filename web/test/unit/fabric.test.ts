import { test } from "node:test";
import assert from "node:assert/strict";
import type { FabricAnswer, FabricLink, FabricSwitch } from "../../src/api";
import { boxValue, drawOrder, edgeValue, endpoints, hitBox, hitCell, hitEdge, layout, linkQueries, matrix, parseMeasure, position, scaleFor, value, worstEdge } from "../../src/fabric";

function link(sw: string, port: number, remote: string, rport: number, type = "switch", extra: Partial<FabricLink> = {}): FabricLink {
  return {
    name: `${sw} p${port} → ${remote} p${rport}`, switch_guid: "g-" + sw, switch: sw, port: String(port), remote_guid: "g-" + remote.split(" ")[0], remote,
    remote_port: String(rport), remote_type: type, up: true, capacity_bytes_per_second: 12.5e9, tx_bytes_per_second: 0, rx_bytes_per_second: 0,
    utilization: 0, xmit_wait_per_second: 0, errors_per_second: 0, ...extra,
  };
}

// fatTree: spines above leaves, each leaf linked once to each spine (both
// ends listed), hosts per leaf on CA ports.
function fatTree(spines: number, leaves: number, hosts: number): FabricAnswer {
  const sw: FabricSwitch[] = [];
  const links: FabricLink[] = [];
  for (let s = 1; s <= spines; s++) sw.push({ guid: "g-spine" + s, name: "spine" + s, level: "spine", node_count: leaves * hosts, swept: true });
  for (let l = 1; l <= leaves; l++) {
    sw.push({ guid: "g-leaf" + l, name: "leaf" + l, level: "leaf", node_count: hosts, swept: true });
    for (let k = 1; k <= hosts; k++) links.push(link("leaf" + l, k, `cn${l}-${k} HCA-1`, 1, "ca"));
    for (let s = 1; s <= spines; s++) {
      links.push(link("leaf" + l, hosts + s, "spine" + s, l));
      links.push(link("spine" + s, l, "leaf" + l, hosts + s));
    }
  }
  return { time: "2026-11-28T15:00:00Z", window: "1m", switches: sw, links };
}

test("layout: spines above leaves, both ends of a link one edge, node ports on their leaf", () => {
  const f = fatTree(2, 3, 2);
  const L = layout(f, 1200);
  assert.equal(L.boxes.length, 5);
  const y = (name: string) => L.boxes.find((b) => b.sw.name === name)!.y;
  assert.ok(y("spine1") < y("leaf1"), "spines are drawn above leaves");
  assert.equal(y("spine1"), y("spine2"));
  assert.equal(L.edges.length, 6, "12 switch-port ends make 6 links");
  for (const e of L.edges) {
    assert.ok(e.b, `${e.a.name} has its other end`);
    assert.equal(L.boxes[e.upper].sw.level, "spine");
    assert.equal(L.boxes[e.lower].sw.level, "leaf");
    const [, y1, , y2] = endpoints(L, e);
    assert.ok(y1 < y2);
  }
  assert.deepEqual(L.boxes.filter((b) => b.sw.level === "leaf").map((b) => b.ca.length), [2, 2, 2]);
  assert.ok(L.boxes.every((b) => b.label), "room for names at 1200 px");
  const big = layout(fatTree(18, 220, 18), 1200);
  assert.ok(big.boxes.every((b) => b.label === (b.sw.level === "spine")), "names for 18 spines, none for 220 leaves in 1200 px");
});

test("an edge takes the worse end's value and is down if either end is", () => {
  const f = fatTree(1, 1, 0);
  f.links![0].xmit_wait_per_second = 10;
  f.links![1].xmit_wait_per_second = 5000;
  f.links![1].up = false;
  const L = layout(f, 800);
  assert.equal(L.edges.length, 1);
  assert.equal(edgeValue(L.edges[0], "wait"), 5000);
  assert.equal(L.edges[0].up, false);
});

test("scales: utilization linear, wait and errors logarithmic from 1/s", () => {
  assert.deepEqual(scaleFor("util", []), { lo: 0, hi: 1, log: false });
  const f = fatTree(1, 2, 1);
  f.links![1].xmit_wait_per_second = 1e8;
  const s = scaleFor("wait", layout(f, 800).edges);
  assert.equal(s.hi, 1e8);
  assert.equal(position(0, s), 0);
  assert.equal(position(1e4, s), 0.5);
  assert.equal(position(1e9, s), 1);
  assert.equal(position(0.5, { lo: 0, hi: 1, log: false }), 0.5);
  assert.equal(position(NaN, s), 0);
});

test("hit testing finds the link under the pointer and the switch box", () => {
  const L = layout(fatTree(2, 3, 2), 1200);
  L.edges.forEach((e, i) => {
    const [x1, y1, x2, y2] = endpoints(L, e);
    const mid = hitEdge(L, (x1 + x2) / 2, (y1 + y2) / 2);
    assert.ok(mid === i || edgeCross(L, i, mid), `midpoint of ${e.a.name} hits it (got ${mid})`);
  });
  assert.equal(hitEdge(L, 2, L.height - 2), -1);
  const leaf2 = L.boxes.findIndex((b) => b.sw.name === "leaf2");
  assert.equal(hitBox(L, L.boxes[leaf2].x, L.boxes[leaf2].y + 5), leaf2);
  assert.equal(hitBox(L, 1, 1), -1);
});

// Two edges whose midpoints coincide (a symmetric layout) are both right.
function edgeCross(L: ReturnType<typeof layout>, i: number, j: number): boolean {
  if (j < 0) return false;
  const a = endpoints(L, L.edges[i]);
  const b = endpoints(L, L.edges[j]);
  return Math.abs((a[0] + a[2]) / 2 - (b[0] + b[2]) / 2) < 1 && Math.abs((a[1] + a[3]) / 2 - (b[1] + b[3]) / 2) < 1;
}

test("the worst links are drawn last, down links first", () => {
  const f = fatTree(2, 2, 0);
  const L = layout(f, 800);
  L.edges[0].a.utilization = 0.9;
  L.edges[1].up = false;
  const order = drawOrder(L, "util");
  assert.equal(order[order.length - 1], 0);
  assert.equal(order[0], 1);
});

test("leaves are filled by their worst node port; measures parse", () => {
  const f = fatTree(1, 1, 3);
  f.links![1].errors_per_second = 7;
  const L = layout(f, 800);
  assert.equal(boxValue(L.boxes.find((b) => b.sw.level === "leaf")!, "errors"), 7);
  assert.equal(parseMeasure("wait"), "wait");
  assert.equal(parseMeasure("nonsense"), "util");
  assert.equal(value(f.links![1], "errors"), 7);
});

test("238 switches and 11,880 ports lay out as 3,960 links", () => {
  // 220 leaves of 36 ports (18 nodes, one link to each of 18 spines) and
  // 18 spines of 220 ports: 11,880 ports.
  const f = fatTree(18, 220, 18);
  assert.equal(f.links!.length, 220 * 18 + 2 * 220 * 18);
  const L = layout(f, 1400);
  assert.equal(L.boxes.length, 238);
  assert.equal(L.edges.length, 220 * 18);
});

test("link charts select the port, quoting its labels", () => {
  const l = link('le"af', 3, "spine1", 1);
  const qs = linkQueries(l, 60);
  assert.ok(qs.every((q) => q.expr.includes('switch_guid="g-le\\"af",port="3"')), qs.map((q) => q.expr).join("\n"));
  assert.ok(qs.find((q) => q.title.startsWith("Errors"))!.expr.includes("offset 60s)) / 60"));
  // PortCounters' errors by name: not the details that break them down.
  const errs = qs.find((q) => q.title.startsWith("Errors"))!.expr;
  assert.ok(errs.includes("|receive_errors|") && !errs.includes(".+") && !errs.includes("local_phy"), errs);
  assert.ok(qs.find((q) => q.title.startsWith("Xmit wait by VL"))!.expr.includes("max by (vl)"));
  // Utilization as the API's: the busier of tx and rx.
  const util = qs.find((q) => q.title === "Utilization")!.expr;
  assert.ok(util.includes("transmit_data") && util.includes("receive_data"), util);
});

test("a core row goes above the spines", () => {
  const f = fatTree(2, 2, 1);
  f.switches!.push({ guid: "g-core1", name: "core1", level: "core", node_count: 2, swept: true });
  for (let s = 1; s <= 2; s++) {
    f.links!.push(link("core1", s, "spine" + s, 9));
    f.links!.push(link("spine" + s, 9, "core1", s));
  }
  const L = layout(f, 900);
  const y = (n: string) => L.boxes.find((b) => b.sw.name === n)!.y;
  assert.ok(y("core1") < y("spine1") && y("spine1") < y("leaf1"));
  const up = L.edges.filter((e) => L.boxes[e.upper].sw.name === "core1");
  assert.equal(up.length, 2);
  assert.ok(up.every((e) => L.boxes[e.lower].sw.level === "spine" && e.b));
});

test("a dense fabric's links as a matrix: a row per spine, a column per leaf", () => {
  const f = fatTree(18, 238, 2);
  const L = layout(f, 1400);
  const M = matrix(L, 1400);
  assert.equal(M.rows.length, 18);
  assert.equal(M.cols.length, 238);
  assert.equal(M.cells.size, 18 * 238);
  assert.ok(M.width <= 1400, `${M.width} px`);
  // The cell of spine3 and leaf10 holds their one cable.
  const r = M.rows.findIndex((b) => L.boxes[b].sw.name === "spine3");
  const c = M.cols.findIndex((b) => L.boxes[b].sw.name === "leaf10");
  const hit = hitCell(M, M.left + c * M.cw + 1, r * M.ch + 1)!;
  assert.equal(hit.length, 1);
  const e = L.edges[hit[0]];
  assert.deepEqual([L.boxes[e.upper].sw.name, L.boxes[e.lower].sw.name], ["spine3", "leaf10"]);
  assert.equal(hitCell(M, 5, 5), null);
  assert.equal(hitCell(M, M.width + 5, 5), null);
  // Two cables between one pair: the cell shows the worse.
  const g = fatTree(1, 1, 0);
  g.links!.push(link("leaf1", 9, "spine1", 5, "switch", { utilization: 0.9 }), link("spine1", 5, "leaf1", 9));
  const L2 = layout(g, 600);
  const M2 = matrix(L2, 600);
  const both = M2.cells.get(0)!;
  assert.equal(both.length, 2);
  assert.equal(L2.edges[worstEdge(L2, both, "util")].a.port, "9");
});
