#!/usr/bin/env bash
# fio psync 64 KiB sequential writes to /dev/shm, pairs alternating without and with the library.
W=$(cd "$(dirname "$0")/../.." && pwd); F=/dev/shm/vigilio_fio.x; N=${N:-7}
run() { env $1 fio --name=w --ioengine=psync --rw=write --bs=64k --size=2g --filename=$F \
  --output-format=terse --terse-version=3 | awk -F';' '{print $48}'; }
run "" > /dev/null   # lay the file out once
for i in $(seq $N); do
  if [ $((i % 2)) = 1 ]; then b=$(run ""); v=$(run "LD_PRELOAD=$W/bin/libvigilio.so VIGIL_APPIO_SOCKET=/nonexistent");
  else v=$(run "LD_PRELOAD=$W/bin/libvigilio.so VIGIL_APPIO_SOCKET=/nonexistent"); b=$(run ""); fi
  echo "$b $v $(echo "$v / $b" | bc -l)"
done
rm -f $F
