"""The test capture device's sink: appends what ALSA's file plugin pipes in to a raw file, reading
no faster than real time. ALSA's null device has no clock, so without this a playing stream spins
a core and writes about 140 MB of silence per second (CI's disk filled up that way)."""
import fcntl
import os
import sys
import time

F_SETPIPE_SZ = 1031   # Linux: a small pipe keeps the writer no more than ~40 ms ahead

path, bytes_per_second = sys.argv[1], float(sys.argv[2])
try:
    fcntl.fcntl(0, F_SETPIPE_SZ, 4096)
except OSError:
    pass
with open(path, "ab", buffering=0) as out:
    start, written = time.monotonic(), 0
    while data := os.read(0, 4096):
        out.write(data)
        written += len(data)
        ahead = written / bytes_per_second - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
