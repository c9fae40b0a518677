"""Seed 004's figures from bench/seed004.sh's data: prints the Markdown tables of
docs/reproduction-004.md and draws Figure 1 (percentage difference in wall time from jemalloc
per benchmark, grouped bars) and Figure 2 (the same for k-means against the number of points)
as SVG files.

usage: python3 bench/seed004.py seed004.csv seed004-huge.csv OUT_DIR
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

BASE = "jemalloc"
COLOURS = {"retype": "#0072B2", "glibc": "#D55E00", "mimalloc": "#009E73", "tcmalloc": "#CC79A7"}


def read(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def medians(rows, key):
    got = defaultdict(list)
    for r in rows:
        if r.get(key, "") not in ("", None):
            got[(r["bench"], r["allocator"])].append(float(r[key]))
    return {k: statistics.median(v) for k, v in got.items()}, got


def pct(x, base):
    return 100.0 * (x - base) / base


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;")


def axis_y(lo, hi, top, bottom, left, right, label):
    """Horizontal grid lines and labels every `step` per cent; returns the scale."""
    span = hi - lo
    step = next(s for s in (1, 2, 5, 10, 20, 25, 50, 100, 200, 500, 1000) if span / s <= 8)
    y = lambda v: bottom - (v - lo) / span * (bottom - top)
    out = []
    v = math.ceil(lo / step) * step
    while v <= hi:
        w = "#000" if v == 0 else "#ddd"
        out.append(f'<line x1="{left}" x2="{right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{w}"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    out.append(f'<text transform="translate(14,{(top + bottom) / 2}) rotate(-90)" text-anchor="middle">{esc(label)}</text>')
    return y, out


def legend(names, x, y):
    out = []
    for i, n in enumerate(names):
        out.append(f'<rect x="{x + i * 110}" y="{y - 10}" width="12" height="12" fill="{COLOURS[n]}"/>')
        out.append(f'<text x="{x + i * 110 + 16}" y="{y}">{esc(n)}</text>')
    return out


def svg(width, height, title, body):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="14">{esc(title)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")


def figure1(benches, others, diff):
    W, H, L, R, T, B = 760, 380, 60, 20, 50, 320
    vals = [diff[(b, a)] for b in benches for a in others] + [0.0]
    y, body = axis_y(min(vals) * 1.1 - 1, max(vals) * 1.1 + 1, T, B, L, W - R, f"wall time vs {BASE} (%)")
    step = (W - L - R) / len(benches)
    bw = step * 0.8 / len(others)
    for i, b in enumerate(benches):
        for k, a in enumerate(others):
            v = diff[(b, a)]
            x = L + i * step + step * 0.1 + k * bw
            top, h = (y(v), y(0) - y(v)) if v >= 0 else (y(0), y(v) - y(0))
            body.append(f'<rect x="{x:.1f}" y="{top:.1f}" width="{bw * 0.9:.1f}" height="{max(h, 0.5):.1f}" '
                        f'fill="{COLOURS[a]}"><title>{esc(a)}, {esc(b)}: {v:+.1f} %</title></rect>')
        body.append(f'<text x="{L + (i + 0.5) * step:.1f}" y="{B + 18}" text-anchor="middle">{esc(b)}</text>')
    body += legend(others, L, H - 12)
    return svg(W, H, f"Figure 1: wall time, percentage difference from {BASE} (lower is faster)", body)


def figure2(points, others, diff):
    W, H, L, R, T, B = 760, 380, 60, 20, 50, 320
    vals = [diff[(p, a)] for p in points for a in others] + [0.0]
    y, body = axis_y(min(vals) * 1.1 - 1, max(vals) * 1.1 + 1, T, B, L, W - R, f"wall time vs {BASE} (%)")
    lx = lambda p: L + (math.log(p) - math.log(points[0])) / (math.log(points[-1]) - math.log(points[0]) or 1) * (W - L - R - 20) + 10
    last = -1e9
    for p in points:  # labels that would overlap the one before are left out
        if lx(p) - last >= 55:
            body.append(f'<text x="{lx(p):.1f}" y="{B + 18}" text-anchor="middle">{p}</text>')
            last = lx(p)
    body.append(f'<text x="{(L + W - R) / 2}" y="{B + 36}" text-anchor="middle">points (k-means, 100 clusters, 40 dimensions; log scale)</text>')
    for a in others:
        pts = " ".join(f"{lx(p):.1f},{y(diff[(p, a)]):.1f}" for p in points)
        body.append(f'<polyline points="{pts}" fill="none" stroke="{COLOURS[a]}" stroke-width="2"/>')
        for p in points:
            body.append(f'<circle cx="{lx(p):.1f}" cy="{y(diff[(p, a)]):.1f}" r="3" fill="{COLOURS[a]}">'
                        f'<title>{esc(a)}, {p} points: {diff[(p, a)]:+.1f} %</title></circle>')
    body += legend(others, L, H - 12)
    return svg(W, H, f"Figure 2: k-means, percentage difference from {BASE}", body)


def main():
    rows, huge_rows, out = read(sys.argv[1]), read(sys.argv[2]), sys.argv[3]
    allocators = list(dict.fromkeys(r["allocator"] for r in rows))
    others = [a for a in allocators if a != BASE]
    reps = max(int(r["rep"]) for r in rows)
    fig1 = [r for r in rows if r["figure"] == "1"]
    fig2 = [r for r in rows if r["figure"] == "2"]
    wall, runs = medians(rows, "wall_s")
    share, _ = medians(rows, "list_huge_share")
    list_kib, _ = medians(rows, "list_kib")
    walk, walks = medians(rows, "walk_s")
    benches = list(dict.fromkeys(r["bench"] for r in fig1))
    diff1 = {(b, a): pct(wall[(b, a)], wall[(b, BASE)]) for b in benches for a in others}

    print(f"### Figure 1: wall time per benchmark (median of {reps}), and its difference from {BASE}\n")
    print("| benchmark | " + " | ".join(allocators) + " |")
    print("|---" * (len(allocators) + 1) + "|")
    for b in benches:
        cells = []
        for a in allocators:
            lo, hi = min(runs[(b, a)]), max(runs[(b, a)])
            d = "" if a == BASE else f" ({diff1[(b, a)]:+.1f} %)"
            cells.append(f"{wall[(b, a)]:.3f} s{d} [{lo:.2f}–{hi:.2f}]")
        print(f"| {b} | " + " | ".join(cells) + " |")
    print()

    print("### Huge pages (peak AnonHugePages ÷ peak Rss, sampled every 20 ms; memaccess: share of its largest list)\n")
    peak = {(r["bench"], r["allocator"]): (int(r["peak_anon_huge_kib"]), int(r["peak_rss_kib"])) for r in huge_rows}
    print("| benchmark | " + " | ".join(allocators) + " |")
    print("|---" * (len(allocators) + 1) + "|")
    for b in benches:
        cells = []
        for a in allocators:
            h, r = peak.get((b, a), (0, 0))
            c = f"{100.0 * h / r:.0f} % of {r / 1024:.0f} MiB" if r else "-"
            if (b, a) in share:
                c += f"; list {100.0 * share[(b, a)]:.0f} %"
            cells.append(c)
        print(f"| {b} | " + " | ".join(cells) + " |")
    print()

    walked = [b for b in benches if (b, BASE) in walk]
    if walked:
        print(f"### memaccess: the walks alone (median of {reps}; range), and their difference from {BASE}\n")
        print("| benchmark | " + " | ".join(allocators) + " |")
        print("|---" * (len(allocators) + 1) + "|")
        for b in walked:
            cells = []
            for a in allocators:
                d = "" if a == BASE else f" ({pct(walk[(b, a)], walk[(b, BASE)]):+.1f} %)"
                cells.append(f"{walk[(b, a)]:.3f} s{d} [{min(walks[(b, a)]):.2f}–{max(walks[(b, a)]):.2f}]")
            print(f"| {b} | " + " | ".join(cells) + " |")
        print()

    if fig2:
        points = sorted({int(r["bench"].split("-")[1]) for r in fig2})
        key = lambda p: f"kmeans-{p}"
        diff2 = {(p, a): pct(wall[(key(p), a)], wall[(key(p), BASE)]) for p in points for a in others}
        print(f"### Figure 2: k-means against the number of points (median of {reps}), difference from {BASE}\n")
        print(f"| points | {BASE} wall (s) | " + " | ".join(others) + " |")
        print("|---" * (len(others) + 2) + "|")
        for p in points:
            print(f"| {p} | {wall[(key(p), BASE)]:.3f} | " + " | ".join(f"{diff2[(p, a)]:+.1f} %" for a in others) + " |")
        print()
        with open(f"{out}/seed004-fig2.svg", "w") as f:
            f.write(figure2(points, others, diff2))

    print("### Goal: memory-access benchmark, working set of 256 MiB or more\n")
    for b in (b for b in benches if b.startswith("memaccess")):
        ratio = wall[(b, "retype")] / wall[(b, BASE)]
        s = share.get((b, "retype"), 0.0)
        mib = list_kib.get((b, "retype"), 0) / 1024
        met = ratio <= 0.8 and s >= 0.9 and mib >= 256
        print(f"- {b}, largest list {mib:.0f} MiB (goal ≥ 256): retype-malloc {ratio:.2f}× jemalloc's wall time "
              f"(goal ≤ 0.80), {100 * s:.0f} % of the list in huge pages (goal ≥ 90 %): {'met' if met else 'not met'}")
    with open(f"{out}/seed004-fig1.svg", "w") as f:
        f.write(figure1(benches, others, diff1))


if __name__ == "__main__":
    main()
