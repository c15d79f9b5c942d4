#!/usr/bin/env bash
# RSS and Private_Dirty (kB, /proc/PID/smaps_rollup) of a process without and with the library.
W=$(cd "$(dirname "$0")/../.." && pwd); D=$(mktemp -d /dev/shm/viomem.XXXX)
python3 -c '
import socket, sys, threading
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.bind(sys.argv[1]); s.listen(64)
def drain(c):
    while c.recv(65536): pass
while True:
    c, _ = s.accept(); threading.Thread(target=drain, args=(c,), daemon=True).start()
' $D/sink.sock & SINK=$!
SOCK=${SOCK:-none.sock}
gcc -O2 -pthread -o $D/progs $W/libvigilio/tests/testdata/progs.c
measure() { # label cmd...
  for pre in "" "LD_PRELOAD=$W/bin/libvigilio.so"; do
    env $pre VIGIL_APPIO_SOCKET=$D/$SOCK "$@" > /dev/null & pid=$!
    sleep 2
    r=$(awk '/^Rss:/{r=$2} /^Private_Dirty:/{p=$2} END{print r, p}' /proc/$pid/smaps_rollup)
    kill $pid; wait $pid 2>/dev/null
    echo "$label $SOCK ${pre:+vigil}${pre:-base} rss_kB,private_dirty_kB: $r"
  done
}
label=spin measure $D/progs spin $D/spin
cat > $D/many.py <<'EOT'
import os, sys, threading, time
d, nfiles, nthreads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def work(t):
    for i in range(nfiles):
        fd = os.open(f"{d}/t{t}f{i}", os.O_WRONLY | os.O_CREAT, 0o644); os.write(fd, b"x"); os.close(fd)
ts = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
[t.start() for t in ts]; [t.join() for t in ts]
time.sleep(60)
EOT
label=py-1file-1thread measure python3 $D/many.py $D 1 1
label=py-5000files-1thread measure python3 $D/many.py $D 5000 1
label=py-100files-8threads measure python3 $D/many.py $D 100 8
kill $SINK; rm -rf $D
