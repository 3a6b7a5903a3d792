#!/usr/bin/env python3
"""Two ways of launching `/bin/true` through rexec, timed in alternation.

Usage:

    python3 tests/benches/launch_pair.py N CLIENT_A:CONFIG_A CLIENT_B:CONFIG_B [ARGS...]

Each of N rounds runs `CLIENT --config CONFIG ARGS` (default ARGS: `-n 1
/bin/true`) once for A and once for B, in alternating order, stdin from
/dev/null, and times each run from fork to reap. Two builds of the client
against one rexecd (same config), or one client against two rexecds (two
configs), are compared on the same machine at the same moments, so the noise
of a shared host falls on both alike. It prints each side's median, p10, p90
and minimum, in how many rounds B was faster, and the median of the
differences A - B, the figure to read: medians taken minutes apart on this
machine move by a millisecond or more.

A run that exits non-zero stops the comparison with its status.
"""
import os
import statistics
import subprocess
import sys
import time


def quantile(values, p):
    ordered = sorted(values)
    return ordered[int(p * (len(ordered) - 1))]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    sides = [tuple(arg.split(":", 1)) for arg in sys.argv[2:4]]
    if any(len(side) != 2 for side in sides):
        sys.exit("each side is CLIENT:CONFIG")
    args = sys.argv[4:] or ["-n", "1", "/bin/true"]
    times = ([], [])
    null = open(os.devnull, "rb")
    for i in range(rounds):
        order = (0, 1) if i % 2 == 0 else (1, 0)
        for side in order:
            client, config = sides[side]
            start = time.perf_counter()
            done = subprocess.run([client, "--config", config, *args], stdin=null)
            times[side].append((time.perf_counter() - start) * 1000)
            if done.returncode != 0:
                sys.exit(f"{client} --config {config} exited with {done.returncode}")
    for name, (client, config), t in zip("AB", sides, times):
        print(
            f"{name} {client} ({config}): median {statistics.median(t):.2f} ms, "
            f"p10 {quantile(t, 0.1):.2f}, p90 {quantile(t, 0.9):.2f}, min {min(t):.2f}"
        )
    a, b = times
    faster = sum(1 for x, y in zip(a, b) if y < x)
    diff = statistics.median(x - y for x, y in zip(a, b))
    print(f"B faster in {faster} of {rounds} rounds; median of the differences A - B {diff:.3f} ms")


if __name__ == "__main__":
    main()
