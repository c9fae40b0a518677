"""Sweep scaling: 10,000 runs of seed 000's uniform workload (1,000 seeds x
10 free rates, best fit) on a local Dask cluster of 1 and of 2 workers,
against the same runs in one process and from the command line, alternated
(A B A B) ROUNDS times; prints the medians, the ratios the issue asks for
and the per-task overhead.

    python bench/sweep.py [ROUNDS]      (the retype binary: RETYPE_BIN or target/release)
"""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from distributed import Client

import retype
from retype.sweep import BATCHES_PER_WORKER, load_grid, local_cluster

GRID = {"study": {"seeds": 1000, "ops": 1000, "free": list(range(0, 100, 10)), "policy": "best-fit"}}
ROOT = Path(__file__).resolve().parents[1]
CLI = os.environ.get("RETYPE_BIN", str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "retype"))


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def cli_serial(rows):
    """The same runs from the command line, 1,000 workloads per call (one
    argument may not exceed 128 KiB)."""
    for i in range(0, len(rows), 1000):
        spec = ",".join(r["workload"] for r in rows[i : i + 1000])
        subprocess.run([CLI, "study", "--workload", spec, "--policy", "best-fit", "--json"],
                       check=True, stdout=subprocess.DEVNULL)


def main(rounds):
    _, rows = load_grid(GRID)
    times = {"serial": [], "cli": [], "1 worker": [], "2 workers": []}
    clusters = {}
    for n in (1, 2):
        t = time.perf_counter()
        cluster = local_cluster(n)
        clusters[n] = (cluster, Client(cluster))
        print(f"local cluster of {n}: started in {time.perf_counter() - t:.2f} s")
    try:
        for _ in range(rounds):
            times["serial"].append(timed(lambda: retype.sweep(GRID, client="serial")))
            times["cli"].append(timed(lambda: cli_serial(rows)))
            for n in (1, 2):
                client = clusters[n][1]
                times[f"{n} worker" + ("s" if n > 1 else "")].append(
                    timed(lambda: retype.sweep(GRID, client=client)))
        # Per-task overhead: 1,000 runs as 1,000 tasks against the same runs
        # in this process, on the one-worker cluster.
        small = {"study": {**GRID["study"], "seeds": 100}}
        one = clusters[1][1]
        per_task = statistics.median(
            (timed(lambda: retype.sweep(small, client=one, batch=1))
             - timed(lambda: retype.sweep(small, client="serial"))) / 1000
            for _ in range(rounds))
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        print(f"{k:>10}: median {med[k]:.2f} s  ({', '.join(f'{x:.2f}' for x in v)})")
    print(f"speed-up of 2 workers over 1: {med['1 worker'] / med['2 workers']:.2f}x (goal >= 1.7)")
    print(f"2 workers / (CLI serial / 2): {med['2 workers'] / (med['cli'] / 2):.2f} (goal <= 1.2)")
    print(f"per-task overhead: {per_task * 1e3:.2f} ms a task "
          f"(a default task here is {len(rows) // BATCHES_PER_WORKER} runs)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
