#!/usr/bin/env python3
"""Where a running process spends its CPU, by thread name: waits DELAY seconds, then reads every
thread's user+system time from /proc at the start and end of SECONDS, and prints a Markdown table
of the cores each name kept busy. Redwood names its threads (core/thread_name.hpp): rw-read is a
stream's reader with FFmpeg's decoder threads, rw-pump its pump, rw-batch a batcher, rw-cuda-done
a GPU runner's completion thread; oneTBB's workers (the stages) carry the launcher's own name.

    thread_cpu.py PID SECONDS [DELAY]

PID may be a wrapper (timeout, a shell): its descendant with the most threads is measured.
"""
import os
import sys
import time
from collections import defaultdict


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(entry))
        except OSError:
            continue
    return out


def busiest_descendant(pid):
    """The process with the most threads among pid and its descendants (a depth-first walk)."""
    best, best_threads = pid, -1
    to_visit = [pid]
    while to_visit:
        p = to_visit.pop()
        try:
            threads = len(os.listdir(f"/proc/{p}/task"))
        except OSError:
            continue  # gone since it was listed
        if threads > best_threads:
            best, best_threads = p, threads
        to_visit.extend(children(p))
    return best


def sample(pid):
    """tid -> (name, cpu ticks)"""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))  # utime, stime
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    pid, seconds = int(sys.argv[1]), float(sys.argv[2])
    time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0)
    pid = busiest_descendant(pid)
    hz = os.sysconf("SC_CLK_TCK")
    try:
        before = sample(pid)
        start = time.monotonic()
        time.sleep(seconds)
        after = sample(pid)
        elapsed = time.monotonic() - start
    except OSError as e:
        sys.exit(f"thread_cpu: process {pid} went away: {e}")
    cores, threads = defaultdict(float), defaultdict(int)
    for tid, (name, ticks) in after.items():
        used = ticks - before.get(tid, (name, 0))[1]
        cores[name] += used / hz / elapsed
        threads[name] += 1
    total = sum(cores.values())
    print(f"process {pid} over {elapsed:.1f} s, {os.cpu_count()} cores:")
    print()
    print("| thread name | threads | cores busy | share |")
    print("| --- | --- | --- | --- |")
    for name in sorted(cores, key=cores.get, reverse=True):
        share = cores[name] / total if total else 0
        print(f"| {name} | {threads[name]} | {cores[name]:.2f} | {share:.0%} |")
    print(f"| all | {sum(threads.values())} | {total:.2f} | 100% |")


if __name__ == "__main__":
    main()
