"""Study sweeps: the cross product of a grid's axes, run as Dask tasks.

A grid is a dict (or a TOML file) with one table, ``study`` or ``replay``::

    [study]
    workload = "uniform"    # seeds x ops x free below; or a list of specs
    seeds = 1000            # seeds 0..999 (or seed = [3, 5, 8])
    ops = 1000
    free = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90]
    policy = "all"          # or a list: ["best-fit", "next-fit:lifted"]
    layout = "cantrip"
    arch = "riscv32"

    [replay]
    trace = ["a.rep", "b.rtr"]
    heap = "all"
    min_time_ms = 10

Every value may be one value or a list. The grid is checked whole before any
task starts. Runs go to Dask in batches, so that scheduling costs little
against runs of a few milliseconds; with no client a local cluster of this
machine's cores is started, and a ``distributed.Client`` or a scheduler's
address runs the same tasks on that cluster (every worker needs ``retype``
installed). ``client="serial"`` runs in this process, without Dask. Results
are one row per run: the grid's values, then the command line's JSON keys.

The local cluster's workers are threads of this process: every run releases
the GIL, so they use every core, and they need not import the caller's main
module again, so a sweep runs from a script without an ``if __name__ ==
"__main__"`` guard, from ``python3 -c``, from standard input or a notebook
(worker processes would re-import it, and fail). A run that fails (a trace
that exists but does not parse, a heap out of memory) loses no other row: the
sweep raises :class:`SweepError`, which names each failed run's parameters
and holds every row, the failed ones with their ``error``. On a cluster of
worker processes, a task whose worker dies is run again elsewhere (Dask's
own retry): its rows come back once.

From the shell: ``python -m retype.sweep GRID.toml -o results.parquet`` (or
``retype sweep``, which runs it).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tomllib
from pathlib import Path

from . import _native

#: Batches per worker: enough to balance uneven runs, few enough that the
#: scheduler's few milliseconds per task stay small against a batch.
BATCHES_PER_WORKER = 8

STUDY_KEYS = {"workload", "seeds", "seed", "ops", "free", "policy", "layout", "arch"}
REPLAY_KEYS = {"trace", "heap", "min_time_ms"}


def _values(table, key, default):
    v = table.get(key, default)
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _refuse_unknown(table, known, kind):
    unknown = sorted(set(table) - known)
    if unknown:
        raise _native.Error(
            f"unknown key(s) {', '.join(unknown)} in [{kind}]: expected {', '.join(sorted(known))}"
        )


def _seeds(table):
    if "seed" in table and "seeds" in table:
        raise _native.Error("give seeds (a count) or seed (a list), not both")
    if "seed" in table:
        seeds = _values(table, "seed", None)
    else:
        n = table.get("seeds", 1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise _native.Error(f"seeds must be a count of seeds, 0 or more, not {n!r}")
        seeds = list(range(n))
    for s in seeds:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise _native.Error(f"a seed is a whole number, 0 or more, not {s!r}")
    return seeds


def study_points(table):
    """The grid's study runs: dicts of the axis values, each with its
    ``point`` (workload, policy, layout, arch) as the command line spells it."""
    _refuse_unknown(table, STUDY_KEYS, "study")
    policies = [p for v in _values(table, "policy", "all") for p in _native.policies(str(v))]
    layouts = _values(table, "layout", "cantrip")
    archs = _values(table, "arch", "riscv32")
    workloads = _values(table, "workload", "uniform")
    rows = []
    for w in workloads:
        if w == "uniform":
            axes = itertools.product(
                _seeds(table), _values(table, "ops", 1000), _values(table, "free", 48)
            )
            specs = [
                ({"seed": s, "ops": o, "free": f}, f"uniform:seed={s},ops={o},free={f}")
                for s, o, f in axes
            ]
        else:
            specs = [({}, str(w))]
        for (axis, spec), p, lay, a in itertools.product(specs, policies, layouts, archs):
            rows.append(
                {"workload": spec, **axis, "policy": p, "layout": str(lay), "arch": str(a)}
            )
    _check(rows)
    return rows


def _check(rows):
    """Parses one run per distinct value of each axis, so that a bad name
    fails before any task starts, with the command line's message."""
    if not rows:
        return
    first = rows[0]
    for key in ("workload", "policy", "layout", "arch"):
        for value in dict.fromkeys(r[key] for r in rows):
            r = {**first, key: value}
            _native.check_study(r["workload"], r["policy"], r["layout"], r["arch"])


def replay_points(table):
    """The grid's replays: dicts of trace, heap and min_time_ms."""
    _refuse_unknown(table, REPLAY_KEYS, "replay")
    traces = _values(table, "trace", [])
    if not traces:
        raise _native.Error("[replay] needs trace = [...], the traces to replay")
    for t in traces:
        if not Path(t).is_file():
            raise _native.Error(f"cannot read trace {t}: no such file")
    heaps = [h for v in _values(table, "heap", "all") for h in _native.heaps(str(v))]
    ms = table.get("min_time_ms", 100)
    if not isinstance(ms, int) or isinstance(ms, bool) or ms < 0:
        raise _native.Error(f"min_time_ms must be a whole number of ms, not {ms!r}")
    return [
        {"trace": str(t), "heap": h, "min_time_ms": ms} for t, h in itertools.product(traces, heaps)
    ]


def load_grid(grid):
    """A grid from a dict or a TOML file: (kind, its runs)."""
    if isinstance(grid, (str, os.PathLike)):
        path = Path(grid)
        try:
            grid = tomllib.loads(path.read_text())
        except OSError as e:
            raise _native.Error(f"cannot read grid {path}: {e.strerror}") from None
        except tomllib.TOMLDecodeError as e:
            raise _native.Error(f"grid {path}: {e}") from None
    kinds = [k for k in ("study", "replay") if k in grid]
    if len(kinds) != 1 or len(grid) != 1:
        raise _native.Error("a grid has one table: [study] or [replay]")
    kind = kinds[0]
    if not isinstance(grid[kind], dict):
        raise _native.Error(f"[{kind}] is a table of keys, not {grid[kind]!r}")
    points = study_points if kind == "study" else replay_points
    return kind, points(grid[kind])


class SweepError(_native.Error):
    """Runs of a sweep failed; ``rows`` holds every row, each failed one
    with its ``error`` and no metrics."""

    def __init__(self, message, rows):
        super().__init__(message)
        self.rows = rows


def _one(kind, r):
    """The metrics (JSON text) of run ``r``."""
    if kind == "study":
        return _native.study(r["workload"], r["policy"], r["layout"], r["arch"])[0]
    return _native.replay(r["trace"], r["heap"], r["min_time_ms"])


def run_batch(kind, rows):
    """One task: each run of ``rows`` as ``(metrics JSON text, None)``, or
    ``(None, message)`` when it failed."""
    if kind == "study":
        points = [(r["workload"], r["policy"], r["layout"], r["arch"]) for r in rows]
        try:
            return [(m, None) for m in _native.study_many(points)]
        except _native.Error:
            pass  # one of them failed: run each alone to tell which
    out = []
    for r in rows:
        try:
            out.append((_one(kind, r), None))
        except _native.Error as e:
            out.append((None, str(e)))
    return out


def local_cluster(workers=None, processes=True):
    """A Dask cluster of ``workers`` workers on this machine (its cores
    when None), one thread each: worker processes listening on the loopback
    address only (the default), or threads of this process."""
    from distributed import LocalCluster

    n = workers or os.cpu_count() or 1
    if not processes:
        # In-process workers talk through memory (Dask's inproc transport): no port.
        return LocalCluster(n_workers=n, threads_per_worker=1, processes=False, dashboard_address=None)
    return LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    )


def _batches(rows, workers, batch):
    size = batch or max(1, math.ceil(len(rows) / (workers * BATCHES_PER_WORKER)))
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def _on_dask(kind, rows, client, workers, batch):
    from distributed import Client

    own = None
    if client is None:
        own = local_cluster(workers, processes=False)
        client = Client(own)
    elif isinstance(client, str):
        client = Client(client)
    try:
        n = len(client.scheduler_info()["workers"]) or 1
        batches = _batches(rows, n, batch)
        futures = client.map(run_batch, [kind] * len(batches), batches, pure=False)
        return [m for b in client.gather(futures) for m in b]
    finally:
        if own is not None:
            client.close()
            own.close()


def sweep(grid, client=None, workers=None, batch=None):
    """Runs every combination of ``grid``'s axes: a DataFrame, one row per run
    in the grid's order.

    ``client``: None starts a local Dask cluster of ``workers`` processes
    (this machine's cores when None); a ``distributed.Client`` or a scheduler
    address uses that cluster; ``"serial"`` runs here, without Dask.
    ``batch``: runs per task (default: about BATCHES_PER_WORKER tasks per
    worker).
    """
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise _native.Error(f"batch is a number of runs per task, 1 or more, not {batch!r}")
    kind, rows = load_grid(grid)
    if client == "serial":
        results = run_batch(kind, rows)
    else:
        results = _on_dask(kind, rows, client, workers, batch)
    # pandas is imported here, not with the package (see the package's docstring).
    import pandas as pd

    failed = [(r, e) for r, (_, e) in zip(rows, results) if e is not None]
    frame = pd.DataFrame(
        [{**r, **json.loads(m)} if e is None else {**r, "error": e} for r, (m, e) in zip(rows, results)]
    )
    if failed:
        named = "; ".join(
            f"{', '.join(f'{k}={v}' for k, v in r.items())}: {e}" for r, e in failed[:3]
        )
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        raise SweepError(f"{len(failed)} of {len(rows)} runs failed: {named}{more}", frame)
    return frame


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="retype sweep", description="Run a grid of study runs or replays on Dask."
    )
    ap.add_argument("grid", help="the grid, a TOML file")
    ap.add_argument("-o", "--output", required=True, help="where the rows go: .parquet or .csv")
    ap.add_argument("--scheduler", help="a Dask scheduler's address (default: a local cluster)")
    ap.add_argument("--workers", type=int, help="local cluster size (default: this machine's cores)")
    ap.add_argument("--batch", type=int, help="runs per task (default: 8 tasks per worker)")
    ap.add_argument("--serial", action="store_true", help="run here, without Dask")
    args = ap.parse_args(argv)
    client = "serial" if args.serial else args.scheduler
    status = 0
    try:
        frame = sweep(args.grid, client=client, workers=args.workers, batch=args.batch)
    except SweepError as e:
        print(f"retype: error: {e}", file=sys.stderr)
        frame, status = e.rows, 1
    except _native.Error as e:
        print(f"retype: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    if out.suffix == ".csv":
        frame.to_csv(out, index=False)
    else:
        frame.to_parquet(out, index=False)
    print(f"{len(frame)} runs -> {out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
