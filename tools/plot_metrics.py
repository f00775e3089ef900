#!/usr/bin/python3
"""Plots loss and P@1 against training time from Tether's JSON-lines metrics.

Each RUN is a .jsonl file (worker-0.jsonl from a job's train.metrics_dir, or
the file scripts/torch_xmc.py writes) or a directory (its worker-0.jsonl is
used), optionally labelled as LABEL=PATH:

  tools/plot_metrics.py -o bibtex.png \
      tether-1w=out/tether-1w torch=out/torch.jsonl

Lines with "kind": "clock" give the loss curve (smoothed over --smooth
clocks); lines with "kind": "eval" give P@1. The x axis is "train_s"
(training seconds, evaluation excluded) unless --x=t (seconds since the
process started, evaluation included). Needs matplotlib: Debian's
python3-matplotlib, which scripts/setup.sh installs (run with /usr/bin/python3,
or any python3 that has matplotlib).
"""
import argparse
import json
import os
import sys

from plot_env import import_pyplot


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "worker-0.jsonl")
    clocks, evals = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: not JSON: {e}")
            if rec.get("kind") == "clock" and "loss" in rec:
                clocks.append(rec)
            elif rec.get("kind") == "eval":
                evals.append(rec)
    return path, clocks, evals


def smooth(values, window):
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > window:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="[LABEL=]PATH of a .jsonl file or a metrics directory")
    p.add_argument("-o", "--output", default="metrics.png", help="image to write (PNG, SVG or PDF by extension)")
    p.add_argument("--x", choices=["train_s", "t"], default="train_s", help="time axis")
    p.add_argument("--smooth", type=int, default=20, help="moving average of the loss over this many clocks")
    p.add_argument("--title", default="")
    a = p.parse_args()
    plt = import_pyplot("plot_metrics")

    fig, (ax_loss, ax_p1) = plt.subplots(1, 2, figsize=(11, 4))
    for run in a.runs:
        label, _, path = run.rpartition("=")
        path, clocks, evals = load(path)
        label = label or os.path.basename(os.path.dirname(path) if path.endswith("worker-0.jsonl") else path)
        if clocks:
            ax_loss.plot([c.get(a.x, c.get("t")) for c in clocks], smooth([c["loss"] for c in clocks], a.smooth),
                         label=label)
        if evals:
            ax_p1.plot([e.get(a.x, e.get("t")) for e in evals], [e["precision_at_1"] for e in evals], marker="o",
                       label=label)
        if not clocks and not evals:
            print(f"plot_metrics: {path}: no clock or eval lines", file=sys.stderr)
    xlabel = "training seconds (evaluation excluded)" if a.x == "train_s" else "seconds since start"
    ax_loss.set_xlabel(xlabel)
    ax_loss.set_ylabel(f"training loss (mean of {a.smooth} clocks)")
    ax_p1.set_xlabel(xlabel)
    ax_p1.set_ylabel("test P@1")
    for ax in (ax_loss, ax_p1):
        ax.grid(alpha=0.3)
        ax.legend()
    if a.title:
        fig.suptitle(a.title)
    fig.tight_layout()
    fig.savefig(a.output, dpi=110)
    print(f"plot_metrics: wrote {a.output}")


if __name__ == "__main__":
    main()
