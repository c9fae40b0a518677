"""Seed 002's RSS-against-time graphs from the seed002 bench's samples: prints the Markdown table
of docs/reproduction-002.md ("RSS over the run") and draws docs/img/seed002-rss.svg, one panel per
load and type, one line per fit (the mean over the runs of each sample), with the seed's own end
point (its mean total time and RSS) beside each line. The seed published its graphs as pictures
only; its tables give each test's end point, which is what is drawn of it.

usage: python3 bench/seed002.py seed002-rss.csv OUT_DIR
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

FITS = {"first-fit": "first", "best-fit": "best", "worst-fit": "worst"}
COLOURS = {"first-fit": "#0072B2", "best-fit": "#009E73", "worst-fit": "#D55E00"}
LOADS = ["high", "medium", "low"]
TYPES = ["int", "double", "string"]
# The seed's tables: (load, type, fit) -> (mean total RSS KB, mean total time ms), 3 runs each.
SEED = {
    ("high", "int", "first"): (8188, 4145), ("high", "int", "best"): (7376, 20060),
    ("high", "int", "worst"): (8868, 21860), ("high", "double", "first"): (7932, 11496),
    ("high", "double", "best"): (7808, 19998), ("high", "double", "worst"): (8408, 20146),
    ("high", "string", "first"): (8004, 11522), ("high", "string", "best"): (7876, 19936),
    ("high", "string", "worst"): (8476, 20552), ("medium", "int", "first"): (3752, 677),
    ("medium", "int", "best"): (3688, 3178), ("medium", "int", "worst"): (4288, 3517),
    ("medium", "double", "first"): (3716, 1875), ("medium", "double", "best"): (3848, 3209),
    ("medium", "double", "worst"): (4104, 3296), ("medium", "string", "first"): (3724, 1914),
    ("medium", "string", "best"): (3892, 3333), ("medium", "string", "worst"): (4172, 3334),
    ("low", "int", "first"): (2132, 88), ("low", "int", "best"): (1948, 414),
    ("low", "int", "worst"): (2132, 451), ("low", "double", "first"): (2132, 231),
    ("low", "double", "best"): (2128, 397), ("low", "double", "worst"): (2132, 388),
    ("low", "string", "first"): (2136, 235), ("low", "string", "best"): (2136, 418),
    ("low", "string", "worst"): (2136, 411),
}


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;")


LOAD_N = {"low": 7000, "medium": 20000, "high": 50000}
# Samples a run takes in each stage: every N/10 iterations of free-block generation (2N
# iterations: N allocations, N frees), allocation (N) and deallocation (N, and once at its end).
PER_STAGE = {"free blocks": 20, "allocation": 10, "deallocation": 11}


def check(rows):
    """Stops with the run named if its samples are not every N/10 iterations of each stage."""
    runs = defaultdict(lambda: defaultdict(list))
    for r in rows:
        runs[(r["load"], r["type"], r["heap"], r["run"])][r["stage"]].append(int(r["iteration"]))
    for key, stages in runs.items():
        every = LOAD_N[key[0]] // 10
        for stage, n in PER_STAGE.items():
            want = [k * every for k in range(n)]
            if sorted(stages.get(stage, [])) != want:
                sys.exit(f"{key}: stage {stage!r} sampled at {sorted(stages.get(stage, []))[:12]}, not every {every}")
    if not runs:
        sys.exit("no samples")


def curves(rows):
    """(load, type, heap) -> [(stage, iteration, mean ms, mean RSS KiB)] in sample order."""
    got = defaultdict(lambda: defaultdict(list))
    order = defaultdict(list)
    for r in rows:
        key = (r["load"], r["type"], r["heap"])
        point = (r["stage"], int(r["iteration"]))
        if point not in got[key]:
            order[key].append(point)
        got[key][point].append((float(r["ms"]), int(r["rss_kib"])))
    return {k: [(s, i, statistics.mean(m for m, _ in got[k][(s, i)]),
                 statistics.mean(r for _, r in got[k][(s, i)])) for s, i in order[k]]
            for k in got}


def panel(x0, y0, w, h, load, ty, series, heaps):
    """One panel: RSS (KiB) against time (ms, log scale), ours as lines, the seed's end points as rings."""
    seed = [SEED[(load, ty, FITS[hp])] for hp in heaps if (load, ty, FITS[hp]) in SEED]
    ours = [p for hp in heaps for p in series.get((load, ty, hp), [])]
    if not ours:
        return []
    t_lo = max(min(p[2] for p in ours if p[2] > 0), 0.01)
    t_hi = max([p[2] for p in ours] + [t for _, t in seed])
    r_hi = max([p[3] for p in ours] + [r for r, _ in seed]) * 1.08
    x = lambda t: x0 + (math.log10(max(t, t_lo)) - math.log10(t_lo)) / (math.log10(t_hi) - math.log10(t_lo)) * w
    y = lambda r: y0 + h - r / r_hi * h
    out = [f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>',
           f'<text x="{x0 + w / 2}" y="{y0 - 6}" text-anchor="middle">{esc(load)} load, {esc(ty)}</text>']
    step = next(s for s in (500, 1000, 2000, 5000) if r_hi / s <= 6)
    v = step
    while v < r_hi:
        out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        out.append(f'<text x="{x0 - 4}" y="{y(v) + 4:.1f}" text-anchor="end" font-size="10">{v}</text>')
        v += step
    decade = 10 ** math.floor(math.log10(t_lo))
    while decade <= t_hi:
        if decade >= t_lo:
            out.append(f'<line x1="{x(decade):.1f}" x2="{x(decade):.1f}" y1="{y0}" y2="{y0 + h}" stroke="#eee"/>')
            out.append(f'<text x="{x(decade):.1f}" y="{y0 + h + 12}" text-anchor="middle" font-size="10">{decade:g}</text>')
        decade *= 10
    for hp in heaps:
        pts = series.get((load, ty, hp))
        if not pts:
            continue
        line = " ".join(f"{x(t):.1f},{y(r):.1f}" for _, _, t, r in pts)
        out.append(f'<polyline points="{line}" fill="none" stroke="{COLOURS[hp]}" stroke-width="1.5">'
                   f'<title>ours, {esc(hp)}</title></polyline>')
        s = SEED.get((load, ty, FITS[hp]))
        if s:
            out.append(f'<circle cx="{x(s[1]):.1f}" cy="{y(s[0]):.1f}" r="4" fill="none" stroke="{COLOURS[hp]}" '
                       f'stroke-width="2"><title>seed, {FITS[hp]} fit: {s[0]} KB after {s[1]} ms</title></circle>')
    return out


def figure(series, heaps):
    pw, ph, L, T, gx, gy = 230, 150, 60, 60, 50, 50
    W, H = L + 3 * (pw + gx), T + 3 * (ph + gy) + 30
    body = []
    for i, load in enumerate(LOADS):
        for j, ty in enumerate(TYPES):
            body += panel(L + j * (pw + gx), T + i * (ph + gy), pw, ph, load, ty, series, heaps)
    body.append(f'<text transform="translate(16,{H / 2}) rotate(-90)" text-anchor="middle">resident set (KiB)</text>')
    body.append(f'<text x="{W / 2}" y="{H - 36}" text-anchor="middle">time since the start (ms, log scale)</text>')
    for k, hp in enumerate(heaps):
        lx = L + k * 190
        body.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{H - 14}" y2="{H - 14}" stroke="{COLOURS[hp]}" stroke-width="2"/>')
        body.append(f'<text x="{lx + 24}" y="{H - 10}">ours, {esc(hp)}</text>')
    lx = L + len(heaps) * 190
    body.append(f'<circle cx="{lx + 8}" cy="{H - 14}" r="4" fill="none" stroke="#333" stroke-width="2"/>')
    body.append(f'<text x="{lx + 18}" y="{H - 10}">the seed\'s end point (its tables)</text>')
    title = "Seed 002: resident set against time, sampled every N/10 iterations of each stage"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            f'font-family="sans-serif" font-size="12">\n<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="14">{esc(title)}</text>\n'
            + "\n".join(body) + "\n</svg>\n")


def main():
    with open(sys.argv[1]) as f:
        rows = list(csv.DictReader(f))
    out = sys.argv[2]
    check(rows)
    series = curves(rows)
    heaps = [h for h in FITS if any(k[2] == h for k in series)]
    runs = len({r["run"] for r in rows})
    print(f"RSS (KiB) at the end of each stage, mean of {runs} run(s); the seed's total RSS and time beside it.\n")
    print("| load | type | fit | start | free blocks | allocation | deallocation | our ms | seed RSS KB | seed ms |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for load in LOADS:
        for ty in TYPES:
            for hp in heaps:
                pts = series.get((load, ty, hp))
                if not pts:
                    continue
                # The first sample of a stage is the end of the one before.
                end_free = next((p for p in pts if p[0] == "allocation"), pts[-1])
                end_alloc = next((p for p in pts if p[0] == "deallocation"), pts[-1])
                seed_rss, seed_ms = SEED.get((load, ty, FITS[hp]), ("-", "-"))
                print(f"| {load} | {ty} | {FITS[hp]} | {pts[0][3]:.0f} | {end_free[3]:.0f} | {end_alloc[3]:.0f} "
                      f"| {pts[-1][3]:.0f} | {pts[-1][2]:.1f} | {seed_rss} | {seed_ms} |")
    with open(f"{out}/seed002-rss.svg", "w") as f:
        f.write(figure(series, heaps))


if __name__ == "__main__":
    main()
