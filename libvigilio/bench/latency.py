#!/usr/bin/env python3
"""Time from the end of an interval to its application I/O being queryable.

Run under LD_PRELOAD=bin/libvigilio.so with a sampler (appio plugin) that
streams to a server: latency.py URL FILE N. Each round writes 1 KiB to FILE in
the middle of a 1 s interval, then polls the server's query API every 10 ms
until sum(vigil_appio_bytes_total{jobid="4711",op="write"}) shows it, and
prints the delay after the interval's end. A helper thread makes the library
use its reporter thread, which flushes at each interval's end.
"""
import json, os, sys, threading, time, urllib.parse, urllib.request

url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
threading.Thread(target=lambda: time.sleep(3600), daemon=True).start()
q = urllib.parse.quote('sum(vigil_appio_bytes_total{jobid="4711",op="write"})')
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)


def value():
    with urllib.request.urlopen(f"{url}/api/v1/query?query={q}", timeout=5) as r:
        res = json.load(r)["data"]["result"]
    return float(res[0]["value"][1]) if res else 0.0


total, out = 0, []
for i in range(n + 1):
    now = time.time()
    time.sleep(int(now) + 1.5 - now)  # the middle of the next interval
    os.write(fd, b"x" * 1024)
    total += 1024
    end = int(time.time()) + 1
    while value() < total:
        time.sleep(0.01)
    if i > 0:  # the first round includes the connection and the job's new series
        out.append(time.time() - end)
out.sort()
print("latency after the interval's end, s: median %.3f  min %.3f  p90 %.3f  max %.3f  (n=%d)" % (
    out[len(out) // 2], out[0], out[int(len(out) * 0.9)], out[-1], len(out)))
print(" ".join("%.3f" % x for x in out))
