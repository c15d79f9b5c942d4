import { afterEach, mock, test } from "node:test";
import assert from "node:assert/strict";
import {
  ApiError, errorFrom, getJob, instantQuery, isAbort, jobReport, labelValues, listJobs, liveHeatmap, rangeQuery, request, searchLogs, tailLogs,
  treeStatus, type LogRecord, type StreamState,
} from "../../src/api";

type FetchFn = (url: string, init: RequestInit) => Promise<Response>;
const realFetch = globalThis.fetch;
let calls: { url: string; init: RequestInit }[] = [];

function mockFetch(fn: FetchFn): void {
  calls = [];
  globalThis.fetch = ((url: string, init: RequestInit) => {
    calls.push({ url, init });
    return fn(url, init);
  }) as typeof fetch;
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });
}

// hang answers only when the request is aborted, as a stalled server.
const hang: FetchFn = (_url, init) =>
  new Promise((_resolve, reject) => {
    init.signal!.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
  });

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  assert.fail("resolved, want a rejection");
}

afterEach(() => {
  globalThis.fetch = realFetch;
  mock.timers.reset();
});

test("instant query: POST form, same-origin credentials, data of the envelope", async () => {
  mockFetch(async () => json(200, { status: "success", data: { resultType: "vector", result: [{ metric: { node: "a" }, value: [1, "2"] }] } }));
  const d = await instantQuery("up", 1_700_000_000_500);
  assert.equal(d.resultType, "vector");
  assert.equal(calls.length, 1);
  const { url, init } = calls[0];
  assert.equal(url, "api/v1/query");
  assert.equal(init.method, "POST");
  assert.equal(init.credentials, "same-origin");
  assert.equal((init.headers as Record<string, string>)["Content-Type"], "application/x-www-form-urlencoded");
  assert.equal(String(init.body), "query=up&time=1700000000.5");
});

test("Prometheus error shape: status, errorType and error", async () => {
  mockFetch(async () => json(400, { status: "error", errorType: "bad_data", error: 'invalid parameter "query": 1:5: parse error: unclosed left parenthesis' }));
  const e = await rejection(rangeQuery("sum(", 0, 60e3, 15));
  assert.ok(e instanceof ApiError);
  assert.equal(e.status, 400);
  assert.equal(e.errorType, "bad_data");
  assert.equal(e.reason, 'invalid parameter "query": 1:5: parse error: unclosed left parenthesis');
  assert.equal(e.message, "query_range: " + e.reason);
  assert.equal(e.unavailable, false);
  assert.equal(isAbort(e), false);
});

test("log API error shape and the unavailable stand-in", async () => {
  mockFetch(async () => json(400, { error: 'q: unknown filter "colour"' }));
  let e = await rejection(searchLogs(new URLSearchParams({ q: "colour:red" })));
  assert.ok(e instanceof ApiError);
  assert.deepEqual([e.status, e.errorType, e.reason, e.message], [400, "", 'q: unknown filter "colour"', 'search: q: unknown filter "colour"']);
  assert.equal(calls[0].url, "api/v1/logs/search?q=colour%3Ared");
  assert.equal(calls[0].init.method, "GET");
  assert.equal(calls[0].init.credentials, "same-origin");

  mockFetch(async () => json(404, { status: "error", errorType: "unavailable", error: "log intake is off" }));
  e = await rejection(searchLogs(new URLSearchParams()));
  assert.ok(e instanceof ApiError && e.unavailable);
  assert.equal(e.reason, "log intake is off");
});

test("error answers that are not JSON: status and the start of the text", () => {
  assert.equal(errorFrom("query", 401, "Unauthorized\n").reason, "HTTP 401: Unauthorized");
  assert.equal(errorFrom("query", 502, "").reason, "HTTP 502");
  assert.equal(errorFrom("query", 502, null).reason, "HTTP 502");
  assert.equal(errorFrom("query", 500, { status: "error" }).reason, "HTTP 500");
  const long = errorFrom("query", 503, "x".repeat(1000) + "\nsecond line");
  assert.equal(long.reason, "HTTP 503: " + "x".repeat(200) + "…");
});

test("a success that is not JSON, or not a Prometheus envelope, is a bad answer", async () => {
  mockFetch(async () => new Response("<html>login</html>", { status: 200 }));
  let e = await rejection(instantQuery("up"));
  assert.ok(e instanceof ApiError);
  assert.deepEqual([e.errorType, e.reason], ["bad_answer", "HTTP 200, not JSON"]);
  mockFetch(async () => json(200, { tree: null }));
  e = await rejection(instantQuery("up"));
  assert.ok(e instanceof ApiError && e.errorType === "bad_answer");
  mockFetch(async () => json(200, { status: "success", data: { resultType: "vector", result: [] } }));
  e = await rejection(rangeQuery("up", 0, 1, 1));
  assert.ok(e instanceof ApiError && /want matrix/.test(e.reason));
});

test("timeout: a server that does not answer fails with a timeout error", async () => {
  mockFetch(hang);
  const t0 = Date.now();
  const e = await rejection(instantQuery("up", undefined, { timeoutMs: 30 }));
  assert.ok(e instanceof ApiError, String(e));
  assert.deepEqual([e.status, e.errorType, e.reason], [0, "timeout", "no answer within 0.03 s"]);
  assert.ok(Date.now() - t0 < 5000);
  assert.equal(calls[0].init.signal!.aborted, true, "the request is aborted, not left running");
});

test("timeout covers the body: a stalled answer fails too", async () => {
  mockFetch(async (_url, init) => {
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"status":"succ'));
        init.signal!.addEventListener("abort", () => c.error(new DOMException("aborted", "AbortError")));
      },
    });
    return new Response(body, { status: 200 });
  });
  const e = await rejection(instantQuery("up", undefined, { timeoutMs: 30 }));
  assert.ok(e instanceof ApiError && e.errorType === "timeout", String(e));
});

test("abort: the caller's signal ends the request as an AbortError", async () => {
  mockFetch(hang);
  const ctl = new AbortController();
  const p = instantQuery("up", undefined, { signal: ctl.signal });
  ctl.abort();
  const e = await rejection(p);
  assert.ok(isAbort(e) && !(e instanceof ApiError), String(e));
  assert.equal(calls[0].init.signal!.aborted, true);
  // Already aborted: nothing is sent.
  const e2 = await rejection(instantQuery("up", undefined, { signal: ctl.signal }));
  assert.ok(isAbort(e2));
  assert.equal(calls.length, 1);
});

test("unreachable server", async () => {
  mockFetch(async () => {
    throw new TypeError("fetch failed");
  });
  const e = await rejection(treeStatus());
  assert.ok(e instanceof ApiError);
  assert.deepEqual([e.endpoint, e.status, e.errorType, e.message], ["tree", 0, "unreachable", "tree: server unreachable"]);
});

test("an answer cut off midway", async () => {
  mockFetch(async () =>
    new Response(new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new TextEncoder().encode('{"status":'));
        c.error(new TypeError("network error"));
      },
    }), { status: 200 }));
  const e = await rejection(instantQuery("up"));
  assert.ok(e instanceof ApiError);
  assert.deepEqual([e.status, e.errorType, e.reason], [0, "unreachable", "answer cut off"]);
});

test("size cap: by Content-Length and while reading", async () => {
  let pulled = 0;
  mockFetch(async () =>
    new Response(new ReadableStream<Uint8Array>({
      pull(c) {
        pulled++;
        c.enqueue(new Uint8Array(1024).fill(32));
      },
    }), { status: 200 }));
  let e = await rejection(request("query", "api/v1/query", {}, { maxBytes: 10_000 }));
  assert.ok(e instanceof ApiError && e.errorType === "too_large", String(e));
  assert.ok(pulled <= 12, `read ${pulled} KiB of an endless answer`);

  mockFetch(async () => new Response("{}", { status: 200, headers: { "Content-Length": String(100 << 20) } }));
  e = await rejection(request("query", "api/v1/query", {}, { maxBytes: 64 << 20 }));
  assert.ok(e instanceof ApiError && e.errorType === "too_large");
  assert.match(e.reason, /larger than 64 MiB/);
});

test("label values: GET with the name escaped and matchers", async () => {
  mockFetch(async () => json(200, { status: "success", data: ["cn1", "cn2"] }));
  assert.deepEqual(await labelValues("node", ['up{job="x"}']), ["cn1", "cn2"]);
  assert.equal(calls[0].init.method, "GET");
  assert.equal(calls[0].url, "api/v1/label/node/values?match%5B%5D=up%7Bjob%3D%22x%22%7D");
});

test("tree: the tree of the answer, null when there is none", async () => {
  mockFetch(async () => json(200, { tree: { name: "agg" } }));
  assert.deepEqual(await treeStatus(), { name: "agg" });
  mockFetch(async () => json(200, { tree: null }));
  assert.equal(await treeStatus(), null);
  mockFetch(async () => json(500, { error: "aggregator tree: boom" }));
  assert.equal((await rejection(treeStatus())).message, "tree: aggregator tree: boom");
});

// FakeEventSource stands in for the browser's EventSource.
class FakeEventSource extends EventTarget {
  static all: FakeEventSource[] = [];
  closed = false;
  constructor(readonly url: string) {
    super();
    FakeEventSource.all.push(this);
  }
  close(): void {
    this.closed = true;
  }
  emit(type: string, data?: string): void {
    this.dispatchEvent(data === undefined ? new Event(type) : new MessageEvent(type, { data }));
  }
}

function withFakeEventSource(): () => FakeEventSource {
  FakeEventSource.all = [];
  (globalThis as unknown as { EventSource: unknown }).EventSource = FakeEventSource;
  return () => FakeEventSource.all[FakeEventSource.all.length - 1];
}

const rec = (seq: number) => JSON.stringify({ seq, time: "", received: "", host: "h", severity: "info", facility: 1, pattern: 0, text: "x" });

test("log tail: reconnects with a growing wait, resuming after the newest record", () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  const last = withFakeEventSource();
  const ctl = new AbortController();
  const got: number[] = [];
  const states: StreamState[] = [];
  let newest: number | null = null;
  tailLogs(" app:sshd ", () => newest, {
    record: (r: LogRecord) => {
      got.push(r.seq);
      newest = r.seq;
    },
    state: (s) => states.push(s),
  }, ctl.signal);
  assert.equal(last().url, "api/v1/logs/tail?q=app%3Asshd");
  last().emit("open");
  last().emit("message", rec(7));
  last().emit("message", "not json");
  last().emit("message", rec(8));
  assert.deepEqual(got, [7, 8]);

  // A dropped connection: closed, reopened after 2 s with after=8.
  const first = last();
  first.emit("error");
  assert.ok(first.closed);
  assert.equal(FakeEventSource.all.length, 1);
  mock.timers.tick(1999);
  assert.equal(FakeEventSource.all.length, 1);
  mock.timers.tick(1);
  assert.equal(FakeEventSource.all.length, 2);
  assert.equal(last().url, "api/v1/logs/tail?q=app%3Asshd&after=8");
  // Events of the old connection are ignored.
  first.emit("message", rec(99));
  assert.deepEqual(got, [7, 8]);
  // A refused reconnect doubles the wait; a successful one resets it.
  last().emit("error");
  mock.timers.tick(3999);
  assert.equal(FakeEventSource.all.length, 2);
  mock.timers.tick(1);
  assert.equal(FakeEventSource.all.length, 3);
  last().emit("open");
  last().emit("error");
  mock.timers.tick(2000);
  assert.equal(FakeEventSource.all.length, 4);
  assert.deepEqual(states, ["connecting", "live", "reconnecting", "reconnecting", "live", "reconnecting"]);

  // Leaving the view closes the stream and stops reconnecting.
  last().emit("error");
  ctl.abort();
  mock.timers.tick(60_000);
  assert.equal(FakeEventSource.all.length, 4);
  assert.ok(FakeEventSource.all.every((es) => es.closed));
});

test("log tail: the server's error event ends it without reconnecting", () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  const last = withFakeEventSource();
  let stopped = "";
  const states: StreamState[] = [];
  tailLogs("", () => null, { record: () => {}, state: (s) => states.push(s), stopped: (m) => (stopped = m) }, new AbortController().signal);
  assert.equal(last().url, "api/v1/logs/tail");
  last().emit("error", '"log store closed"');
  assert.equal(stopped, "log store closed");
  assert.ok(last().closed);
  mock.timers.tick(60_000);
  assert.equal(FakeEventSource.all.length, 1);
  assert.deepEqual(states, ["connecting", "closed"]);
});

test("live heatmap: a bad expression closes the stream for good", () => {
  mock.timers.enable({ apis: ["setTimeout"] });
  const last = withFakeEventSource();
  const errors: [string, boolean][] = [];
  const states: StreamState[] = [];
  const nodes: string[][] = [];
  liveHeatmap("rate(x", {
    nodes: (n) => nodes.push(n.map((x) => x.name)),
    frame: () => {},
    error: (m, f) => errors.push([m, f]),
    state: (s) => states.push(s),
  }, new AbortController().signal);
  assert.equal(last().url, "api/web/live?expr=rate(x");
  last().emit("open");
  last().emit("nodes", '{"nodes":[{"name":"cn1"}]}');
  assert.deepEqual(nodes, [["cn1"]]);
  last().emit("queryerror", '{"error":"slow","fatal":false}');
  assert.equal(last().closed, false);
  last().emit("queryerror", '{"error":"bad query: parse error","fatal":true}');
  assert.ok(last().closed);
  assert.deepEqual(errors, [["slow", false], ["bad query: parse error", true]]);
  assert.deepEqual(states, ["connecting", "live", "closed"]);
  mock.timers.tick(60_000);
  assert.equal(FakeEventSource.all.length, 1);
});

test("job index: GET with the filters, the envelope's list, ids escaped in paths", async () => {
  mockFetch(async () => json(200, { status: "success", data: [{ id: "7_1", state: "running" }] }));
  const l = await listJobs(new URLSearchParams({ user: "o'brien", node: "cn1", since: "24h" }));
  assert.deepEqual(l.map((j) => j.id), ["7_1"]);
  assert.equal(calls[0].url, "api/v1/jobs?user=o%27brien&node=cn1&since=24h");
  assert.equal(calls[0].init.method, "GET");
  mockFetch(async () => json(200, { status: "success", data: null }));
  assert.deepEqual(await listJobs(new URLSearchParams()), []);
  mockFetch(async () => json(200, { status: "success", data: { id: "1" } }));
  const bad = await rejection(listJobs(new URLSearchParams()));
  assert.ok(bad instanceof ApiError && bad.errorType === "bad_answer");
  mockFetch(async () => json(200, { status: "success", data: { job: { id: "a/b", state: "ended" }, summary: null, series: {} } }));
  const r = await jobReport("a/b");
  assert.equal(r.job.id, "a/b");
  assert.equal(calls[0].url, "api/v1/jobs/a%2Fb/report");
});

test("an unknown job is a 404 not_found ApiError", async () => {
  mockFetch(async () => json(404, { status: "error", errorType: "not_found", error: 'job "9" not found' }));
  const e = await rejection(getJob("9"));
  assert.ok(e instanceof ApiError);
  assert.equal(e.status, 404);
  assert.equal(e.errorType, "not_found");
  assert.equal(e.message, 'job 9: job "9" not found');
});
