#!/usr/bin/python3
"""Plots of the studies with every repeat drawn, not only the median.

  tools/plot_spread.py sweep docs/sweeps/bibtex/sweep.json -o docs/sweeps/bibtex/sweep.png
  tools/plot_spread.py straggler docs/sweeps/straggler/runs.csv -o docs/sweeps/straggler/spread.png \
      --target bibtex='P@1 0.55' --target a9a='accuracy 0.84'

sweep      a staleness sweep's sweep.json (tools/staleness_sweep.py). Top:
           for each bound s, the seconds to the target and the final metric
           of every run (dots) and their median (a bar); a run that never
           reached the target is drawn at the top edge as a cross. Below:
           one small panel per bound with every run's metric against
           training time, so the runs of one bound are seen together and
           the bounds do not hide each other.
straggler  a straggler study's runs.csv (tools/straggler_study.py): one row
           of panels per (dataset, slowdown), the seconds per epoch and the
           seconds to the target of every finished run of each mode (dots)
           and their median (a bar).

staleness_sweep.py and straggler_study.py draw the same figures after a
run; this tool redraws them from the files they wrote. Needs matplotlib
(Debian's python3-matplotlib, which scripts/setup.sh installs); the data
functions (runs_of_sweep, runs_of_study, median) need nothing.
"""
import argparse
import csv
import json
import math
import os
import sys


def median(xs):
    """The median of the finite and infinite numbers in xs (None skipped);
    None when there are none."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def seconds_to(curve, target):
    """Training seconds at the first point at or above target; None if never."""
    for t, v in curve:
        if v >= target:
            return t
    return None


def runs_of_sweep(sweep):
    """{bound: [{"seconds_to_target", "final", "curve"}]} from a sweep.json.
    Per-run values are taken from its "runs" lists where it has them, else
    from each run's curve (the last evaluation is the final metric)."""
    out = {}
    per_run = sweep.get("runs", {})
    for s, curves in sweep["curves"].items():
        runs = []
        for i, curve in enumerate(curves):
            given = per_run.get(s, [])[i] if i < len(per_run.get(s, [])) else {}
            runs.append({
                "seconds_to_target": given.get("seconds_to_target", seconds_to(curve, sweep["target"])),
                "final": given.get("final", curve[-1][1] if curve else None),
                "curve": curve,
            })
        out[s] = runs
    return out


def _num(x):
    if x in (None, ""):
        return None
    v = float(x)
    return v


def runs_of_study(rows):
    """{(dataset, slowdown): {mode: [{"epoch_s", "time_to_target", "final"}]}}
    from the rows of a straggler study's runs.csv (finished runs only; a
    time to target of inf means the run never reached it). Modes keep the
    order of their first appearance."""
    out = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        key = (r["dataset"], float(r["slowdown"]))
        out.setdefault(key, {}).setdefault(r["mode"], []).append({
            "epoch_s": _num(r["epoch_s"]),
            "time_to_target": _num(r["time_to_target"]),
            "final": _num(r["final"]),
        })
    return out


def read_study(path):
    with open(path, newline="") as f:
        return runs_of_study(list(csv.DictReader(f)))


def _spread(ax, labels, values, ylabel):
    """Dots for every run of each label, a bar at the median; infinite or
    missing values drawn as crosses at the top of the axis."""
    finite = [v for vs in values for v in vs if v is not None and math.isfinite(v)]
    top = max(finite) * 1.15 if finite else 1.0
    for i, vs in enumerate(values):
        n = len(vs)
        for j, v in enumerate(vs):
            x = i + (j - (n - 1) / 2) * (0.5 / max(n, 2))
            if v is None or not math.isfinite(v):
                ax.plot(x, top, "x", color="tab:red", ms=6)
            else:
                ax.plot(x, v, "o", color="tab:blue", ms=4, alpha=0.8)
        m = median(vs)
        if m is not None and math.isfinite(m):
            ax.plot([i - 0.3, i + 0.3], [m, m], color="black", lw=2)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_ylim(0, top * 1.05)
    ax.grid(axis="y", alpha=0.3)


def draw_sweep(plt, sweep, path):
    runs = runs_of_sweep(sweep)
    bounds = list(runs)
    metric, target = sweep["metric"], sweep["target"]
    fig = plt.figure(figsize=(10, 7.5))
    gs = fig.add_gridspec(3, 6, hspace=0.55, wspace=0.6)
    labels = ["∞" if s == "inf" else s for s in bounds]
    ax = fig.add_subplot(gs[0, 0:3])
    _spread(ax, labels, [[r["seconds_to_target"] for r in runs[s]] for s in bounds],
            f"seconds to {metric} ≥ {target:g}")
    ax.set_xlabel("staleness bound s", fontsize=8)
    ax = fig.add_subplot(gs[0, 3:6])
    _spread(ax, labels, [[r["final"] for r in runs[s]] for s in bounds], f"final {metric}")
    finals = [r["final"] for s in bounds for r in runs[s] if r["final"] is not None]
    if finals:
        lo, hi = min(finals), max(finals)
        pad = max(0.005, (hi - lo) * 0.5)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("staleness bound s", fontsize=8)
    tmax = max((t for s in bounds for r in runs[s] for t, _ in r["curve"]), default=1.0)
    vals = [v for s in bounds for r in runs[s] for _, v in r["curve"]]
    for k, s in enumerate(bounds):
        ax = fig.add_subplot(gs[1 + k // 3, 2 * (k % 3):2 * (k % 3) + 2])
        for j, r in enumerate(runs[s]):
            pts = r["curve"]
            ax.plot([t for t, _ in pts], [v for _, v in pts], marker="o", ms=2.5, lw=1,
                    label=f"run {j + 1}")
        ax.axhline(target, color="gray", ls="--", lw=0.8)
        ax.set_title(f"s = {labels[k]}: {len(runs[s])} runs", fontsize=8)
        ax.set_xlim(0, tmax * 1.05)
        if vals:
            ax.set_ylim(min(vals) - 0.01, max(vals) + 0.01)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if k % 3 == 0:
            ax.set_ylabel(metric, fontsize=8)
        if k // 3 == 1 or k + 3 >= len(bounds):
            ax.set_xlabel("training time (s)", fontsize=8)
    title = f"{os.path.basename(sweep['config'])}: every run per bound"
    if sweep.get("slowdown", 1) > 1:
        title += f", one worker slowed {sweep['slowdown']:g}x"
    fig.suptitle(title + " (dots: runs; bars: medians)", fontsize=10)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def draw_straggler(plt, groups, path, targets=None):
    keys = sorted(groups, key=lambda k: (k[0], k[1]))
    fig, axes = plt.subplots(len(keys), 2, figsize=(10, 2.6 * len(keys)), squeeze=False)
    for row, key in enumerate(keys):
        modes = list(groups[key])
        dataset, slowdown = key
        target = (targets or {}).get(dataset)
        _spread(axes[row][0], modes, [[r["epoch_s"] for r in groups[key][m]] for m in modes], "s per epoch")
        _spread(axes[row][1], modes, [[r["time_to_target"] for r in groups[key][m]] for m in modes],
                "s to target" + (f" ({target})" if target else ""))
        for ax in axes[row]:
            ax.set_title(f"{dataset}, worker 1 slowed {slowdown:g}x", fontsize=9)
    fig.suptitle("Straggler study: every run of each mode (dots), medians (bars); "
                 "x: never reached", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["sweep", "straggler"])
    p.add_argument("input", help="sweep.json (sweep) or runs.csv (straggler)")
    p.add_argument("-o", "--out", required=True, help="PNG to write")
    p.add_argument("--target", action="append", default=[], metavar="DATASET=TEXT",
                   help="straggler: the target named on a dataset's panels, e.g. bibtex='P@1 0.55'")
    args = p.parse_args(argv)
    targets = dict(x.split("=", 1) for x in args.target if "=" in x)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from plot_env import import_pyplot
    plt = import_pyplot("plot_spread")
    if args.kind == "sweep":
        with open(args.input) as f:
            draw_sweep(plt, json.load(f), args.out)
    else:
        draw_straggler(plt, read_study(args.input), args.out, targets)
    print(f"plot_spread: wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
