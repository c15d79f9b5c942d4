#!/usr/bin/env bash
# bench/scale/run.sh: one run of the scale model's simulation (docs/scale.md).
#
#   vigil simulate (one per tier-1 aggregator) -> T1 tier-1 aggregators
#     -> one tier-2 aggregator -> vigil server --remote-write -> VictoriaMetrics
#
# everything on loopback, private ports and a private temporary directory,
# stopped (by pid) when the script ends. After WARMUP seconds it measures a
# WINDOW: CPU of every process (/proc/PID/stat, all threads), RSS, values
# and wire bytes per second into each tier, samples the server stored and
# sent, and remote-write bytes per sample into VictoriaMetrics.
#
#   make build && bench/scale/run.sh                # 1,000 nodes, 4 tier-1
#   NODES=2000 T1=8 WINDOW=60 bench/scale/run.sh
#
# Settings (environment): NODES (1000), T1 (4), CPUS (16: about 321 values
# a node and tick), WARMUP (20 s), WINDOW (60 s), VIGIL (bin/vigil),
# VICTORIA_METRICS (/usr/bin/victoria-metrics), REMOTE_WRITE=0 runs the
# server without remote write (VictoriaMetrics then idles), MIN_SHARDS (1)
# and MAX_SHARDS (8) bound remote write's concurrent senders, KEEP=1 keeps
# the directory, DRAIN=1 stops the simulators after the window and waits
# until remote write has sent everything (backfill included).
set -euo pipefail

NODES=${NODES:-1000}
T1=${T1:-4}
CPUS=${CPUS:-16}
WARMUP=${WARMUP:-20}
WINDOW=${WINDOW:-60}
VIGIL=${VIGIL:-bin/vigil}
VICTORIA_METRICS=${VICTORIA_METRICS:-/usr/bin/victoria-metrics}

die() { echo "scale: $*" >&2; exit 1; }
[ -x "$VIGIL" ] || die "$VIGIL not found (make build)"
[ -x "$VICTORIA_METRICS" ] || die "$VICTORIA_METRICS not found (apt-get install victoria-metrics)"
[ "$NODES" -ge "$T1" ] && [ "$T1" -ge 1 ] || die "need NODES >= T1 >= 1"
[ "$WINDOW" -ge 5 ] && [ "$WINDOW" -le 600 ] || die "WINDOW must be 5..600 s"

dir=$(mktemp -d /tmp/vigil-scale.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ "${KEEP:-0}" = 1 ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric URL NAME [SELECTOR]: the sum of NAME's samples on URL/metrics
# whose line contains SELECTOR.
metric() {
	curl -sf --max-time 5 "$1/metrics" | awk -v n="$2" -v s="${3:-}" '
		(index($0, n "{") == 1 || index($0, n " ") == 1) && index($0, s) { v += $NF }
		END { printf "%.0f\n", v }'
}
hz=$(getconf CLK_TCK)
cpu() { awk -v hz="$hz" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"; }
rss_mib() { awk '/^VmRSS:/ { printf "%.0f\n", $2 / 1024 }' "/proc/$1/status"; }
wait_http() {
	for _ in $(seq 300); do curl -sf --max-time 1 "$1" >/dev/null && return 0; sleep 0.1; done
	die "$1 not ready after 30 s"
}

# VictoriaMetrics, single node.
vm_port=$(freeport)
vm="http://127.0.0.1:$vm_port"
"$VICTORIA_METRICS" -storageDataPath="$dir/vm" -httpListenAddr="127.0.0.1:$vm_port" -retentionPeriod=1 \
	-loggerLevel=ERROR >"$dir/vm.log" 2>&1 &
vm_pid=$!
pids+=("$vm_pid")
wait_http "$vm/health"

# The server, remote writing to it.
srv_http=$(freeport)
srv_wire=$(freeport)
srv="http://127.0.0.1:$srv_http"
if [ "${REMOTE_WRITE:-1}" = 1 ]; then
	cat >"$dir/server.toml" <<EOF
[server]
remote_write = [
  { url = "$vm/api/v1/write", name = "vm", max_samples_per_send = 10000, queue_capacity = 2000000, min_shards = ${MIN_SHARDS:-1}, max_shards = ${MAX_SHARDS:-8} },
]
EOF
else
	printf '[server]\n' >"$dir/server.toml"
fi
"$VIGIL" server --config "$dir/server.toml" --http "127.0.0.1:$srv_http" --listen "127.0.0.1:$srv_wire" \
	--data "$dir/server" --interval 1s --log-level warn >"$dir/server.log" 2>&1 &
srv_pid=$!
pids+=("$srv_pid")
wait_http "$srv/-/ready"

# Tier 2, then tier 1.
t2_wire=$(freeport)
t2_http=$(freeport)
"$VIGIL" aggregator --name t2 --listen "127.0.0.1:$t2_wire" --http "127.0.0.1:$t2_http" \
	--upstream "127.0.0.1:$srv_wire" --interval 1s --log-level warn >"$dir/t2.log" 2>&1 &
t2_pid=$!
pids+=("$t2_pid")
wait_http "http://127.0.0.1:$t2_http/metrics"
t1_pids=()
t1_https=()
sim_pids=()
per=$((NODES / T1))
for i in $(seq 0 $((T1 - 1))); do
	w=$(freeport)
	h=$(freeport)
	"$VIGIL" aggregator --name "t1-$i" --listen "127.0.0.1:$w" --http "127.0.0.1:$h" \
		--upstream "127.0.0.1:$t2_wire" --interval 1s --log-level warn >"$dir/t1-$i.log" 2>&1 &
	t1_pids+=($!)
	pids+=($!)
	t1_https+=("http://127.0.0.1:$h")
	wait_http "http://127.0.0.1:$h/metrics"
	n=$per
	[ "$i" -eq $((T1 - 1)) ] && n=$((NODES - per * (T1 - 1)))
	"$VIGIL" simulate --nodes "$n" --first $((i * per + 1)) --cpus "$CPUS" --upstream "127.0.0.1:$w" \
		--outages=false --log-level warn >"$dir/sim-$i.log" 2>&1 &
	sim_pids+=($!)
	pids+=($!)
done

echo "scale: $NODES nodes (cpus $CPUS) -> $T1 tier-1 -> 1 tier-2 -> server -> VictoriaMetrics; warm-up ${WARMUP}s, window ${WINDOW}s; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
sleep "$WARMUP"

# snapshot NAME: CPU seconds and counters at this instant.
declare -A s0 s1
snapshot() {
	local -n s=$1
	local x=0 p h
	for p in "${sim_pids[@]}"; do x=$(echo "$x + $(cpu "$p")" | bc); done
	s[sim_cpu]=$x
	x=0
	for p in "${t1_pids[@]}"; do x=$(echo "$x + $(cpu "$p")" | bc); done
	s[t1_cpu]=$x
	s[t1_vals]=0
	s[t1_bytes]=0
	for h in "${t1_https[@]}"; do
		s[t1_vals]=$((s[t1_vals] + $(metric "$h" vigil_aggregator_values_received_total)))
		s[t1_bytes]=$((s[t1_bytes] + $(metric "$h" vigil_aggregator_bytes_received_total)))
	done
	s[t2_cpu]=$(cpu "$t2_pid")
	s[t2_vals]=$(metric "http://127.0.0.1:$t2_http" vigil_aggregator_values_received_total)
	s[t2_bytes]=$(metric "http://127.0.0.1:$t2_http" vigil_aggregator_bytes_received_total)
	s[srv_bytes]=$(metric "http://127.0.0.1:$t2_http" vigil_aggregator_bytes_sent_total)
	s[srv_cpu]=$(cpu "$srv_pid")
	s[srv_vals]=$(metric "$srv" vigil_ingest_samples_appended_total)
	s[vm_cpu]=$(cpu "$vm_pid")
	s[vm_rows]=$(metric "$vm" vm_rows_inserted_total 'type="promremotewrite"')
	s[vm_bytes]=$(metric "$vm" vm_tcplistener_read_bytes_total 'name="http"')
	s[rw_dropped]=$(metric "$srv" vigil_remote_write_samples_dropped_total)
	s[t]=$(date +%s.%N)
}
snapshot s0
sleep "$WINDOW"
snapshot s1

dt=$(echo "${s1[t]} - ${s0[t]}" | bc)
rate() { echo "scale=0; (${s1[$1]} - ${s0[$1]}) / $dt" | bc; }
core() { echo "scale=3; (${s1[$1]} - ${s0[$1]}) / $dt" | bc; }
per_val() {
	local d=$((${s1[$2]} - ${s0[$2]}))
	if [ "$d" -gt 0 ]; then echo "scale=3; (${s1[$1]} - ${s0[$1]}) / $d" | bc; else echo -; fi
}
t1_rss=0
for p in "${t1_pids[@]}"; do t1_rss=$((t1_rss + $(rss_mib "$p"))); done
rw=$(curl -sf "$srv/api/v1/status/remote_write")
dropped=$(echo "$rw" | python3 -c '
import json, sys
ds = json.load(sys.stdin)["data"]["destinations"]
print(sum(d["samples_dropped_queue_full"] + d["samples_dropped_rejected"] + d["samples_dropped_shutdown"] for d in ds), sum(d["queue_length"] for d in ds), sum(d.get("shards", 1) for d in ds), sum(d.get("reshards", 0) for d in ds))')

printf '\n%-10s %10s %12s %14s %12s %10s\n' tier procs "CPU (cores)" "values/s in" "bytes/value" "RSS MiB"
printf '%-10s %10s %12s %14s %12s %10s\n' simulate "$T1" "$(core sim_cpu)" - - -
printf '%-10s %10s %12s %14s %12s %10s\n' tier-1 "$T1" "$(core t1_cpu)" "$(rate t1_vals)" "$(per_val t1_bytes t1_vals)" "$t1_rss"
printf '%-10s %10s %12s %14s %12s %10s\n' tier-2 1 "$(core t2_cpu)" "$(rate t2_vals)" "$(per_val t2_bytes t2_vals)" "$(rss_mib "$t2_pid")"
printf '%-10s %10s %12s %14s %12s %10s\n' server 1 "$(core srv_cpu)" "$(rate srv_vals)" "$(per_val srv_bytes srv_vals)" "$(rss_mib "$srv_pid")"
printf '%-10s %10s %12s %14s %12s %10s\n' vm 1 "$(core vm_cpu)" "$(rate vm_rows)" "$(per_val vm_bytes vm_rows)" "$(rss_mib "$vm_pid")"
echo "remote write: dropped in the window $((${s1[rw_dropped]} - ${s0[rw_dropped]}))"
echo "remote write: dropped samples $(echo "$dropped" | cut -d' ' -f1), queue length at the end $(echo "$dropped" | cut -d' ' -f2), shards at the end $(echo "$dropped" | cut -d' ' -f3) after $(echo "$dropped" | cut -d' ' -f4) reshards"
echo "server data directory: $(du -sm "$dir/server" | cut -f1) MiB, VictoriaMetrics: $(du -sm "$dir/vm" | cut -f1) MiB (after $(echo "$WARMUP + $WINDOW" | bc) s)"
echo "$rw" | python3 -c '
import json, sys
for d in json.load(sys.stdin)["data"]["destinations"]:
    if d.get("backfill"):
        print("remote write backfill: %d samples deferred to the store, %d read back, %d series behind at the end of the window" % (d["samples_deferred"], d["samples_backfilled"], d["backfill_series"]))'
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# DRAIN=1: stop the simulators and wait (at most 300 s) until every
# destination has sent everything: no sample queued and no series behind.
if [ "${DRAIN:-0}" = 1 ] && [ "${REMOTE_WRITE:-1}" = 1 ]; then
	for p in "${sim_pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	d0=$(date +%s.%N)
	for _ in $(seq 600); do
		left=$(curl -sf --max-time 5 "$srv/api/v1/status/remote_write" | python3 -c '
import json, sys
ds = json.load(sys.stdin)["data"]["destinations"]
print(sum(d["queue_length"] + d.get("backfill_series", 0) for d in ds))')
		[ "$left" = 0 ] && break
		sleep 0.5
	done
	sleep 2 # the server's own series keep coming; let one more batch go
	rw=$(curl -sf "$srv/api/v1/status/remote_write")
	echo "$rw" | python3 -c '
import json, sys
for d in json.load(sys.stdin)["data"]["destinations"]:
    print("drain: %s sent %d of %d enqueued; dropped %d (queue full) %d (rejected); deferred %d, read back %d, series behind %d" % (
        d["name"], d["samples_sent"], d["samples_enqueued"], d["samples_dropped_queue_full"], d["samples_dropped_rejected"],
        d.get("samples_deferred", 0), d.get("samples_backfilled", 0), d.get("backfill_series", 0)))'
	echo "drain: $(echo "$(date +%s.%N) - $d0" | bc | cut -c1-6) s after the simulators stopped; VictoriaMetrics rows inserted $(metric "$vm" vm_rows_inserted_total 'type="promremotewrite"')"
fi
