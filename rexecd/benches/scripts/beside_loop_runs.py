#!/usr/bin/env python3
"""The market beside a busy background loop, N runs in a row: runs the real-kernel
tests of rexecd/tests/shares beside one `nice -n NICE` shell busy all the time that the
test starts outside the market, in a session of its own, N times for each nice level
and each scenario asked for, and prints every run's intervals and a summary (issue 41):

- `figure4`: `figure_4_beside_a_busy_background_loop` (beside.rs), single-threaded jobs
  bidding 40, 30 and 20 on a node that owns both CPUs. Targets: the jobs together at
  least 1.9 of 2 CPUs (less what other work than the loop took beyond a quiet node's
  0.05 CPU, never the loop's), each within 2 points of one CPU of its model share of
  what they received together, every interval.
- `one_cpu`: `bids_3_and_1_on_one_cpu_keep_it_beside_a_busy_background_loop`
  (one_cpu.rs), jobs bidding 3 and 1 on a node pinned to CPU 0, the loop confined to
  CPU 0 too. Targets: at least 0.95 of the CPU together, each within 2 points.
- `pinned`: `pinned_nodes_keep_their_cpus_beside_a_busy_background_loop` (pinned.rs),
  node A pinned to CPU 0 with a two-thread job, node B to CPU 1 with two jobs, the
  loop free. Targets: A's job loses at most 0.10 CPU when B gets busy beyond other
  work (never the loop's) on A's CPU; the same nodes unpinned lose 0.5 CPU or more.

Run as root from the workspace, on a quiet two-CPU v1 or v2 host:

    python3 rexecd/benches/scripts/beside_loop_runs.py 10              # all three, nice 19 and 0
    python3 rexecd/benches/scripts/beside_loop_runs.py 10 --nice 19 --test figure4
    python3 rexecd/benches/scripts/beside_loop_runs.py 10 --nice 19 --autogroup
    python3 rexecd/benches/scripts/beside_loop_runs.py 10 --nice 19 --weight kernel

`--weight` is the node's `cgroup_weight` (default 10000, as in the suite's tests;
`kernel` leaves the kernel's default, 100 on v2 and 1024 shares on v1).

`--autogroup` also sets the loop's session autogroup to its nice level: where the
kernel groups sessions (`kernel.sched_autogroup_enabled = 1`) a root-level process
weighs as much as its autogroup whatever its own nice level, so without it a `nice
-n 19` loop in a session of its own weighs as much as a `nice -n 0` one.

The environment passes through to the tests: `REXEC_BESIDE_IDLE=1` runs the loop in
a cgroup of its own with `cpu.idle = 1`, and `REXEC_BESIDE_LOOP_CPUS=1` confines
`one_cpu`'s loop to CPU 1, off the node's CPU 0 (OPERATIONS, "Background work on a
market node"):

    REXEC_BESIDE_IDLE=1 python3 rexecd/benches/scripts/beside_loop_runs.py 5 --nice 19 --test figure4 --weight kernel
    REXEC_BESIDE_LOOP_CPUS=1 python3 rexecd/benches/scripts/beside_loop_runs.py 5 --nice 0 --test one_cpu --weight kernel

A run takes about 25 s (figure4, one_cpu) or 30 s (pinned). Results:
docs/BENCHMARKS.md ("Beside a busy background loop").
"""
import argparse, os, re, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from figure4_runs import test_binary  # noqa: E402

TESTS = {
    "figure4": "beside::figure_4_beside_a_busy_background_loop",
    "one_cpu": "one_cpu::bids_3_and_1_on_one_cpu_keep_it_beside_a_busy_background_loop",
    "pinned": "pinned::pinned_nodes_keep_their_cpus_beside_a_busy_background_loop",
}
# Worst error of a job in any interval, points of one CPU: the target. The suite's
# test guards at 3 (beside.rs, GUARD_POINTS); a run meets the target only within 2.
TARGET_POINTS = 2.0
INTERVAL = re.compile(
    r"beside nice (-?\d+): interval (\d+): jobs \[([^\]]*)\] total ([\d.]+) loop ([\d.]+) "
    r"other work ([\d.]+) model \[([^\]]*)\]")
SETTLED = re.compile(r"beside nice -?\d+: (settled|not settled) after ([\d.]+) s")
PINNED = re.compile(
    r"(pinned|unpinned): A's job alone ([\d.]+) CPU, beside B's two jobs ([\d.]+) CPU "
    r"\(B's jobs: ([\d.]+) CPU together\); other work ([\d.]+) and ([\d.]+) CPU "
    r"\(the busy loop ([\d.]+) and ([\d.]+)\)")


def run_test(binary, test, nice, autogroup, weight, log):
    env = dict(os.environ, REXEC_BESIDE_NICE=str(nice),
               REXEC_BESIDE_AUTOGROUP="1" if autogroup else "0",
               REXEC_BESIDE_WEIGHT=weight)
    out = subprocess.run([binary, TESTS[test], "--exact", "--nocapture", "--test-threads", "1"],
                         capture_output=True, text=True, env=env)
    if log is not None:
        log.write(out.stderr)
        log.flush()
    return out.returncode, out.stderr


def intervals(stderr):
    """Each interval's (jobs' total, loop, other work, worst job's points) as the test
    judges it: against the model's division of what the jobs received together."""
    found = []
    for m in INTERVAL.finditer(stderr):
        jobs = [float(x) for x in m.group(3).split(",")]
        model = [float(x) for x in m.group(7).split(",")]
        total = sum(jobs)
        points = max(abs(j - w * total / sum(model)) * 100 for j, w in zip(jobs, model))
        found.append((total, float(m.group(5)), float(m.group(6)), points, sum(model)))
    return found


def shares_runs(binary, test, nice, args, log):
    """N runs of a test judged as beside.rs judges: every interval printed."""
    tally = []
    for k in range(1, args.runs + 1):
        rc, stderr = run_test(binary, test, nice, args.autogroup, args.weight, log)
        found = intervals(stderr)
        settled = SETTLED.search(stderr)
        settle = f"{settled.group(1)} after {settled.group(2)} s" if settled else "no settle line"
        if not found:
            print(f"run {k:>2}: the test printed no interval (exit {rc})", flush=True)
            tally.append((rc == 0, None, None))
            continue
        cpus = found[0][4]
        worst = max(i[3] for i in found)
        # The test passes within its guard (3 points); the target is 2, judged here.
        met = rc == 0 and worst <= TARGET_POINTS
        line = "  ".join(f"{t:.3f}/{lp:.3f}/{o:.2f}/{p:.1f}" for t, lp, o, p, _ in found)
        print(f"run {k:>2}: {line}  ({settle}){'' if met else '  missed'}", flush=True)
        tally.append((met, min(i[0] for i in found) / cpus, worst))
    met = sum(ok for ok, _, _ in tally)
    totals = [t for _, t, _ in tally if t is not None]
    worst = [w for _, _, w in tally if w is not None]
    if totals:
        print(f"summary: {met} of {args.runs} runs met every target; least total "
              f"{min(totals):.3f} of the node's CPUs (at least 0.95 less other work than the "
              f"loop beyond 0.05 CPU), worst job "
              f"{max(worst):.1f} points (at most 2); worst points per run "
              f"{', '.join(f'{w:.1f}' for w in worst)}")
    else:
        print(f"summary: {met} of {args.runs} runs met every target; no interval printed")
    return met


def pinned_runs(binary, nice, args, log):
    """N runs of the pinned-nodes scenario beside the loop: A's job alone and beside
    B's, B's jobs, the loop, for the pinned and the unpinned nodes."""
    falls, met = [], 0
    for k in range(1, args.runs + 1):
        rc, stderr = run_test(binary, "pinned", nice, args.autogroup, args.weight, log)
        met += rc == 0
        parts = []
        for m in PINNED.finditer(stderr):
            alone, loaded, b = float(m.group(2)), float(m.group(3)), float(m.group(4))
            parts.append(f"{m.group(1)} A {alone:.3f} -> {loaded:.3f} B {b:.3f} "
                         f"loop {m.group(7)}/{m.group(8)} other {m.group(5)}/{m.group(6)}")
            if m.group(1) == "pinned":
                falls.append(alone - loaded)
        print(f"run {k:>2}: {'; '.join(parts) or 'nothing printed'}"
              f"{'' if rc == 0 else '  missed'}", flush=True)
    print(f"summary: {met} of {args.runs} runs met every target; A's pinned job fell at most "
          f"{max(falls, default=float('nan')):.3f} CPU when B got busy (at most 0.10 beyond "
          f"other work on its CPU)")
    return met


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", type=int)
    ap.add_argument("--nice", type=int, action="append",
                    help="the loop's nice level (repeatable; default 19 and 0)")
    ap.add_argument("--test", action="append", choices=sorted(TESTS),
                    help="the scenario (repeatable; default all three)")
    ap.add_argument("--autogroup", action="store_true",
                    help="set the loop's autogroup to its nice level too")
    ap.add_argument("--weight", default="10000",
                    help="the node's cgroup_weight (v2 units), or 'kernel' for the kernel's "
                         "default (default 10000, as the suite's tests)")
    ap.add_argument("--log", help="append every run's test output here")
    args = ap.parse_args()
    binary = test_binary()
    log = open(args.log, "a") if args.log else None
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    for test in args.test or ["figure4", "one_cpu", "pinned"]:
        for nice in args.nice or [19, 0]:
            group = (", its autogroup too" if args.autogroup else "") + \
                f", the market's cgroup_weight {args.weight}"
            print(f"{test} beside a nice {nice} busy loop{group} "
                  f"({time.strftime('%H:%M UTC', time.gmtime())}, load average "
                  f"{os.getloadavg()[0]:.2f})")
            if test == "pinned":
                pinned_runs(binary, nice, args, log)
            else:
                print("each interval: jobs' total / loop / other work (CPUs) / worst job "
                      "(points of one CPU)")
                shares_runs(binary, test, nice, args, log)
            print()


if __name__ == "__main__":
    main()
