#!/usr/bin/env python3
"""Placement without rexecd: three single-thread busy loops in v1 cgroups (cpu, cpuacct,
cpuset under `exp`, at the top cpu.shares), no caps. The bid-40 job is confined to CPU 0,
the bid-20 job to CPU 1, and the bid-30 job moves between CPU 0 (the first `q` of every
period) and CPU 1; the weights are solved so that the schedule gives the model's shares
(0.889, 0.667, 0.444), and with --loop moved by lag every 0.5 s. Prints the worst and mean
error of 1 s windows (every 0.25 s, after the first 2 s), in points of one CPU.

Run as root on a v1 (hybrid) host with CPUs 0 and 1, at a real-time priority so that the
busy loops at the top weight do not delay the moves (the loops themselves are started
SCHED_OTHER):

    chrt -f 50 python3 rotate_placement.py --secs 15 --loop
    chrt -f 50 python3 rotate_placement.py --secs 15 --loop --period 0.1

The results were in docs/BENCHMARKS.md ("Single threads placed on CPUs"), now in
its history (`git log -p docs/BENCHMARKS.md`); rexecd's own
placement (market::control::placement) splits the smallest job instead, to the same end.
"""
import argparse, os, subprocess, time
MODEL = [0.889, 0.667, 0.444]
ROOT = "/sys/fs/cgroup"
H = ("cpu", "cpuacct", "cpuset")
def write(p, v):
    with open(p, "w") as f: f.write(str(v))
ap = argparse.ArgumentParser()
ap.add_argument("--secs", type=float, default=20)
ap.add_argument("--period", type=float, default=0.5)
ap.add_argument("--q", type=float, default=None)
ap.add_argument("--loop", action="store_true")
ap.add_argument("--gain", type=float, default=4.0)
a = ap.parse_args()
aA, aB, aC = MODEL
q = a.q if a.q is not None else (1 - aA) / aB
x0 = (1 - aA) / q            # B's part of CPU0 while there
y = (aC - q) / (1 - q)       # C's part of CPU1 while B there
wA = 1000; wB = wA * x0 / (1 - x0); wC = wB * y / (1 - y)
W = [int(wA), int(wB), int(wC)]
top = {h: f"{ROOT}/{h}/exp" for h in H}
for d in top.values(): os.makedirs(d, exist_ok=True)
write(top["cpu"] + "/cpu.shares", 262144)
write(top["cpuset"] + "/cpuset.cpus", "0-1"); write(top["cpuset"] + "/cpuset.mems", "0")
procs = []
for i in range(3):
    for h in H: os.makedirs(f"{top[h]}/j{i}", exist_ok=True)
    write(f"{top['cpu']}/j{i}/cpu.cfs_quota_us", -1)
    write(f"{top['cpu']}/j{i}/cpu.shares", W[i])
    write(f"{top['cpuset']}/j{i}/cpuset.cpus", ["0", "1", "1"][i])
    write(f"{top['cpuset']}/j{i}/cpuset.mems", "0")
    join = "; ".join(f"echo $$ > {top[h]}/j{i}/cgroup.procs" for h in H)
    procs.append(subprocess.Popen(["chrt", "-o", "0", "sh", "-c", f'{join}; exec sh -c "while :; do :; done"']))
def usage(): return [int(open(f"{top['cpuacct']}/j{i}/cpuacct.usage").read()) / 1e9 for i in range(3)]
samples = []
t0 = time.monotonic()
where = 1
lag=[0.0]*3; tick_at=t0+0.5; last=(t0, usage())
import signal
signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
try:
    while time.monotonic() - t0 < a.secs:
        now = time.monotonic()
        samples.append((now, usage()))
        if a.loop and now >= tick_at:
            u = samples[-1][1]
            d = [y2 - x for x, y2 in zip(last[1], u)]
            dt, tot = now - last[0], sum(d)
            if tot > 0:
                import math
                for i in range(3):
                    lag[i] += (MODEL[i] - d[i] / tot * 2.0) * dt
                    lag[i] = max(-0.5, min(0.5, lag[i]))
                    write(f"{top['cpu']}/j{i}/cpu.shares", max(2, int(W[i] * math.exp(a.gain * lag[i]))))
            last, tick_at = (now, u), tick_at + 0.5
        k = int((now - t0) / a.period)
        phase = (now - t0) - k * a.period
        want = 0 if phase < q * a.period else 1
        if want != where:
            write(f"{top['cpuset']}/j1/cpuset.cpus", str(want)); where = want
        edge = t0 + k * a.period + (q * a.period if want == 0 else a.period)
        time.sleep(min(0.01, max(0.0005, edge - time.monotonic())))
finally:
    for p in procs: p.kill(); p.wait()
    time.sleep(0.2)
    for i in range(3):
        for h in H:
            try: os.rmdir(f"{top[h]}/j{i}")
            except OSError: pass
worst, start = [], t0 + 2
while True:
    a0 = next((s for s in samples if s[0] >= start), None)
    b0 = next((s for s in samples if s[0] >= start + 1), None)
    if a0 is None or b0 is None: break
    d = [y2 - x for x, y2 in zip(a0[1], b0[1])]
    tot = sum(d)
    if tot == 0: break
    worst.append(max(abs(x / tot * 2.0 - m) * 100 for x, m in zip(d, MODEL)))
    start += 0.25
got = [y2 - x for x, y2 in zip(samples[0][1], samples[-1][1])]
tot = sum(got)
print(f"q {q:.3f} weights {W} period {a.period}: worst 1s {max(worst):.1f} mean {sum(worst)/len(worst):.2f} over3 {sum(1 for x in worst if x>3)}/{len(worst)} whole {[round((x/tot*2-m)*100,2) for x,m in zip(got,MODEL)]} cpus {tot/(samples[-1][0]-samples[0][0]):.2f}")
