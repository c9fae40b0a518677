#!/usr/bin/env python3
"""Two or more builds of the recorder (or settings of one) on mt_alloc (or a Python program),
alternated in one run: each round runs the program plainly, then under each side in turn, and
the medians of the ratios to the round's plain run are printed for the wall time and for the
CPU time (the child's user and system time, which a core taken by another job does not
inflate); with two sides or more, also each later side's ratio to the first in the same round
(paired: a round's load moves both alike, so these spread less). For a change's before and
after on a shared machine, in a minute or two.

usage: python3 bench/recorder-ab.py ROUNDS THREADS ITERATIONS NAME=LIB[:VAR=VALUE,...] ...
       python3 bench/recorder-ab.py ROUNDS python NAME=LIB[:VAR=VALUE,...] ...
  the second runs, instead of mt_alloc, bench/recorder-overhead.sh's Python program with
  PYTHONMALLOC=malloc (every object through malloc, many blocks live) by this interpreter;
  each side records an aggregate recording (RETYPE_AGGREGATE=1) unless its settings say
  otherwise (RETYPE_AGGREGATE=0 for a full one); e.g.
  python3 bench/recorder-ab.py 31 1 1000000 old=old.so new=target/release/libretype_recorder.so \\
      nostacks=target/release/libretype_recorder.so:RETYPE_STACK_DEPTH=0
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# bench/recorder-overhead.sh's program run with PYTHONMALLOC=malloc.
PYTHON_JSON = """
import json
for _ in range(2): json.loads(json.dumps([{'k': i, 'v': str(i)} for i in range(100000)]))"""


def main():
    if len(sys.argv) < 4 or (sys.argv[2] != "python" and len(sys.argv) < 5):
        sys.exit(__doc__)
    rounds = int(sys.argv[1])
    python = sys.argv[2] == "python"
    args = sys.argv[3:] if python else sys.argv[4:]
    sides = [("plain", None, {})]
    for arg in args:
        name, rest = arg.split("=", 1)
        lib, _, settings = rest.partition(":")
        env = {"RETYPE_AGGREGATE": "1"}
        env.update(kv.split("=", 1) for kv in settings.split(",") if kv)
        if env["RETYPE_AGGREGATE"] == "0":
            del env["RETYPE_AGGREGATE"]
        sides.append((name, os.path.abspath(lib), env))
    work = tempfile.mkdtemp()
    if python:
        title = "python json, PYTHONMALLOC=malloc"
        command = [sys.executable, "-c", PYTHON_JSON]
    else:
        threads, iterations = sys.argv[2], sys.argv[3]
        title = f"mt_alloc {threads} {iterations}"
        program = os.path.join(work, "mt_alloc")
        subprocess.run(["cc", "-O2", "-pthread", "-o", program,
                        os.path.join(REPO, "crates/retype-recorder/tests/c/mt_alloc.c")],
                       check=True)
        command = [program, threads, iterations]
    wall = {name: [] for name, _, _ in sides}
    cpu = {name: [] for name, _, _ in sides}
    print("load average at start:", open("/proc/loadavg").read().split()[0], flush=True)
    for _ in range(rounds):
        for name, lib, settings in sides:
            env = dict(os.environ, PYTHONMALLOC="malloc") if python else dict(os.environ)
            if lib:
                env.update(settings, LD_PRELOAD=lib, RETYPE_TRACE_FILE=os.path.join(work, "t.rtr"))
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
            wall[name].append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            for f in os.listdir(work):
                if f.startswith("t.rtr"):
                    os.remove(os.path.join(work, f))
    print("load average at end:", open("/proc/loadavg").read().split()[0])
    print(f"{title}, {rounds} rounds; medians, and the median of the "
          "ratios to plain by round (their range)")
    for label, times in (("wall", wall), ("cpu", cpu)):
        plain = times["plain"]
        for name, _, _ in sides:
            ratios = sorted(b / a for a, b in zip(plain, times[name]))
            print(f"{label:4} {name:12} {statistics.median(times[name]) * 1000:8.1f} ms "
                  f"{statistics.median(ratios):.3f} ({ratios[0]:.2f}-{ratios[-1]:.2f})")
    if len(sides) > 2:
        first = sides[1][0]
        print(f"each side against {first} in the same round (median of the ratios, their range)")
        for label, times in (("wall", wall), ("cpu", cpu)):
            for name, _, _ in sides[2:]:
                ratios = sorted(b / a for a, b in zip(times[first], times[name]))
                print(f"{label:4} {name:12} {statistics.median(ratios):.3f} "
                      f"({ratios[0]:.2f}-{ratios[-1]:.2f})")
    for f in os.listdir(work):
        os.remove(os.path.join(work, f))
    os.rmdir(work)


if __name__ == "__main__":
    main()
