import { test } from "node:test";
import assert from "node:assert/strict";
import type { Job } from "../../src/api";
import { formatHash, parseHash } from "../../src/route";
import {
  apiParams, bandColumns, efficiency, formatDuration, formatEfficiency, hasSeries, jobsParams, matches, parseJobsQuery, quantile, runTime, sortJobs,
} from "../../src/jobs";

const sum = (cpu: number, mem: number) => ({ cpu_efficiency: cpu, mem_used_peak_bytes: 1, mem_efficiency: mem, read_bytes: 0, write_bytes: 0, nodes: [] });
const jobs: Job[] = [
  { id: "5", user: "dave", partition: "cpu", state: "pending" },
  { id: "4", user: "alice", partition: "cpu", state: "running", mem_bytes: 8 },
  { id: "3", user: "carol", partition: "debug", state: "failed", summary: sum(0.12, 0) },
  { id: "2", user: "bob", partition: "gpu", state: "completed", mem_bytes: 8, summary: sum(0.71, 0.06) },
  { id: "1", user: "alice", partition: "cpu", state: "completed", mem_bytes: 8, summary: sum(0.92, 0.55) },
];
const ids = (js: Job[]) => js.map((j) => j.id);

test("jobs URL round trip keeps the filters and the sort", () => {
  const h = "#/jobs?user=alice&state=completed&partition=cpu&since=7d&sort=-mem";
  const r = parseHash(h);
  assert.equal(r.view, "jobs");
  const q = parseJobsQuery(r.params);
  assert.deepEqual(q, { user: "alice", state: "completed", partition: "cpu", since: "7d", sort: "-mem" });
  assert.equal(formatHash({ view: "jobs", params: jobsParams(q) }), h);
  // Odd user names survive the trip.
  const odd = parseJobsQuery(jobsParams({ ...q, user: "o'brien & co=1" }));
  assert.equal(odd.user, "o'brien & co=1");
});

test("unknown states, sorts and durations are dropped; fields are bounded", () => {
  const q = parseJobsQuery(new URLSearchParams({ state: "exploded", sort: "name", since: "yesterday", user: "x".repeat(5000) }));
  assert.equal(q.state, "");
  assert.equal(q.sort, "");
  assert.equal(q.since, "");
  assert.equal(q.user.length, 200);
  assert.equal(jobsParams(q).has("state"), false);
});

test("job page route carries the id, array ids included", () => {
  const r = parseHash("#/job/1234_7");
  assert.equal(r.view, "job");
  assert.equal(r.job, "1234_7");
  assert.equal(formatHash(r), "#/job/1234_7");
  assert.equal(parseHash("#/job").view, "jobs");
  assert.equal(parseHash("#/job/a%2Fb").job, "a/b");
});

test("api params leave the sort out and bound the count", () => {
  const p = apiParams(parseJobsQuery(new URLSearchParams("user=bob&sort=cpu")));
  assert.equal(p.toString(), "user=bob&limit=500");
});

test("filters are checked again on the answer", () => {
  const q = parseJobsQuery(new URLSearchParams("user=alice&state=completed"));
  assert.deepEqual(ids(jobs.filter((j) => matches(j, q))), ["1"]);
  assert.deepEqual(ids(jobs.filter((j) => matches(j, parseJobsQuery(new URLSearchParams("partition=cpu"))))), ["5", "4", "1"]);
});

test("efficiency is unknown without a summary or memory asked", () => {
  assert.equal(efficiency(jobs[0], "cpu"), null);
  assert.equal(efficiency(jobs[2], "cpu"), 0.12);
  assert.equal(efficiency(jobs[2], "mem"), null); // no mem_bytes, 0
  assert.equal(efficiency(jobs[3], "mem"), 0.06);
  assert.equal(formatEfficiency(null), "—");
  assert.equal(formatEfficiency(0.71), "71%");
});

test("sorting by efficiency puts unknowns last in both directions, ties keep order", () => {
  assert.deepEqual(ids(sortJobs(jobs, "")), ["5", "4", "3", "2", "1"]);
  assert.deepEqual(ids(sortJobs(jobs, "cpu")), ["3", "2", "1", "5", "4"]);
  assert.deepEqual(ids(sortJobs(jobs, "-cpu")), ["1", "2", "3", "5", "4"]);
  assert.deepEqual(ids(sortJobs(jobs, "mem")), ["2", "1", "5", "4", "3"]);
  assert.deepEqual(ids(sortJobs(jobs, "-mem")), ["1", "2", "5", "4", "3"]);
  const tie = [{ ...jobs[1], id: "a", summary: sum(0.5, 0.5) }, { ...jobs[1], id: "b", summary: sum(0.5, 0.5) }];
  assert.deepEqual(ids(sortJobs(tie, "-cpu")), ["a", "b"]);
  assert.deepEqual(ids(jobs), ["5", "4", "3", "2", "1"], "input left alone");
});

test("run time and limit", () => {
  const t0 = Date.parse("2026-01-01T00:00:00Z");
  const j: Job = { id: "1", state: "completed", start: "2026-01-01T00:00:00Z", end: "2026-01-01T01:05:00Z", time_limit: 7200 };
  assert.equal(runTime(j, t0 + 1e9), "1h 05m / 2h 00m");
  assert.equal(runTime({ ...j, end: undefined }, t0 + 90_000), "1m 30s / 2h 00m");
  assert.equal(runTime({ ...j, start: "0001-01-01T00:00:00Z", end: undefined }, t0), "not started / 2h 00m");
  assert.equal(formatDuration(3 * 86400 + 7200), "3d 2h");
  assert.equal(formatDuration(-1), "—");
});

test("quantile interpolates between ranks", () => {
  assert.equal(quantile([1, 2, 3, 4, 5], 0.5), 3);
  assert.equal(quantile([0, 10], 0.1), 1);
  assert.ok(Number.isNaN(quantile([], 0.5)));
});

test("band columns: server band, node lines aligned, stragglers first", () => {
  const b = bandColumns({
    median: [[10, 2], [20, 3]], p10: [[10, 1], [20, "2"]], p90: [[10, 3], [20, 4]],
    nodes: { cn2: [[10, 2], [20, 3]], cn10: [[20, 5]], cn1: [[10, 1]] },
  }, new Set(["cn10"]))!;
  assert.deepEqual(b.nodes, ["cn10", "cn1", "cn2"]);
  assert.equal(b.computed, false);
  assert.deepEqual(b.data, [[10, 20], [3, 4], [2, 3], [1, 2], [null, 5], [1, null], [2, 3]]);
});

test("band columns computed from node lines when the server sent none", () => {
  const nodes: Record<string, [number, number][]> = {};
  for (let i = 0; i < 11; i++) nodes["n" + i] = [[100, i]];
  const b = bandColumns({ nodes })!;
  assert.equal(b.computed, true);
  assert.deepEqual(b.data.slice(1, 4), [[9], [5], [1]]);
});

test("band columns cap node lines and ignore junk", () => {
  const nodes: Record<string, [number, number | string | null][]> = {};
  for (let i = 0; i < 200; i++) nodes["cn" + i] = [[1, i], [2, "NaN"], [3, null]];
  const b = bandColumns({ median: [[1, 1]], nodes: nodes as never, p10: "junk" as never }, new Set(["cn199"]))!;
  assert.equal(b.nodes.length, 64);
  assert.equal(b.nodes[0], "cn199");
  assert.deepEqual(b.data[0], [1, 2, 3]);
  assert.deepEqual(b.data[3], [null, null, null]); // p10 junk
  assert.deepEqual(b.data[4], [199, null, null]);
  assert.equal(bandColumns(null), null);
  assert.equal(bandColumns({}), null);
});

test("a report without series is the summary-only case", () => {
  assert.equal(hasSeries({}), false);
  assert.equal(hasSeries(null), false);
  assert.equal(hasSeries({ cpu: { median: [], nodes: {} } }), false);
  assert.equal(hasSeries({ write: { median: [[1, 2]] } }), true);
});
