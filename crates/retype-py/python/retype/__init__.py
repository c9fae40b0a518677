"""retype from Python: seed 000's memory-manager study, heap replays and
traces, with the figures and JSON keys of the ``retype`` command line, and
study sweeps fanned out with Dask (:func:`sweep`). ``read_trace(path,
series=True)`` adds a recording's RSS samples and mapping calls over time.

    import retype
    m = retype.study("uniform:seed=1,ops=1000,free=48", "best-fit")
    print(m["peak_frag_total_kib"])

Under ``retype record``, :func:`mark` names the phases of a recording, and
the pytest plugin (:mod:`retype.pytest_plugin`) makes each test one, with
per-test native memory limits.

NumPy and pandas are imported when first used: the pytest plugin imports
this package in every pytest session.
"""

from __future__ import annotations

import json
from pathlib import Path

from . import _native
from ._native import Error
from .recorder import mark
from .sweep import SweepError, sweep

__all__ = ["Error", "SweepError", "mark", "read_trace", "replay", "study", "sweep"]


def study(workload, policy, layout=None, arch=None, series=False):
    """One workload under one policy, as ``retype study --json`` runs it.

    ``workload``, ``policy``, ``layout`` and ``arch`` are spelled as the
    command line's flags (``uniform:seed=S,ops=N,free=F``, ``best-fit``,
    ``cantrip``, ``riscv32``). Returns the metrics as a dict with the command
    line's keys; with ``series=True``, a pair (metrics, DataFrame of the
    per-request series, the columns of ``--csv``).
    """
    import pandas as pd

    text, columns = _native.study(workload, policy, layout, arch, series)
    metrics = json.loads(text)
    if not series:
        return metrics
    frame = pd.DataFrame(columns)
    frame["outcome"] = frame["outcome"].astype("category")
    return metrics, frame


def replay(trace, heap, min_time_ms=None):
    """One trace on one heap, as ``retype replay TRACE --heap HEAP --json``:
    the row as a dict with the command line's keys. ``min_time_ms`` is the
    least time spent timing it (the command line's 100 when left out)."""
    return json.loads(_native.replay(str(Path(trace)), heap, min_time_ms))


def read_trace(path, series=False):
    """A trace's events as columns, and its summary.

    Returns (events, info): ``events`` is a dict of NumPy arrays, one entry
    per event (``op`` as names, ``thread``, ``time_ns``, ``latency_ns``,
    ``size``, ``align``, ``ptr``, ``ret``, ``descheduled``), ready for
    ``pd.DataFrame``; ``latency_ns`` is 0 where it was not measured (a full
    recording measures a random 1 call in ``latency_every``, 64 by default);
    ``info`` is ``retype trace info --json`` as a dict. ``info["recording"]``
    says which kind of recording it read: ``"full"`` (every call),
    ``"sampled"`` (``info["sample_bytes"]`` apart on average: the events are
    the sampled calls, and info's bytes, blocks, peak and leaks are unbiased
    estimates) or ``"aggregate"`` (no events: the columns are empty, and
    ``info["counted"]`` holds the counters' sums).

    With ``series=True``, returns (events, info, series): ``series["rss"]``
    holds the RSS samples the recorder took (``time_ns``, ``rss_bytes``,
    ``segment``) and ``series["mappings"]`` the program's own mapping calls
    (``op`` as names: ``mmap``, ``munmap``, ``mremap``, ``brk``; ``thread``,
    ``time_ns``, ``addr``, ``len``, ``old_addr``, ``old_len``, ``prot``,
    ``flags``, ``segment``; a brk's ``addr`` is the break after it and
    ``old_addr`` the one before), each a dict of NumPy arrays in file order.
    Times are on the events' clock (``retype trace timeline --json`` counts
    them from the first event).
    """
    import numpy as np

    columns, op_names, info, rss, mappings, map_names = _native.read_trace(str(Path(path)))
    columns["op"] = np.asarray(op_names)[columns["op"]]
    if not series:
        return columns, json.loads(info)
    mappings["op"] = np.asarray(map_names)[mappings["op"]]
    return columns, json.loads(info), {"rss": rss, "mappings": mappings}
