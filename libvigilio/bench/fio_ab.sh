#!/usr/bin/env bash
# fio psync 64 KiB sequential writes to /dev/shm, pairs alternating without and with the library.
# Prints per pair: bandwidth base, vigil (KB/s), their ratio; with CPU=1 instead the CPU seconds
# (user + system, fio and its job process) base, vigil and vigil / base.
W=$(cd "$(dirname "$0")/../.." && pwd); F=/dev/shm/vigilio_fio.x; N=${N:-7}
run() {
  if [ -n "${CPU:-}" ]; then
    env $1 /usr/bin/time -f "%U %S" fio --name=w --ioengine=psync --rw=write --bs=64k --size=2g --loops=${LOOPS:-1} \
      --filename=$F --output=/dev/null 2>&1 >/dev/null | tail -1 | awk '{print $1 + $2}'
    return
  fi
  env $1 fio --name=w --ioengine=psync --rw=write --bs=64k --size=2g --loops=${LOOPS:-1} --filename=$F \
  --output-format=terse --terse-version=3 | awk -F';' '{print $48}'
}
run "" > /dev/null   # lay the file out once
for i in $(seq $N); do
  if [ $((i % 2)) = 1 ]; then b=$(run ""); v=$(run "LD_PRELOAD=$W/bin/libvigilio.so VIGIL_APPIO_SOCKET=/nonexistent");
  else v=$(run "LD_PRELOAD=$W/bin/libvigilio.so VIGIL_APPIO_SOCKET=/nonexistent"); b=$(run ""); fi
  echo "$b $v $(echo "$v / $b" | bc -l)"
done
rm -f $F
