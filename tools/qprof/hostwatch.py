#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Host CPU of each QEMU thread during each guest run, from hostwatch.sh's samples.

For each "== " line of the guest's console (the end of a run), the threads
that used more than 3 % of a host CPU in the 3 s before it: thread id, share
of a host CPU, and the host CPUs it was seen on (CPU x samples).

    python3 tools/qprof/hostwatch.py DIR [SECONDS]
"""
import collections
import sys


def main():
    out = sys.argv[1]
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    threads = collections.defaultdict(list)
    with open(f"{out}/threads.txt") as f:
        for line in f:
            p = line.split()
            if len(p) == 4:
                threads[p[1]].append((float(p[0]), int(p[2]), int(p[3])))
    with open(f"{out}/console.txt", errors="replace") as f:
        for line in f:
            if "== " not in line:
                continue
            t = float(line.split()[0])
            row = []
            for tid, v in sorted(threads.items()):
                s = [x for x in v if t - window - 0.3 <= x[0] <= t - 0.2]
                if len(s) < 2:
                    continue
                used = (s[-1][1] - s[0][1]) / 100 / (s[-1][0] - s[0][0])
                cpus = collections.Counter(x[2] for x in s)
                if used > 0.03:
                    seen = "/".join(f"{c}x{n}" for c, n in sorted(cpus.items()))
                    row.append(f"{tid} {used * 100:.0f}% on {seen}")
            print(line[line.index("== ") + 3:].strip()[:90])
            print("    " + ", ".join(row))


if __name__ == "__main__":
    main()
