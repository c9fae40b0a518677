"""Average total fragmentation against free rate, per placement policy:
1,000 seeds of seed 000's uniform workload x free rates 0-90 % x every
policy (60,000 runs), swept on a local Dask cluster, drawn with a 95 %
confidence band (mean +- 1.96 standard errors over the seeds).

    pip install ./crates/retype-py matplotlib
    python docs/examples/sweep_fragmentation.py docs/img/sweep-fragmentation.png
"""

import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import retype  # noqa: E402

GRID = {
    "study": {
        "seeds": 1000,
        "ops": 1000,
        "free": list(range(0, 100, 10)),
        "policy": "all",
    }
}


def main(out):
    start = time.perf_counter()
    rows = retype.sweep(GRID)
    secs = time.perf_counter() - start
    stats = rows.groupby(["policy", "free"])["avg_frag_total_kib"].agg(["mean", "sem"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for policy, s in stats.groupby(level="policy"):
        free = s.index.get_level_values("free")
        ax.plot(free, s["mean"], marker="o", ms=3, label=policy)
        ax.fill_between(free, s["mean"] - 1.96 * s["sem"], s["mean"] + 1.96 * s["sem"], alpha=0.25)
    ax.set_xlabel("free rate (%)")
    ax.set_ylabel("average total fragmentation (KiB)")
    ax.set_title(f"{len(rows):,} runs: 1,000 seeds x 10 free rates x {stats.index.levshape[0]} policies")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"{len(rows)} runs in {secs:.1f} s -> {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "sweep-fragmentation.png")
