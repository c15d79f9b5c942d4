#!/usr/bin/env bash
# server + sampler (appio only) on loopback, then latency.py under the library.
set -euo pipefail
W=$(cd "$(dirname "$0")/../.." && pwd)
D=$(mktemp -d)
read P1 P2 < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
cat > $D/sampler.toml <<EOT
[plugins.appio]
socket = "$D/appio.sock"
EOT
$W/bin/vigil server --data $D/data --http 127.0.0.1:$P1 --listen 127.0.0.1:$P2 --log-level warn > $D/server.log 2>&1 &
SP=$!
sleep 2
$W/bin/vigil sampler --config $D/sampler.toml --plugins appio --upstream 127.0.0.1:$P2 --listen none --node lat --log-level warn > $D/sampler.log 2>&1 &
SA=$!
sleep 2
LD_PRELOAD=$W/bin/libvigilio.so VIGIL_APPIO_SOCKET=$D/appio.sock SLURM_JOB_ID=4711 \
  timeout 120 python3 $W/libvigilio/bench/latency.py http://127.0.0.1:$P1 $D/out ${N:-20} || { echo FAILED; tail -5 $D/*.log; }
kill $SA $SP; wait $SA $SP 2>/dev/null || true
rm -rf $D
