"""bench/scaling.py and bench/report.py rewrite docs/scaling.md and docs/benchmarks.md from
the CSVs of a run: the block written by hand between the KEPT markers (bench/kept.py) must
come through unchanged, once, and a doc without one gets none.

usage: python3 -m pytest bench/test_kept.py (from the repository root; scripts/test runs it)
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import kept  # noqa: E402

BLOCK = f"{kept.KEPT[0]}\n## Since the run\n\nGoals: pool-2t *not met*.\n\n- a run\n{kept.KEPT[1]}"


def scaling(md, tmp_path):
    """bench/scaling.py over a CSV of a real run, rewriting `md`."""
    csv = os.path.join(ROOT, "docs", "data", "scaling-2-cores-1-2t.csv")
    subprocess.run([sys.executable, "bench/scaling.py", "--command", "CMD", "--load-start", "0.1",
                    "--snmalloc", "0.7.6", "--svg", str(tmp_path / "s.svg"), "--md", str(md), csv],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return md.read_text()


def report(md, tmp_path):
    """bench/report.py over a small made-up run (two programs, every allocator), as bench/run.sh
    calls it: the new doc written aside, then moved over `md`."""
    results = tmp_path / "results.csv"
    rows = ["bench,allocator,rep,wall_s,rss_kib,ops_per_s"]
    for i, bench in enumerate(["churn-1t-1k", "larson-2t"]):
        for j, alloc in enumerate(["retype", "mimalloc", "glibc", "jemalloc", "tcmalloc", "retype-hardened"]):
            rows.append(f"{bench},{alloc},1,{0.1 + 0.01 * (i + j)},{2048 + 64 * j},{1e8 / (1 + j)}")
    results.write_text("\n".join(rows) + "\n")
    hp = tmp_path / "hugepages.csv"
    hp.write_text("setting,rep,wall_s,rss_kib,ops_per_s\nalways,1,1.0,100,1\ndefault,1,1.1,100,1\noff,1,1.2,100,1\n")
    heap = tmp_path / "hugeheap.txt"
    heap.write_text("retype heap_kib=131072 anon_huge_kib=131072 rss_kib=140000 huge_share=1.0\n")
    new = subprocess.run([sys.executable, "bench/report.py", str(results), str(hp), str(heap), "1", str(md)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    md.write_text(new)
    return new


# Each doc: how it is rewritten, its title, and the two headings the block lies between
# (None: the start or the end of the doc).
DOCS = {
    "scaling.md": (scaling, "# Thread scaling", None, "## Throughput, ratio to the best peer"),
    "benchmarks.md": (report, "# Allocator benchmarks", "## Goals (issue 5)", None),
}


@pytest.mark.parametrize("name", DOCS)
def test_the_hand_written_block_survives_rewrites(name, tmp_path):
    rewrite, title, after, before = DOCS[name]
    md = tmp_path / name
    md.write_text(f"{title}\n\nold tables\n\n{BLOCK}\n")
    text = rewrite(md, tmp_path)
    assert text.count(BLOCK) == 1
    assert "old tables" not in text
    if after:
        assert text.index(after) < text.index(BLOCK)
    if before:
        assert text.index(BLOCK) < text.index(before)
    assert rewrite(md, tmp_path).count(BLOCK) == 1


def test_a_doc_without_the_block_gets_none(tmp_path):
    for name, rewrite in (("scaling.md", scaling), ("benchmarks.md", report)):
        md = tmp_path / name
        md.write_text("# A doc\n\nno markers here\n")
        text = rewrite(md, tmp_path)
        assert kept.KEPT[0] not in text
        assert "no markers here" not in text
        assert "relative to mimalloc" in text or "ratio to the best peer" in text
