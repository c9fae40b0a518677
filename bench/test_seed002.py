"""The seed002 bench's RSS series and bench/seed002.py: a real low-load run with
--series samples every N/10 iterations of each stage (20 in the free-block
stage's 2N iterations, 10 in allocation, 11 in deallocation with its end), each
a measured resident set, and the script reads that CSV into its table and figure.

usage: python3 -m pytest bench/test_seed002.py (from the repository root; scripts/test runs it)
"""
import csv
import os
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 7000  # the low load
HEAPS = ["first-fit", "best-fit"]


def run_series(tmp_path):
    # The string runs read Debian's word list.
    subprocess.run(["bash", "scripts/install-deps", "wamerican"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    path = tmp_path / "series.csv"
    subprocess.run(["cargo", "bench", "-q", "-p", "retype", "--bench", "seed002", "--",
                    "--loads", "low", "--repeats", "2", "--heaps", ",".join(HEAPS),
                    "--series", str(path)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    with open(path) as f:
        return list(csv.DictReader(f))


def test_series_is_sampled_every_tenth_and_read_by_the_script(tmp_path):
    rows = run_series(tmp_path)
    runs = defaultdict(list)
    for r in rows:
        runs[(r["type"], r["heap"], r["run"])].append(r)
    assert set(runs) == {(t, h, str(k)) for t in ["int", "double", "string"] for h in HEAPS
                         for k in range(2)}
    step = N // 10
    for key, samples in runs.items():
        by_stage = defaultdict(list)
        for s in samples:
            assert s["load"] == "low"
            by_stage[s["stage"]].append(int(s["iteration"]))
        assert by_stage == {"free blocks": list(range(0, 2 * N, step)),
                            "allocation": list(range(0, N, step)),
                            "deallocation": list(range(0, N + 1, step))}, key
        ms = [float(s["ms"]) for s in samples]
        assert ms == sorted(ms), key
        rss = [int(s["rss_kib"]) for s in samples]
        assert all(r > 0 for r in rss), key
        heap = [int(s["heap_bytes"]) for s in samples]
        # The heap grows only in the free-block stage, as the guards and holes are made.
        assert heap[0] < heap[19] == heap[-1], key

    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "seed002.py"),
                          str(tmp_path / "series.csv"), str(tmp_path)],
                         check=True, capture_output=True, text=True).stdout
    table = [l for l in out.splitlines() if l.startswith("| low |")]
    assert len(table) == 3 * len(HEAPS)
    assert "mean of 2 run(s)" in out
    svg = (tmp_path / "seed002-rss.svg").read_text()
    assert svg.count("<polyline") == 3 * len(HEAPS)
    # The seed's end point beside each of our lines.
    assert svg.count("<title>seed,") == 3 * len(HEAPS)
