#!/usr/bin/env bash
# What `--amqp` adds to a storing server: N simulated nodes (default 2,000, 16 cores each) stream
# to `vigil server`, with and without `--amqp` to a private RabbitMQ (run as root, Debian's
# rabbitmq-server), rounds interleaved; prints the server's CPU (cores) over DUR seconds after
# WARM seconds, the messages a consumer got, and the bus's own counters. Usage:
#   bench/bus/server_cpu.sh [ROUNDS]    (env: NODES, DUR, WARM, VIGIL=bin/vigil, OLD=)
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
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
cpu() { local s=0 a; for f in /proc/$1/task/*/schedstat; do read -r a _ < "$f" || true; s=$((s+a)); done; echo $s; }

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
  local tp=; : > "$W/tail.out"
  if [ $# -gt 0 ]; then "$VIGIL" bus tail --amqp "$URL" --bind 'metrics.#' > "$W/tail.out" 2>/dev/null & tp=$!; fi
  "$VIGIL" simulate --nodes "$NODES" --upstream "$wire" --log-level error --outages=false --health=false > /dev/null 2>&1 & local mp=$!
  sleep "$WARM"; local a b m0 m1; a=$(cpu $sp); m0=$(wc -l < "$W/tail.out" 2>/dev/null || echo 0)
  local cp=; if [ -n "$PROF" ]; then mkdir -p "$PROF"; curl -s -o "$PROF/$label-$n.cpu" "http://$http/debug/pprof/profile?seconds=$DUR" & cp=$!; fi
  sleep "$DUR"; b=$(cpu $sp); m1=$(wc -l < "$W/tail.out" 2>/dev/null || echo 0)
  if [ -n "$cp" ]; then wait "$cp" || true; curl -s -o "$PROF/$label-$n.allocs" "http://$http/debug/pprof/allocs"; fi
  local bus=""
  [ $# -gt 0 ] && bus=$(curl -s "http://$http/metrics" | grep -E '^vigil_bus_(confirmed|dropped)[a-z_]*\{[^}]*stream="metrics"' | tr '\n' ' ')
  echo "$label cores=$(python3 -c "print(round(($b-$a)/1e9/$DUR,3))") consumed_per_s=$(( (m1-m0)/DUR )) $bus"
  kill $mp $sp ${tp:-} 2>/dev/null || true; wait $mp $sp ${tp:-} 2>/dev/null || true; rm -rf "$data"
}
for _ in $(seq "$ROUNDS"); do
  one plain "$VIGIL"; one amqp "$VIGIL" --amqp "$URL"
  if [ -n "$OLD" ]; then one amqp-old "$OLD" --amqp "$URL"; fi
done
