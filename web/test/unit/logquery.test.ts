import { test } from "node:test";
import assert from "node:assert/strict";
import type { LogRecord } from "../../src/api";
import {
  bucketStart, filterValue, RecordList, searchParams, severityClass, sparkPath, templateParts, topHosts, withFilter,
} from "../../src/logquery";
import { formatHash, parseHash } from "../../src/route";

test("logs route round trips", () => {
  const h = "#/logs?q=host%3Acn01*+pattern%3A6&from=now-6h&to=now&live=1";
  const r = parseHash(h);
  assert.equal(r.view, "logs");
  assert.equal(r.params.get("q"), "host:cn01* pattern:6");
  assert.equal(formatHash(r), h);
});

test("withFilter replaces one filter and keeps the rest", () => {
  assert.equal(withFilter("", "pattern", "6"), "pattern:6");
  assert.equal(withFilter("host:cn01* timeout", "pattern", "6"), "host:cn01* timeout pattern:6");
  assert.equal(withFilter("pattern:3 app:sshd", "pattern", "6"), "app:sshd pattern:6");
  // Aliases of the same filter are replaced too; quoted text is left alone.
  assert.equal(withFilter('tag:slurmd "app:x y" sev:err', "app", "sshd"), '"app:x y" sev:err app:sshd');
  assert.equal(withFilter("level:info", "severity", "warning"), "severity:warning");
  assert.equal(withFilter('host:"a b" x', "host", "cn1"), "x host:cn1");
  assert.equal(withFilter("x", "host", "odd name"), 'x host:"odd name"');
  // null removes the filter.
  assert.equal(withFilter("sev:err disk full", "severity", null), "disk full");
  assert.equal(withFilter("", "severity", null), "");
});

test("filterValue reads a filter", () => {
  assert.equal(filterValue("app:sshd pattern:12 words", "pattern"), "12");
  assert.equal(filterValue('host:"a b"', "host"), "a b");
  assert.equal(filterValue('"pattern:12" text', "pattern"), null);
  assert.equal(filterValue("", "pattern"), null);
});

test("search parameters: relative range open at now, absolute range closed", () => {
  const now = Date.UTC(2026, 10, 22, 12, 0, 0);
  let p = searchParams(new URLSearchParams("q=+app:sshd+&from=now-15m&to=now"), now, 200);
  assert.equal(p.get("q"), "app:sshd");
  assert.equal(p.get("from"), "2026-11-22T11:45:00.000Z");
  assert.equal(p.get("to"), null);
  assert.equal(p.get("limit"), "200");
  assert.equal(p.get("cursor"), null);
  p = searchParams(new URLSearchParams(`from=${now - 7200e3}&to=${now - 3600e3}`), now, 50, "1234");
  assert.equal(p.get("q"), null);
  assert.equal(p.get("from"), "2026-11-22T10:00:00.000Z");
  assert.equal(p.get("to"), "2026-11-22T11:00:00.000Z");
  assert.equal(p.get("cursor"), "1234");
  // Default: the last hour.
  assert.equal(searchParams(new URLSearchParams(), now, 1).get("from"), "2026-11-22T11:00:00.000Z");
});

test("template wildcards are split out", () => {
  assert.deepEqual(templateParts("sshd: Accepted <*> from <*>"), [
    { text: "sshd: Accepted ", wild: false }, { text: "<*>", wild: true },
    { text: " from ", wild: false }, { text: "<*>", wild: true },
  ]);
  assert.deepEqual(templateParts("<*>"), [{ text: "<*>", wild: true }]);
  assert.deepEqual(templateParts("no wildcards"), [{ text: "no wildcards", wild: false }]);
});

test("series buckets and sparkline", () => {
  const s = { width_s: 60, end: 1000, counts: [1, 0, 4] };
  assert.equal(bucketStart(s, 2), 1000 * 60e3);
  assert.equal(bucketStart(s, 0), 998 * 60e3);
  assert.equal(sparkPath([0, 0], 10, 10), "");
  assert.equal(sparkPath([], 10, 10), "");
  // Two bars on a 30-wide, 8-high box: the largest fills the height, the
  // smallest is at least one pixel, the empty bucket draws nothing.
  assert.equal(sparkPath([1, 0, 4], 30, 8), "M0 8v-2h9.5v2zM20 8v-8h9.5v8z");
  assert.equal(sparkPath([1, 1000], 2, 10), "M0 10v-1h0.5v1zM1 10v-10h0.5v10z");
});

test("top hosts are busiest first, ties by name", () => {
  const hs = [{ host: "b", count: 2 }, { host: "c", count: 5 }, { host: "a", count: 2 }, { host: "d", count: 1 }];
  assert.deepEqual(topHosts(hs, 3).map((x) => x.host), ["c", "a", "b"]);
  assert.deepEqual(topHosts(null, 3), []);
  assert.equal(hs[0].host, "b", "input not reordered");
});

test("severity classes", () => {
  assert.deepEqual(["emerg", "err", "warning", "notice", "info", "debug", "weird"].map(severityClass),
    ["bad", "bad", "warn", "plain", "plain", "plain", "plain"]);
});

const rec = (seq: number): LogRecord => ({ seq, time: "", received: "", host: "h", severity: "info", facility: 1, pattern: 1, text: "t" + seq });

test("record list: pages append, live prepends, duplicates dropped, bound moves the cursor", () => {
  const l = new RecordList(5);
  assert.equal(l.newest(), null);
  assert.deepEqual(l.appendPage([rec(10), rec(9), rec(8)], "8").map((r) => r.seq), [10, 9, 8]);
  assert.equal(l.cursor, "8");
  // A reconnecting tail may resend; older or already shown seqs are ignored.
  let r = l.prepend([rec(10), rec(11), rec(12)]);
  assert.deepEqual(r.added.map((x) => x.seq), [12, 11]);
  assert.equal(r.dropped, 0);
  assert.deepEqual(l.records.map((x) => x.seq), [12, 11, 10, 9, 8]);
  assert.equal(l.newest(), 12);
  r = l.prepend([rec(13), rec(14)]);
  assert.equal(r.dropped, 2);
  assert.deepEqual(l.records.map((x) => x.seq), [14, 13, 12, 11, 10]);
  assert.equal(l.cursor, "10", "load more resumes below the last kept record");
  // The next page continues there without repeating.
  assert.deepEqual(l.appendPage([rec(9), rec(8)], undefined).map((x) => x.seq), [9, 8]);
  assert.equal(l.cursor, undefined);
  // Dropped records are forgotten, so a page may bring them back.
  const m = new RecordList(2);
  m.prepend([rec(1), rec(2), rec(3)]);
  assert.deepEqual(m.records.map((x) => x.seq), [3, 2]);
  assert.deepEqual(m.appendPage([rec(1)], undefined).map((x) => x.seq), [1]);
});

test("withFilter on arbitrary input: sets the value, idempotent, keeps other words", () => {
  // Deterministic pseudo-random queries built from the characters that
  // matter to the syntax.
  let seed = 12345;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
  const alphabet = ['"', ":", " ", "pattern", "host", "app", "tag", "x", "7", "*", "\t"];
  for (let i = 0; i < 2000; i++) {
    let q = "";
    for (let j = rnd(12); j > 0; j--) q += alphabet[rnd(alphabet.length)];
    const once = withFilter(q, "pattern", "6");
    assert.equal(filterValue(once, "pattern"), "6", `query ${JSON.stringify(q)} → ${JSON.stringify(once)}`);
    assert.equal(withFilter(once, "pattern", "6"), once, `idempotent on ${JSON.stringify(q)}`);
    assert.ok(once.endsWith("pattern:6"));
  }
});
