#!/usr/bin/env bash
# What `--amqp` adds to a storing server: N simulated nodes (default 2,000, 16 cores each) stream
# to `vigil server`, with and without `--amqp` to a private RabbitMQ (run as root, Debian's
# rabbitmq-server), rounds interleaved; prints the server's CPU (cores) over DUR seconds after
# WARM seconds, the messages a consumer got, and the bus's own counters. Usage:
#   bench/bus/server_cpu.sh [ROUNDS]    (env: NODES, DUR, WARM, VIGIL=bin/vigil, OLD=, REPLAY=)
# REPLAY=file.prom.gz (from `vigil record`) makes every node replay that recording, without
# jobs or health series, so that 20,000 nodes with a few values each fit next to the store on
# 2 cores. The consumer is bench/bus/consume (built here): messages a second, p50/p99/max of
# consume time − tick time, body bytes per value. Also printed: samples stored a second
# (vigil_ingest_samples_appended_total), metrics messages confirmed a second, and the CPU over
# DUR of the other processes sharing the cores (others_cores: simulator, broker, consumer).
# OLD=path/to/vigil adds rounds of that binary with --amqp (label amqp-old), interleaved, to
# compare two builds in one run. PROF=DIR runs the servers with --debug-pprof and saves a CPU
# profile of the measured DUR seconds and the allocations since start (DIR/LABEL-N.cpu,
# DIR/LABEL-N.allocs; `go tool pprof -top`); the profiler costs CPU too, so compare like with like.
set -euo pipefail
ROUNDS=${1:-2} NODES=${NODES:-2000} DUR=${DUR:-30} WARM=${WARM:-15}
VIGIL=$(realpath "${VIGIL:-bin/vigil}") OLD=${OLD:+$(realpath "$OLD")} PROF=${PROF:+$(realpath "$PROF")}
W=$(mktemp -d /tmp/vigil-busbench.XXXX)
pids=()
cleanup() {
  [ -n "${RMQ_ENV:-}" ] && env $RMQ_ENV timeout 30 /usr/lib/rabbitmq/bin/rabbitmqctl -n "$NODE" stop >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -n "${EPMD:-}" ] && kill "$EPMD" 2>/dev/null || true
  wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT
go build -o "$W/consume" ./bench/bus/consume
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
# metr URL REGEX: the sum of the matching samples on /metrics.
metr() { curl -s "$1/metrics" | awk -v re="$2" '$1 ~ re {s += $NF} END {printf "%.0f", s}'; }
tree() { local c; echo "$1"; for c in $(pgrep -P "$1" || true); do tree "$c"; done; }
cpu() { local s=0 a=0; for f in /proc/$1/task/*/schedstat; do read -r a _ < "$f" || true; s=$((s+a)); done; echo $s; }

# A private broker.
mkdir -p "$W/mq/mnesia" "$W/mq/log" "$W/mq/home"
printf 'disk_free_limit.absolute = 50MB\nloopback_users.guest = true\n' > "$W/mq/rabbitmq.conf"
echo '[].' > "$W/mq/enabled_plugins"; echo "BUSBENCH$$" > "$W/mq/home/.erlang.cookie"; chmod 400 "$W/mq/home/.erlang.cookie"
MQPORT=$(port) EPMDPORT=$(port) NODE="busbench$$@localhost"
RMQ_ENV="HOME=$W/mq/home RABBITMQ_NODENAME=$NODE RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT=$MQPORT
 RABBITMQ_DIST_PORT=$(port) RABBITMQ_MNESIA_BASE=$W/mq/mnesia RABBITMQ_LOG_BASE=$W/mq/log
 RABBITMQ_ENABLED_PLUGINS_FILE=$W/mq/enabled_plugins RABBITMQ_CONFIG_FILE=$W/mq/rabbitmq.conf ERL_EPMD_PORT=$EPMDPORT"
epmd -port "$EPMDPORT" -relaxed_command_check & EPMD=$!
env $RMQ_ENV /usr/lib/rabbitmq/bin/rabbitmq-server > "$W/mq/server.out" 2>&1 & pids+=($!)
for _ in $(seq 100); do env $RMQ_ENV /usr/lib/rabbitmq/bin/rabbitmqctl -n "$NODE" await_startup >/dev/null 2>&1 && break; sleep 0.5; done
URL="amqp://guest:guest@127.0.0.1:$MQPORT/"

n=0
one() { # $1: label; $2: binary; rest: extra server args
  local label=$1 bin=$2; shift 2; n=$((n+1))
  local http wire data; http=127.0.0.1:$(port); wire=127.0.0.1:$(port); data=$W/data-$label-$RANDOM
  "$bin" server --http "$http" --listen "$wire" --data "$data" --disable-rollups --log-level error ${PROF:+--debug-pprof} "$@" & local sp=$!
  sleep 2
  local tp=; : > "$W/consume.out"
  if [ $# -gt 0 ]; then "$W/consume" --amqp "$URL" --warm "${WARM}s" --dur "${DUR}s" > "$W/consume.out" 2>&1 & tp=$!; fi
  "$VIGIL" simulate --nodes "$NODES" --upstream "$wire" --log-level error --outages=false --health=false \
    ${REPLAY:+--replay "$REPLAY" --jobs=false} > /dev/null 2>&1 & local mp=$!
  local conf='^vigil_bus_confirmed[a-z_]*[{].*stream="metrics"' stored='^vigil_ingest_samples_appended_total'
  # The other processes on the same cores: simulator, broker (its process tree) and consumer.
  local others="$mp $(tree "${pids[0]}") $tp" o0=0 o1=0 p
  sleep "$WARM"; local a b s0 s1 c0 c1; a=$(cpu $sp); s0=$(metr "http://$http" "$stored"); c0=$(metr "http://$http" "$conf")
  for p in $others; do o0=$((o0 + $(cpu "$p"))); done
  local cp=; if [ -n "$PROF" ]; then mkdir -p "$PROF"; curl -s -o "$PROF/$label-$n.cpu" "http://$http/debug/pprof/profile?seconds=$DUR" & cp=$!; fi
  sleep "$DUR"; b=$(cpu $sp); s1=$(metr "http://$http" "$stored"); c1=$(metr "http://$http" "$conf")
  for p in $others; do o1=$((o1 + $(cpu "$p"))); done
  if [ -n "$cp" ]; then wait "$cp" || true; curl -s -o "$PROF/$label-$n.allocs" "http://$http/debug/pprof/allocs"; fi
  local bus=""
  [ $# -gt 0 ] && bus=$(curl -s "http://$http/metrics" | grep -E '^vigil_bus_(confirmed|dropped)[a-z_]*\{[^}]*stream="metrics"' | tr '\n' ' ')
  for _ in $(seq 50); do [ -z "$tp" ] || [ -s "$W/consume.out" ] && break; sleep 0.2; done
  echo "$label cores=$(python3 -c "print(round(($b-$a)/1e9/$DUR,3))") stored_per_s=$(( (s1-s0)/DUR ))" \
    "others_cores=$(python3 -c "print(round(($o1-$o0)/1e9/$DUR,3))")" \
    "${bus:+confirmed_per_s=$(( (c1-c0)/DUR )) $(cat "$W/consume.out") }$bus"
  kill $mp $sp ${tp:-} 2>/dev/null || true; wait $mp $sp ${tp:-} 2>/dev/null || true; rm -rf "$data"
}
for _ in $(seq "$ROUNDS"); do
  one plain "$VIGIL"; one amqp "$VIGIL" --amqp "$URL"
  if [ -n "$OLD" ]; then one amqp-old "$OLD" --amqp "$URL"; fi
done
