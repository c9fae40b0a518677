#!/usr/bin/env python3
"""Turns bench/scaling.sh's CSV files into docs/scaling.md and its chart: throughput and peak
RSS per program and thread count as ratios to the best peer (each allocator's median against
the best median of the other allocators on the same machine), printed, tabled and drawn
(docs/img/scaling.svg: one row of two panels per program, a line per allocator, threads on a
log axis; the first row the geometric mean over the programs; from the machine with the most
cores when the CSVs come from several).

usage: python3 bench/scaling.py [--quick] --command CMD --load-start L [--note TEXT] --snmalloc V [--svg OUT.svg
       --md OUT.md] scaling.csv [more.csv ...]
(without --svg and --md it only prints the ratios)

The hand-written block of the doc it replaces (bench/kept.py: where the goals stand, the log of
runs) is carried over under the title.
"""
import argparse
import csv
import math
import statistics
import subprocess
import sys
from collections import defaultdict

from kept import kept

ORDER = ["glibc", "jemalloc", "mimalloc", "tcmalloc", "snmalloc", "retype"]
COLOURS = {"retype": "#0072B2", "glibc": "#D55E00", "mimalloc": "#009E73", "tcmalloc": "#CC79A7",
           "jemalloc": "#E69F00", "snmalloc": "#56B4E9"}
# What the ratio means and which way is better, per figure.
FIGURES = {"ops_per_s": ("throughput", max, "higher is better"),
           "rss_kib": ("peak RSS", min, "lower is better")}


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;")


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and not math.isnan(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def read(paths):
    """Medians per (machine, bench, threads, allocator) and figure; each machine's cores and
    repetitions per thread count; each program's command line (its last, at the most threads)."""
    runs = defaultdict(lambda: defaultdict(list))
    cores, reps, commands = {}, defaultdict(lambda: defaultdict(int)), {}
    for path in paths:
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (r["machine"], r["bench"], int(r["threads"]), r["allocator"])
                for fig in FIGURES:
                    if r[fig]:
                        runs[key][fig].append(float(r[fig]))
                cores[r["machine"]] = int(r["cores"])
                reps[r["machine"]][int(r["threads"])] = max(reps[r["machine"]][int(r["threads"])], int(r["rep"]))
                commands[r["bench"]] = r["command"]
    med = {k: {fig: statistics.median(v) for fig, v in figs.items()} for k, figs in runs.items()}
    return med, cores, reps, commands


def ratios(med):
    """Each allocator's figure divided by the best of the other allocators' at the same point."""
    out = {}
    for (machine, bench, threads, alloc), figs in med.items():
        for fig, (_, best, _) in FIGURES.items():
            peers = [m[fig] for (m2, b2, t2, a2), m in med.items()
                     if (m2, b2, t2) == (machine, bench, threads) and a2 != alloc and fig in m]
            if fig in figs and peers and best(peers) > 0:
                out[(machine, bench, threads, alloc, fig)] = figs[fig] / best(peers)
    return out


def log_axis(lo, hi, top, bottom):
    """A log2 scale from lo to hi (widened to whole powers of two around 1)."""
    lo, hi = 2 ** math.floor(math.log2(min(lo, 1))), 2 ** math.ceil(math.log2(max(hi, 1)))
    if lo == hi:
        lo, hi = lo / 2, hi * 2
    y = lambda v: bottom - (math.log2(v) - math.log2(lo)) / (math.log2(hi) - math.log2(lo)) * (bottom - top)
    ticks = []
    v = lo
    while v <= hi:
        ticks.append(v)
        v *= 2
    return y, ticks


def panel(x0, y0, w, h, title, threads, lines, cores):
    """One small plot: lines = {allocator: {threads: ratio}}, ratio 1 drawn black, the thread
    counts above `cores` shaded (throughput only: there peak RSS still means what it says)."""
    vals = [v for pts in lines.values() for v in pts.values() if v > 0]
    L, R, T, B = x0 + 44, x0 + w - 8, y0 + 22, y0 + h - 22
    body = [f'<text x="{(L + R) / 2}" y="{y0 + 14}" text-anchor="middle" font-weight="bold">{esc(title)}</text>']
    if not vals:
        body.append(f'<text x="{(L + R) / 2}" y="{(T + B) / 2}" text-anchor="middle" fill="#888">no figures</text>')
        return body
    y, ticks = log_axis(min(vals), max(vals), T, B)
    span = math.log2(threads[-1]) - math.log2(threads[0]) or 1
    x = lambda t: L + 10 + (math.log2(t) - math.log2(threads[0])) / span * (R - L - 20)
    within, over = [t for t in threads if t <= cores], [t for t in threads if t > cores]
    if over:
        x1 = (x(over[0]) + x(within[-1])) / 2 if within else L
        body.append(f'<rect x="{x1:.1f}" y="{T}" width="{R - x1:.1f}" height="{B - T}" fill="#f2f2f2">'
                    f'<title>more threads than the {cores} cores</title></rect>')
    for v in ticks:
        stroke = "#000" if v == 1 else "#ddd"
        body.append(f'<line x1="{L}" x2="{R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{stroke}"/>')
        body.append(f'<text x="{L - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for t in threads:
        body.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{B}" y2="{B + 4}" stroke="#000"/>')
        body.append(f'<text x="{x(t):.1f}" y="{B + 16}" text-anchor="middle">{t}</text>')
    for a in ORDER:
        pts = sorted((t, v) for t, v in lines.get(a, {}).items() if v > 0)
        if not pts:
            continue
        width = 3 if a == "retype" else 1.5
        body.append(f'<polyline points="{" ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)}" fill="none" '
                    f'stroke="{COLOURS[a]}" stroke-width="{width}"/>')
        for t, v in pts:
            body.append(f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" fill="{COLOURS[a]}">'
                        f'<title>{esc(a)}, {t} threads: {v:.2f}</title></circle>')
    return body


def chart(machine, cores, benches, threads, rat):
    """Two panels (throughput, peak RSS) per row; the first row the geomean over programs."""
    W, PW, PH, TOP = 760, 370, 170, 70
    rows = ["geomean"] + benches
    H = TOP + PH * len(rows) + 40
    body = []
    for i, b in enumerate(rows):
        for k, (fig, (name, _, better)) in enumerate(FIGURES.items()):
            lines = defaultdict(dict)
            for a in ORDER:
                for t in threads:
                    if b == "geomean":
                        v = geomean([rat.get((machine, bb, t, a, fig), float("nan")) for bb in benches])
                    else:
                        v = rat.get((machine, b, t, a, fig), float("nan"))
                    if not math.isnan(v):
                        lines[a][t] = v
            body += panel(10 + k * PW, TOP + i * PH, PW, PH, f"{b}: {name} ÷ best peer ({better})",
                          threads, lines, cores if fig == "ops_per_s" else math.inf)
    for i, a in enumerate(ORDER):
        body.append(f'<rect x="{40 + i * 120}" y="{TOP - 14}" width="12" height="12" fill="{COLOURS[a]}"/>')
        body.append(f'<text x="{56 + i * 120}" y="{TOP - 4}">{esc(a)}</text>')
    body.append(f'<text x="{W / 2}" y="{H - 18}" text-anchor="middle">threads (log scale; shaded: more threads '
                f'than cores, where throughput is time slicing); ratios on a log scale</text>')
    title = f"Thread scaling: ratio to the best peer at each thread count ({machine})"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            f'font-family="sans-serif" font-size="11">\n<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="{W / 2}" y="20" text-anchor="middle" font-size="13">{esc(title)}</text>\n'
            f'<text x="{W / 2}" y="38" text-anchor="middle" fill="#555">each allocator\'s median divided by '
            f'the best median among the other five; 1 = level with the best of the others</text>\n'
            + "\n".join(body) + "\n</svg>\n")


def versions():
    """The Debian packages the peers came from (on the machine that writes the doc)."""
    pkgs = {"glibc": "libc6", "jemalloc": "libjemalloc2", "mimalloc": "libmimalloc2.0", "tcmalloc": "libtcmalloc-minimal4"}
    got = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version}\n", *pkgs.values()],
                         capture_output=True, text=True).stdout.split("\n")
    found = dict(line.split(" ", 1) for line in got if " " in line)
    return ", ".join(f"{a} {found.get(p, '?')}" for a, p in pkgs.items())


def repetitions(per_threads):
    """"repetitions 3", or "repetitions 3 (16 threads), 1 (4, 8, 32 threads)" where they differ."""
    by_count = defaultdict(list)
    for threads, n in sorted(per_threads.items()):
        by_count[n].append(str(threads))
    if len(by_count) == 1:
        return f"repetitions {next(iter(by_count))}"
    return "repetitions " + ", ".join(f"{n} ({', '.join(ts)} threads)" for n, ts in sorted(by_count.items(), reverse=True))


def doc(args, med, rat, cores, reps, commands, chart_machine, hand):
    """docs/scaling.md's lines: the hand-written block, what ran where, how to read it, the chart,
    the two tables."""
    machines = list(dict.fromkeys(k[0] for k in med))
    benches = list(dict.fromkeys(k[1] for k in med))
    threads = sorted({k[2] for k in med})
    load_end = " ".join(open("/proc/loadavg").read().split()[:3])
    out = []
    w = out.append
    w("# Thread scaling\n")
    out.extend(hand)
    w("## How to read the figures\n")
    smallest = min(cores[m] for m in machines)
    top = []
    if args.quick:
        where = f"a {smallest}-core machine" if len(machines) == 1 else "the machines"
        top.append(f"**Smoke run, not a measurement:** `QUICK=1` (tiny parameters, one repetition, "
                   f"{' and '.join(map(str, threads))} threads) on {where} listed below. It shows that the "
                   "script, the six allocators and the report work end to end; its ratios are noise-dominated.")
    if smallest < 16:
        top.append(f"The 16-thread figures need a machine with 16 cores (32 for 32 threads); "
                   f"{'this one has' if len(machines) == 1 else 'the smallest here has'} {smallest}.")
    if args.note:
        top.append(args.note)
    w(" ".join(top) + "\n")
    w(f"Command: `{args.command}`. Load average at the start {args.load_start}, at the end {load_end}.\n")
    w("Machines (every figure below names the one it came from):\n")
    for i, m in enumerate(machines):
        w(f"- M{i + 1}: {m}, {repetitions(reps[m])}")
    w("")
    w("**Where threads outnumber cores** (figures marked ⁺): peak RSS still means what it says, since "
      "per-thread heaps and caches are what grows with the thread count, whether or not the threads run "
      "at once. Throughput does not: the threads take turns on the cores, so it measures time slicing "
      "(and how an allocator's locks behave when their holder is descheduled), not parallel scaling.\n")
    w("Each figure is the median over the repetitions, allocators alternated run by run (glibc, jemalloc, "
      "mimalloc, tcmalloc, snmalloc, retype, then again), all through `LD_PRELOAD`: Debian's packages "
      f"({versions()}), snmalloc built by `bench/snmalloc.sh` from the sources that the Rust crate "
      f"snmalloc-sys {args.snmalloc} vendors (Debian does not package it), retype-malloc from this tree. **Ratio to the best peer**: "
      "an allocator's median divided by the best median among the other five at the same program, thread count "
      "and machine; throughput (operations per second as the program counts them) above 1 beats every other "
      "allocator, peak RSS (GNU time's `%M`) below 1 does. Every thread does the same work at every thread "
      "count (kmeans: the same points shared among more threads), so ideal scaling is a throughput that grows "
      "with the threads; the ratios compare allocators at each count.\n")
    if len(machines) > 1:
        w(f"The chart draws M{machines.index(chart_machine) + 1}'s figures, the machine with the most cores.\n")
    w("![throughput and peak RSS against threads, as ratios to the best peer](img/scaling.svg)\n")
    for fig, (name, best, better) in FIGURES.items():
        w(f"## {name[0].upper() + name[1:]}, ratio to the best peer ({better})\n")
        unit = "best, M ops/s" if fig == "ops_per_s" else "lowest, MiB"
        w("| program | threads | machine | " + " | ".join(ORDER) + f" | {unit} |")
        w("|---" * (len(ORDER) + 4) + "|")
        for b in benches:
            for t in threads:
                for i, m in enumerate(machines):
                    here = [med[k][fig] for k in med if k[:3] == (m, b, t) and fig in med[k]]
                    if not here:
                        continue
                    over = "⁺" if t > cores[m] else ""
                    cells = ["%.2f" % rat[(m, b, t, a, fig)] if (m, b, t, a, fig) in rat else "–" for a in ORDER]
                    scale = 1e6 if fig == "ops_per_s" else 1024
                    w(f"| {b} | {t}{over} | M{i + 1} | " + " | ".join(cells) + f" | {best(here) / scale:.2f} |")
        w("")
    w("## Programs\n")
    w("Clean-room C programs in `bench/src/` (each file's header comment says what pattern it models): "
      "`larson` (a server handing its objects to the threads that replace it), `xmalloc` (N producers and N "
      "consumers; at 1 thread it runs one pair, at T threads T/2 pairs), `mstress` (threads created and "
      "destroyed together each phase), `rptest`, `glibc_thread`, `churn`, `alloc_test` (random size mixes, "
      "rptest with cross-thread frees), `cache` (allocator-induced false sharing), `kmeans`, `large` "
      "(5–25 MB blocks), and two written for this sweep: `pool` (one pool of random-size objects shared by "
      "all threads, so most frees are remote) and `transient` (threads that come and go, staggered, handing "
      "blocks to their successors). Command lines at the largest thread count:\n")
    for b in benches:
        w(f"- {b}: `{commands[b]}`")
    w("\nRaw data: " + ", ".join(f"`{p}`" for p in args.csv) + ".")
    return out


def print_ratios(med, rat):
    """The ratios as plain text, for the terminal that ran the sweep."""
    machines = list(dict.fromkeys(k[0] for k in med))
    benches = list(dict.fromkeys(k[1] for k in med))
    keys = sorted({k[:3] for k in med}, key=lambda k: (machines.index(k[0]), benches.index(k[1]), k[2]))
    for fig, (name, _, better) in FIGURES.items():
        print(f"{name} ÷ best peer ({better})")
        print(f"{'program':14} {'thr':>3} {'':3}" + " ".join(f"{a:>9}" for a in ORDER))
        for m, b, t in keys:
            cells = [f"{rat[(m, b, t, a, fig)]:9.2f}" if (m, b, t, a, fig) in rat else f"{'-':>9}" for a in ORDER]
            print(f"{b:14} {t:3} M{machines.index(m) + 1:<2}" + " ".join(cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--command", required=True)
    ap.add_argument("--load-start", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("--snmalloc", required=True, help="the snmalloc-sys version bench/snmalloc.sh built")
    ap.add_argument("--quick", action="store_true", help="the figures come from QUICK=1: say so first")
    ap.add_argument("--svg", help="the chart to write (with --md)")
    ap.add_argument("--md", help="the doc to write (with --svg)")
    ap.add_argument("csv", nargs="+")
    args = ap.parse_args()
    if (args.svg is None) != (args.md is None):
        ap.error("--svg and --md go together")
    med, cores, reps, commands = read(args.csv)
    rat = ratios(med)
    print_ratios(med, rat)
    if args.md is None:
        return
    chart_machine = max(cores, key=cores.get)
    hand = kept(args.md)
    with open(args.md, "w") as f:
        f.write("\n".join(doc(args, med, rat, cores, reps, commands, chart_machine, hand)) + "\n")
    benches = list(dict.fromkeys(k[1] for k in med))
    threads = sorted({k[2] for k in med})
    with open(args.svg, "w") as f:
        f.write(chart(chart_machine, cores[chart_machine], benches, threads, rat))
    print(f"wrote {args.md} and {args.svg}", file=sys.stderr)


if __name__ == "__main__":
    main()
