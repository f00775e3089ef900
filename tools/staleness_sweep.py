#!/usr/bin/env python3
"""Staleness sweep: trains one job for several staleness bounds and compares them.

For every bound s in --staleness (default 0,1,2,4,8,inf) it runs
`tether-launch` on the same config, optionally slowing one worker down by a
factor (--slowdown), with rank 0 evaluating on the test split after every
epoch. It then writes:
  OUT/sweep.md    a table: seconds to the target metric, final metric, mean
                  and max staleness tau of the applied pushes, the fraction of
                  training time workers' pulls were held back by the bound
                  (measured on the servers), the fraction spent waiting on
                  pulls at all (bound + transport + busy servers), and bytes
                  on the wire;
  OUT/sweep.json  the same numbers, machine-readable;
  OUT/sweep.png   every run's time to the target and final metric per s,
                  and its metric against training time, one panel per s
                  (tools/plot_spread.py; matplotlib, from Debian's
                  python3-matplotlib, which scripts/setup.sh installs;
                  --no_plot to go without).

Example:
  tools/staleness_sweep.py --config tests/data/bibtex_fixed.pbtxt --slowdown 2 --out sweep-bibtex
  tools/staleness_sweep.py --config examples/a9a.pbtxt --metric accuracy --target 0.84 --out sweep-a9a

Every run is bounded by --timeout_s; a failed run is reported and the sweep
goes on with the next bound.
"""
import argparse
import json
import math
import os
import sys

from plot_env import import_pyplot
from plot_spread import draw_sweep
from tether_runs import eval_curve, run_launch


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True, help="job config (.pbtxt)")
    p.add_argument("--bin", default="build/bin", help="directory holding tether-launch")
    p.add_argument("--staleness", default="0,1,2,4,8,inf", help="comma-separated bounds; inf = ASP")
    p.add_argument("--slowdown", type=float, default=1.0, help="slow one worker by this factor (1 = none)")
    p.add_argument("--slowdown_rank", type=int, default=None,
                   help="the slowed worker (default: the config's train.slowdown_rank)")
    p.add_argument("--workers", type=int, default=None, help="override the config's worker count")
    p.add_argument("--servers", type=int, default=None, help="override the config's server count")
    p.add_argument("--metric", default="precision_at_1", help="metric to track (precision_at_1, accuracy, ...)")
    p.add_argument("--target", type=float, default=0.60, help="report seconds until the metric first reaches this")
    p.add_argument("--repeat", type=int, default=1, help="runs per bound; the table shows medians")
    p.add_argument("--timeout_s", type=int, default=900, help="bound on each run")
    p.add_argument("--out", default="sweep", help="output directory")
    p.add_argument("--no_plot", action="store_true", help="write no sweep.png (and need no matplotlib)")
    p.add_argument("extra", nargs="*", help="more flags for tether-launch, after --")
    return p.parse_args()


def seconds_to(pts, target):
    for t, v in pts:
        if v >= target:
            return t
    return None


def run_one(args, s, rep):
    tag = f"s{s}" + (f"-r{rep}" if args.repeat > 1 else "")
    run_dir = os.path.join(args.out, tag)
    os.makedirs(run_dir, exist_ok=True)
    metrics_out = os.path.join(run_dir, "metrics.json")
    if os.path.exists(metrics_out):
        os.remove(metrics_out)
    cmd = [os.path.join(args.bin, "tether-launch"), "--config", args.config, "--metrics_out", metrics_out,
           f"--staleness={s}", "--eval_every_epochs=1", f"--metrics_dir={run_dir}",
           f"--timeout_s={args.timeout_s}"]
    if args.slowdown > 1.0:
        cmd += [f"--slowdown={args.slowdown}"]
        if args.slowdown_rank is not None:
            cmd += [f"--slowdown_rank={args.slowdown_rank}"]
    if args.workers is not None:
        cmd += ["--workers", str(args.workers)]
    if args.servers is not None:
        cmd += ["--servers", str(args.servers)]
    cmd += args.extra
    for f in os.listdir(run_dir):
        if f.endswith(".jsonl"):
            os.remove(os.path.join(run_dir, f))
    print(f"[sweep] s={s} run {rep + 1}/{args.repeat}: {' '.join(cmd)}", flush=True)
    rc, wall = run_launch(cmd, os.path.join(run_dir, "log.txt"), args.timeout_s)
    if rc != 0 or not os.path.exists(metrics_out):
        print(f"[sweep] s={s}: run failed (exit {rc}); see {run_dir}/log.txt", flush=True)
        return None
    with open(metrics_out) as f:
        m = json.load(f)
    pts = eval_curve(run_dir, args.metric)
    workers = m.get("workers", [])
    result = {
        "staleness": s,
        "wall_seconds": wall,
        "train_seconds": m.get("train_seconds"),
        "final": m.get(args.metric),
        "seconds_to_target": seconds_to(pts, args.target),
        "staleness_mean": m.get("staleness_mean"),
        "staleness_max": m.get("staleness_max"),
        "wait_fraction": (sum(w.get("wait_fraction", 0.0) for w in workers) / len(workers)) if workers else None,
        "bound_wait_fraction": (sum(w.get("bound_wait_fraction", 0.0) for w in workers) / len(workers))
        if workers else None,
        "bytes": sum(w.get("bytes_sent", 0) + w.get("bytes_received", 0) for w in workers) if workers else None,
        "pulls": sum(w.get("pulls", 0) for w in workers) if workers else None,
        "curve": pts,
    }
    print(f"[sweep] s={s}: {args.metric} {result['final']}, train {result['train_seconds']:.2f} s, "
          f"tau mean {result['staleness_mean']}, wait {result['wait_fraction']}", flush=True)
    return result


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def fmt(x, spec):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main():
    args = parse_args()
    # Checked before the first run, not after minutes of training.
    plt = None if args.no_plot else import_pyplot("staleness_sweep")
    os.makedirs(args.out, exist_ok=True)
    bounds = [b.strip() for b in args.staleness.split(",") if b.strip()]
    results = {}
    for s in bounds:
        runs = [r for r in (run_one(args, s, rep) for rep in range(args.repeat)) if r is not None]
        if runs:
            results[s] = runs
    if not results:
        print("[sweep] every run failed", file=sys.stderr)
        return 1
    rows = []
    for s, runs in results.items():
        key = lambda k: median([r[k] for r in runs])  # noqa: E731
        rows.append({
            "staleness": s, "runs": len(runs),
            "seconds_to_target": key("seconds_to_target"), "final": key("final"),
            "train_seconds": key("train_seconds"),
            "staleness_mean": key("staleness_mean"), "staleness_max": key("staleness_max"),
            "wait_fraction": key("wait_fraction"), "bound_wait_fraction": key("bound_wait_fraction"),
            "bytes": key("bytes"), "pulls": key("pulls"),
        })
    title = (f"{os.path.basename(args.config)}: {args.metric} target {args.target}"
             + (f", worker slowed {args.slowdown:g}x" if args.slowdown > 1 else ""))
    lines = [f"### {title}", "",
             f"| s | runs | seconds to {args.metric} ≥ {args.target} | final {args.metric} | train s | "
             "mean τ | max τ | waiting on the bound | waiting on pulls | MB on the wire | pulls |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['staleness']} | {r['runs']} | {fmt(r['seconds_to_target'], '.2f')} | "
                     f"{fmt(r['final'], '.4f')} | {fmt(r['train_seconds'], '.2f')} | "
                     f"{fmt(r['staleness_mean'], '.2f')} | {fmt(r['staleness_max'], '.0f')} | "
                     f"{fmt(r['bound_wait_fraction'], '.3f')} | {fmt(r['wait_fraction'], '.3f')} | "
                     f"{fmt(None if r['bytes'] is None else r['bytes'] / 1e6, '.0f')} | {fmt(r['pulls'], '.0f')} |")
    table = "\n".join(lines) + "\n"
    print(table)
    with open(os.path.join(args.out, "sweep.md"), "w") as f:
        f.write(table)
    sweep = {"config": args.config, "metric": args.metric, "target": args.target,
             "slowdown": args.slowdown, "rows": rows,
             "runs": {s: [{k: r[k] for k in ("seconds_to_target", "final", "train_seconds")} for r in runs]
                      for s, runs in results.items()},
             "curves": {s: [r["curve"] for r in runs] for s, runs in results.items()}}
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump(sweep, f, indent=1)
    if plt is None:
        print(f"[sweep] wrote {args.out}/sweep.md, sweep.json (--no_plot)")
        return 0
    draw_sweep(plt, sweep, os.path.join(args.out, "sweep.png"))
    print(f"[sweep] wrote {args.out}/sweep.md, sweep.json, sweep.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
