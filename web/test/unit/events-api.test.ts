// The issue 15 calls of api.ts: node list, health, alerts, events and
// their stream, against fixtures of the contract's answers.
import { afterEach, test } from "node:test";
import assert from "node:assert/strict";
import { ApiError, healthStatus, listAlerts, listEvents, listNodes, parseEvent, streamEvents, type VigilEvent } from "../../src/api";

const realFetch = globalThis.fetch;
let urls: string[] = [];
function answer(status: number, body: unknown): void {
  urls = [];
  globalThis.fetch = (async (url: string) => {
    urls.push(url);
    return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  }) as typeof fetch;
}
afterEach(() => {
  globalThis.fetch = realFetch;
});

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiError, String(e));
    return e;
  }
  assert.fail("resolved, want a rejection");
}

const notFound = { status: "error", errorType: "not_found", error: "404 page not found" };

test("node list: names, up and groups; junk entries skipped", async () => {
  answer(200, { nodes: [{ name: "cn1", up: true }, { name: "cn2", up: false, group: "rackA" }, { name: "" }, null, { up: true }] });
  assert.deepEqual(await listNodes(), [{ name: "cn1", up: true, group: undefined }, { name: "cn2", up: false, group: "rackA" }]);
  assert.deepEqual(urls, ["api/web/nodes"]);
});

test("health: failing checks by node; 404 is a status the view can tell", async () => {
  answer(200, { status: "success", data: { nodes: { cn1: [{ check: "gpu", reason: "ECC", since: "2026-11-25T10:00:00Z" }, { bad: 1 }], cn2: [], cn3: "x" } } });
  const m = await healthStatus();
  assert.deepEqual([...m], [["cn1", [{ check: "gpu", reason: "ECC", since: "2026-11-25T10:00:00Z" }]]]);
  assert.deepEqual(urls, ["api/v1/health"]);
  answer(404, notFound);
  assert.equal((await rejection(healthStatus())).status, 404);
});

test("alerts: Prometheus' shape, labels kept as strings", async () => {
  answer(200, { status: "success", data: { alerts: [
    { labels: { alertname: "NodeDown", node: "cn1", severity: "critical", n: 3 }, annotations: { summary: "cn1 is down" }, state: "firing", activeAt: "2026-11-25T10:00:00Z", value: "0e+00" },
  ] } });
  const l = await listAlerts();
  assert.deepEqual(l, [{ labels: { alertname: "NodeDown", node: "cn1", severity: "critical" }, annotations: { summary: "cn1 is down" }, state: "firing", activeAt: "2026-11-25T10:00:00Z", value: "0e+00" }]);
  answer(200, { status: "success", data: { groups: [] } });
  assert.equal((await rejection(listAlerts())).errorType, "bad_answer");
  answer(404, notFound);
  assert.equal((await rejection(listAlerts())).status, 404);
});

test("events: GET with the filters, events checked, next kept", async () => {
  answer(200, { status: "success", data: { events: [
    { id: 12, time: "2026-11-25T10:00:01Z", kind: "health_fail", node: "cn2", severity: "critical", summary: "gpu: ECC", link: "#/node/cn2" },
    { id: 11, time: "not a time", kind: "x", severity: "info", summary: "" },
    { id: 10, time: "2026-11-25T10:00:00Z", kind: "job_start", job: "77", summary: "job 77 started" },
  ], next: "10" } });
  const pg = await listEvents(new URLSearchParams({ node: "cn2", kind: "health_fail,health_pass", limit: "5" }));
  assert.equal(urls[0], "api/v1/events?node=cn2&kind=health_fail%2Chealth_pass&limit=5");
  assert.deepEqual(pg.events.map((e) => [e.id, e.kind, e.severity]), [["12", "health_fail", "critical"], ["10", "job_start", "info"]]);
  assert.equal(pg.events[0].time, Date.parse("2026-11-25T10:00:01Z"));
  assert.equal(pg.next, "10");
  answer(200, { status: "success", data: { events: null, next: "" } });
  assert.deepEqual(await listEvents(new URLSearchParams()), { events: [], next: "" });
  answer(404, notFound);
  assert.equal((await rejection(listEvents(new URLSearchParams()))).status, 404);
  assert.equal(parseEvent("x"), null);
  assert.equal(parseEvent({ id: {}, time: "2026-11-25T10:00:00Z", kind: "k" }), null);
});

test("event stream: vigil events with the filters in the URL", () => {
  const made: { url: string; es: EventTarget & { close(): void } }[] = [];
  class FakeES extends EventTarget {
    constructor(readonly url: string) {
      super();
      made.push({ url, es: this });
    }
    close() {}
  }
  (globalThis as unknown as { EventSource: unknown }).EventSource = FakeES;
  const got: VigilEvent[] = [];
  const ctl = new AbortController();
  streamEvents(() => new URLSearchParams({ severity: "warning,critical" }), { event: (e) => got.push(e) }, ctl.signal);
  assert.equal(made[0].url, "api/v1/events/stream?severity=warning%2Ccritical");
  const send = (data: string) => made[0].es.dispatchEvent(new MessageEvent("vigil", { data }));
  send(JSON.stringify({ id: 5, time: "2026-11-25T10:00:00Z", kind: "node_down", node: "cn1", severity: "critical", summary: "down" }));
  send("{not json");
  send(JSON.stringify({ id: 6 }));
  assert.deepEqual(got.map((e) => e.id), ["5"]);
  ctl.abort();
});
