import { test } from "node:test";
import assert from "node:assert/strict";
import { counterHint } from "../../src/promhint";

test("a bare counter is offered as a rate", () => {
  assert.equal(counterHint("node_cpu_seconds_total"), "rate(node_cpu_seconds_total[5m])");
  assert.equal(counterHint(' node_network_receive_bytes_total{device!="lo"} '), 'rate(node_network_receive_bytes_total{device!="lo"}[5m])');
  assert.equal(counterHint("http_request_duration_seconds_bucket", "1m"), "rate(http_request_duration_seconds_bucket[1m])");
});

test("rate of an instant vector gets its range", () => {
  assert.equal(counterHint("rate(node_cpu_seconds_total)"), "rate(node_cpu_seconds_total[5m])");
  assert.equal(counterHint('increase(node_disk_read_bytes_total{device="sda"})'), 'increase(node_disk_read_bytes_total{device="sda"}[5m])');
});

test("gauges and finished queries get no hint", () => {
  for (const q of ["node_load1", "rate(node_cpu_seconds_total[1m])", "sum(node_cpu_seconds_total)", "up{node=\"cn1\"}", ""]) {
    assert.equal(counterHint(q), null, q);
  }
});

test("a range selector is recognised, and a counter's gets rate()", async () => {
  const { isRangeSelector, rangeHint } = await import("../../src/promhint");
  assert.ok(isRangeSelector("node_cpu_seconds_total[1m]"));
  assert.ok(isRangeSelector('node_load1{node="cn1"}[5m]'));
  assert.ok(!isRangeSelector("rate(node_cpu_seconds_total[1m])"));
  assert.ok(!isRangeSelector("node_load1"));
  assert.equal(rangeHint("node_cpu_seconds_total[1m]"), "rate(node_cpu_seconds_total[1m])");
  assert.equal(rangeHint("node_load1[1m]"), null);
});
