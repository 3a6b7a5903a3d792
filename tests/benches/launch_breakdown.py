#!/usr/bin/env python3
"""Where `rexec -n 1 /bin/true` spends its time, from strace timestamps.

Usage (as root, release binaries, one rexecd):

    strace --seccomp-bpf -f -ttt -o DIR/d.trace \
        -e trace=accept4,mkdir,rmdir,clone,clone3,execve,wait4,exit_group,write,sendto,writev \
        rexecd --name n1 ... &
    for i in $(seq 1 15); do
        strace --seccomp-bpf -f -ttt -o DIR/c.$i.trace \
            -e trace=execve,openat,connect,sendto,write,writev,recvfrom,read,exit_group \
            rexec -n 1 /bin/true
        sleep 0.3
    done
    python3 tests/benches/launch_breakdown.py DIR

The client's and rexecd's traces are merged by time (same clock). Each phase is
printed as the median over the runs (and the minimum). strace itself slows every
traced call, so the phases are larger than in an untraced run; their shares are
what counts.
"""
import glob
import re
import statistics
import sys


def load(path):
    out = []
    for line in open(path):
        parts = line.split(None, 2)
        if len(parts) == 3 and re.match(r'^\d', parts[1]):
            out.append((float(parts[1]), parts[0], parts[2]))
    return out


def first(events, test):
    return next(t for t, _, r in events if test(r))


def main(directory):
    daemon = load(directory + '/d.trace')
    phases = {}
    order = []

    def add(name, value):
        if name not in phases:
            order.append(name)
        phases.setdefault(name, []).append(value * 1e3)

    for path in sorted(glob.glob(directory + '/c.*.trace')):
        c = load(path)
        t0, tend = c[0][0], c[-1][0]
        cfg = first(c, lambda r: '.toml' in r and r.startswith('openat'))
        keys = max(t for t, _, r in c if r.startswith('openat') and ('.key' in r or '.pem' in r))
        conn = first(c, lambda r: r.startswith('connect('))
        big = re.compile(r'iov_len=(\d+)\}\], 1\)')
        launch = first(c, lambda r: r.startswith('writev(') and big.search(r)
                       and int(big.search(r).group(1)) > 1000)
        gone = first(c, lambda r: r.startswith('exit_group'))
        d = [e for e in daemon if t0 <= e[0] <= tend]
        mkdirs = [t for t, _, r in d if r.startswith('mkdir(')]
        fork = first(d, lambda r: r.startswith('clone'))
        joins = [t for t, _, r in d if r.startswith('write(') and '"0", 1' in r]
        exe = first(d, lambda r: r.startswith('execve('))
        ended = first(d, lambda r: r.startswith('exit_group'))
        reaped = first(d, lambda r: 'wait4' in r and 'WIFEXITED' in r)
        rmdirs = [t for t, _, r in d if r.startswith('rmdir(')]
        told = next((t for t, _, r in d if t > rmdirs[-1]
                     and (r.startswith('sendto(') or r.startswith('writev('))), rmdirs[-1])
        add('client: exec, libraries, arguments, runtime', cfg - t0)
        add('client: config, CA, CRL, certificate, key', keys - cfg)
        add('client: TLS set-up to connect()', conn - keys)
        add('TCP + TLS handshake, Launch sent', launch - conn)
        add('node: checks, user, registry, to mkdir', mkdirs[0] - launch)
        add('node: job cgroup mkdir (all hierarchies)', mkdirs[-1] - mkdirs[0])
        add('node: weights, spawn set-up, fork', fork - mkdirs[-1])
        add('node: child until its first cgroup.procs write', joins[0] - fork)
        add('node: cgroup.procs writes (migration)', joins[-1] - joins[0])
        add('node: privileges, directory, execve', exe - joins[-1])
        add('node: /bin/true runs', ended - exe)
        add('node: exit seen (wait4)', reaped - ended)
        add('node: teardown (cgroup removal)', rmdirs[-1] - reaped)
        add('node: Exit sent', told - rmdirs[-1])
        add('client: Exit to exit_group', gone - told)
        add('client: exit_group to gone', tend - gone)
        add('total (client exec to gone)', tend - t0)
    for name in order:
        v = phases[name]
        print(f'  {name:<48} {statistics.median(v):6.2f} ms  (min {min(v):.2f})')


if __name__ == '__main__':
    main(sys.argv[1])
