#!/usr/bin/env python3
"""Caps and placement without rexecd: three single-thread busy loops in v1 cgroups
(cpu, cpuacct, cpuset under `exp`, at the top cpu.shares so that other work on a shared
machine takes little), weighted 40/30/20 and capped at the model's allocations of two
CPUs (0.889, 0.667, 0.444). Prints the worst and mean error of 1 s windows after the
first 2 s, in points of one CPU, of each job's share of what the three received.

Run as root on a v1 (hybrid) host with CPUs 0 and 1:

    python3 caps_placement.py --secs 20                 # static caps
    python3 caps_placement.py --secs 20 --loop          # caps moved by lag (rexecd's law)
    python3 caps_placement.py --secs 20 --loop --pin    # bid 40 on CPU 0, bid 30 on CPU 1
    python3 caps_placement.py --period 10000 --burst 1  # other periods, burst quota

The results were in docs/BENCHMARKS.md ("Where the last bad seconds come from"),
now in its history: `git log -p docs/BENCHMARKS.md`.
"""
import argparse
import os
import subprocess
import time

MODEL = [0.889, 0.667, 0.444]
BIDS = [40, 30, 20]
ROOT = "/sys/fs/cgroup"
HIERARCHIES = ("cpu", "cpuacct", "cpuset")
# rexecd's caps law (rexecd/src/market/control/caps.rs): allocation + PAYBACK * lag / tick,
# within LAG_SWING of the allocation either way; lag clamped to LAG_MAX CPU-seconds.
PAYBACK, LAG_SWING, LAG_MAX = 0.25, 0.5, 0.5


def write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secs", type=float, default=20)
    ap.add_argument("--period", type=int, default=20000, help="CFS period, microseconds")
    ap.add_argument("--burst", type=float, default=0, help="cfs_burst_us as a share of the quota")
    ap.add_argument("--pin", action="store_true", help="bid 40 on CPU 0, bid 30 on CPU 1, bid 20 free")
    ap.add_argument("--loop", action="store_true", help="move the caps by lag every tick")
    ap.add_argument("--tick", type=float, default=0.5)
    a = ap.parse_args()

    top = {h: f"{ROOT}/{h}/exp" for h in HIERARCHIES}
    for d in top.values():
        os.makedirs(d, exist_ok=True)
    write(top["cpu"] + "/cpu.shares", 262144)
    write(top["cpuset"] + "/cpuset.cpus", "0-1")
    write(top["cpuset"] + "/cpuset.mems", "0")
    procs = []
    for i, (alloc, bid) in enumerate(zip(MODEL, BIDS)):
        for h in HIERARCHIES:
            os.makedirs(f"{top[h]}/j{i}", exist_ok=True)
        cpu = f"{top['cpu']}/j{i}"
        write(cpu + "/cpu.shares", bid * 1024 // 10)
        write(cpu + "/cpu.cfs_period_us", a.period)
        quota = int(alloc * a.period)
        write(cpu + "/cpu.cfs_quota_us", quota)
        if os.path.exists(cpu + "/cpu.cfs_burst_us"):
            write(cpu + "/cpu.cfs_burst_us", int(quota * a.burst))
        write(f"{top['cpuset']}/j{i}/cpuset.cpus", ["0", "1", "0-1"][i] if a.pin else "0-1")
        write(f"{top['cpuset']}/j{i}/cpuset.mems", "0")
        join = "; ".join(f"echo $$ > {top[h]}/j{i}/cgroup.procs" for h in HIERARCHIES)
        procs.append(subprocess.Popen(["sh", "-c", f'{join}; exec sh -c "while :; do :; done"']))

    def usage():
        return [int(open(f"{top['cpuacct']}/j{i}/cpuacct.usage").read()) / 1e9 for i in range(3)]

    samples, lag = [], [0.0] * 3
    t0 = time.monotonic()
    last, next_tick = (t0, usage()), t0 + a.tick
    try:
        while time.monotonic() - t0 < a.secs:
            now, u = time.monotonic(), usage()
            samples.append((now, u))
            if a.loop and now >= next_tick:
                d = [y - x for x, y in zip(last[1], u)]
                dt, total = now - last[0], sum(d)
                if total > 0:
                    for i in range(3):
                        lag[i] += (MODEL[i] - d[i] / total * 2.0) * dt
                        lag[i] = max(-LAG_MAX, min(LAG_MAX, lag[i]))
                        base = MODEL[i]
                        cap = base + PAYBACK * lag[i] / a.tick
                        cap = max(base * (1 - LAG_SWING), min(base * (1 + LAG_SWING), cap))
                        write(f"{top['cpu']}/j{i}/cpu.cfs_quota_us", max(1000, int(cap * a.period)))
                last, next_tick = (now, u), next_tick + a.tick
            time.sleep(0.02)
    finally:
        for p in procs:
            p.kill()
            p.wait()
        time.sleep(0.2)
        for i in range(3):
            for h in HIERARCHIES:
                try:
                    os.rmdir(f"{top[h]}/j{i}")
                except OSError:
                    pass

    worst, start = [], t0 + 2
    while True:
        a0 = next((s for s in samples if s[0] >= start), None)
        b0 = next((s for s in samples if s[0] >= start + 1), None)
        if a0 is None or b0 is None:
            break
        d = [y - x for x, y in zip(a0[1], b0[1])]
        total = sum(d)
        worst.append(max(abs(x / total * 2.0 - m) * 100 for x, m in zip(d, MODEL)))
        start += 1
    got = [y - x for x, y in zip(samples[0][1], samples[-1][1])]
    total = sum(got)
    cpus = total / (samples[-1][0] - samples[0][0])
    bias = [round((x / total * 2.0 - m) * 100, 2) for x, m in zip(got, MODEL)]
    print(
        f"period {a.period} burst {a.burst} pin {a.pin} loop {a.loop}: worst second "
        f"{max(worst):.1f} mean second {sum(worst) / len(worst):.1f} seconds over 3: "
        f"{sum(1 for x in worst if x > 3)}/{len(worst)}; whole run {bias} points; jobs received "
        f"{cpus:.2f} CPU"
    )


if __name__ == "__main__":
    main()
