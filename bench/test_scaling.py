"""bench/scaling.py rewrites docs/scaling.md from the CSVs of a run: the block written by hand
between its KEPT markers must come through unchanged, and a doc without one gets none.

usage: python3 -m pytest bench/test_scaling.py (from the repository root; scripts/test runs it)
"""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import scaling  # noqa: E402

CSV = os.path.join(ROOT, "docs", "data", "scaling-2-cores-1-2t.csv")


def rewrite(md, tmp_path):
    subprocess.run([sys.executable, "bench/scaling.py", "--command", "CMD", "--load-start", "0.1",
                    "--snmalloc", "0.7.6", "--svg", str(tmp_path / "s.svg"), "--md", str(md), CSV],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return md.read_text()


def test_the_hand_written_block_survives_a_rewrite(tmp_path):
    block = f"{scaling.KEPT[0]}\nGoals: pool-2t *not met*.\n\n- a run\n{scaling.KEPT[1]}"
    md = tmp_path / "scaling.md"
    md.write_text(f"# Thread scaling\n\n{block}\n\nold tables\n")
    text = rewrite(md, tmp_path)
    assert text.count(block) == 1
    assert "old tables" not in text
    assert text.index(block) < text.index("## Throughput, ratio to the best peer")
    # A second rewrite keeps it again, once.
    assert rewrite(md, tmp_path).count(block) == 1


def test_a_doc_without_the_block_gets_none(tmp_path):
    md = tmp_path / "scaling.md"
    md.write_text("# Thread scaling\n\nno markers here\n")
    text = rewrite(md, tmp_path)
    assert scaling.KEPT[0] not in text
    assert "no markers here" not in text
    assert "## Peak RSS, ratio to the best peer" in text
