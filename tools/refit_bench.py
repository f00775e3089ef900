#!/usr/bin/env python3
"""Job configs trained the way tools/mldr_bench.py trains its template:
the training length stated in minibatch steps, the epoch chosen on a
validation split, then a refit on every training row.

For each --config and each of --seeds, the config gets
train.validation_fraction (--validation_fraction) and train.epochs from
--max_steps over the rows left for training (mldr_bench.set_length);
tether-launch --seed=S runs it, and --refit (always on here) trains again on
every training row, without a validation split, for the epochs the
validation run chose. The validation metric is the model type's default
(accuracy for classifiers, precision_at_1 for multi-label models). How the
epochs are chosen (--select):

  best     early stopping with a patience of --patience_steps: the epoch of
           the best validation metric (what tether-launch reports as
           best_epoch);
  longest  no early stopping: every epoch of --max_steps is validated, and
           the longest run whose validation metric is within --noise_se
           standard errors of the best one is chosen, the standard error
           being that of a proportion over the validation rows,
           sqrt(b (1 - b) / n) at the best value b (choose_epoch). On a
           plateau, where the epochs differ by less than the split can
           measure, this takes the most training the split does not
           object to.

OUT/refit.md gets the median test figures of the refits over the seeds,
with the command that made them; the validation runs' test figures are
read by nothing.

Rows are counted from data.train_split when the config has one, else from
the lines of data.train_file (plain, .gz or .xz; one row a line, as LIBSVM
and XMC text files are).

Example:
  python3 tools/refit_bench.py --config examples/a9a.pbtxt --config examples/pendigits.pbtxt --config examples/mnist.pbtxt --out refit --seeds 1,2,3 --max_steps 1600 --select longest
"""
import argparse
import gzip
import json
import lzma
import math
import os
import shlex
import sys

import mldr_bench
import pbtxt
from search import config_name, load_config
from tether_runs import read_jsonl

KEYS = ["accuracy", "auc", "log_loss", "precision_at_1", "precision_at_3", "precision_at_5"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", required=True, help="a job config (repeatable)")
    p.add_argument("--out", default="refit", help="output directory")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated train.seed values")
    p.add_argument("--validation_fraction", type=float, default=0.2, help="the validation split's share")
    p.add_argument("--max_steps", type=int, default=640, help="train.epochs from this many steps per worker")
    p.add_argument("--patience_steps", type=int, default=64, help="early stopping's patience, in steps (--select best)")
    p.add_argument("--select", choices=["best", "longest"], default="best",
                   help="best: the early-stopping best epoch; longest: the longest run within --noise_se of the best")
    p.add_argument("--noise_se", type=float, default=1.0,
                   help="--select longest: standard errors of the best validation metric counted as noise")
    p.add_argument("--validation_workers", type=int, default=0,
                   help="workers of the validation runs (0: the config's); the refit keeps the config's")
    p.add_argument("--bin", default="build/bin", help="directory holding tether-launch")
    p.add_argument("--timeout_s", type=int, default=900, help="bound on each run")
    p.add_argument("extra", nargs="*", help="more flags for tether-launch, after --")
    args = p.parse_args(argv)
    args.refit = True
    return args


def count_lines(path):
    opener = gzip.open if path.endswith(".gz") else lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        return sum(1 for line in f if line.strip())


def training_rows(tree):
    split = pbtxt.get(tree, "data.train_split")
    if split is not None:
        return mldr_bench.count_rows(pbtxt.unquote(split))
    files = [p.strip() for p in pbtxt.unquote(pbtxt.get(tree, "data.train_file", '""')).split(",") if p.strip()]
    if not files:
        raise SystemExit("[refit] the config has neither data.train_split nor data.train_file")
    return sum(count_lines(p) for p in files)


def prepare(args, path):
    """OUT/configs/NAME.pbtxt: the config with a validation split and its length in steps."""
    tree = load_config(path)
    pbtxt.set_field(tree, "train.validation_fraction", str(args.validation_fraction))
    pbtxt.set_field(tree, "train.early_stopping.patience", "1")
    mldr_bench.set_length(tree, training_rows(tree), args.max_steps, args.patience_steps)
    if args.select == "longest":
        # Every epoch validated; no copy of a best model to keep.
        pbtxt.set_field(tree, "train.early_stopping.patience", "0")
        pbtxt.set_field(tree, "train.keep_best_model", "false")
    args.refit_workers = int(pbtxt.get(tree, "cluster.num_workers", "1"))
    if args.validation_workers:
        pbtxt.set_field(tree, "cluster.num_workers", str(args.validation_workers))
    os.makedirs(os.path.join(args.out, "configs"), exist_ok=True)
    out = os.path.join(args.out, "configs", config_name(path) + ".pbtxt")
    with open(out, "w") as f:
        f.write(pbtxt.dump(tree))
    return out


def choose_epoch(records, noise_se):
    """The longest epoch whose validation metric is within noise_se standard
    errors of the best: records are (epoch, value, rows), value a proportion
    (accuracy, precision_at_1) over `rows` validation rows, larger better.
    The standard error is sqrt(b (1 - b) / rows) at the best value b. None
    when there is no record."""
    records = [(e, v, n) for e, v, n in records if v is not None and n > 0]
    if not records:
        return None
    _, best, rows = max(records, key=lambda r: (r[1], -r[0]))
    floor = best - noise_se * math.sqrt(best * (1 - best) / rows)
    return max(e for e, v, _ in records if v >= floor)


def validation_records(metrics_dir, metric):
    """(epoch, value, rows) of each "validation" record worker 0 logged."""
    rows = read_jsonl(os.path.join(metrics_dir, "worker-0.jsonl"))
    return [(r["epoch"], r.get(metric), r["rows"]) for r in rows if r.get("kind") == "validation"]


def run_seed_longest(args, name, cfg, seed):
    """--select longest: the validation run over every epoch, the epoch
    choose_epoch picks, and the refit for that many epochs: (the refit's
    metrics, the epochs) or (None, None)."""
    run_dir = os.path.join(args.out, "runs", f"{name}-seed{seed}")
    metrics_dir = os.path.join(run_dir, "metrics")
    if os.path.isdir(metrics_dir):
        for f in os.listdir(metrics_dir):
            os.remove(os.path.join(metrics_dir, f))
    with open(cfg) as f:
        tree = pbtxt.parse(f.read(), cfg)
    pbtxt.set_field(tree, "train.metrics_dir", pbtxt.quote(os.path.abspath(metrics_dir)))
    os.makedirs(run_dir, exist_ok=True)
    seed_cfg = os.path.join(run_dir, "config.pbtxt")
    with open(seed_cfg, "w") as f:
        f.write(pbtxt.dump(tree))
    m = mldr_bench.launch(args, seed_cfg, run_dir, seed)
    if m is None:
        return None, None
    records = validation_records(metrics_dir, m.get("validation_metric", "accuracy"))
    epochs = choose_epoch(records, args.noise_se)
    if epochs is None:
        print(f"[refit] {name} seed {seed}: no validation record in {metrics_dir}", flush=True)
        return None, None
    with open(os.path.join(run_dir, "chosen.json"), "w") as f:
        json.dump({"epochs": epochs, "noise_se": args.noise_se, "records": records}, f)
    refit_dir = os.path.join(args.out, "refit", f"{name}-seed{seed}")
    os.makedirs(refit_dir, exist_ok=True)
    refit_cfg = mldr_bench.refit_config(cfg, epochs, os.path.join(refit_dir, "config.pbtxt"), args.refit_workers)
    return mldr_bench.launch(args, refit_cfg, refit_dir, seed), epochs


def fmt(v):
    return "–" if v is None else f"{v:.4f}"


def main(argv=None):
    args = parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    command = "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0]] + (argv or sys.argv[1:]))
    rows = []
    for path in args.config:
        name = config_name(path)
        results, epochs = [], []
        for seed in seeds:
            run = run_seed_longest if args.select == "longest" else mldr_bench.run_seed
            m, best = run(args, name, prepare(args, path), seed)
            if m is not None:
                results.append(m)
                epochs.append(best)
                print(f"[refit] {name} seed {seed}: " + ", ".join(f"{k} {m[k]:.4f}" for k in KEYS if k in m) +
                      f" (epochs {best})", flush=True)
        med = {k: mldr_bench.median([r.get(k) for r in results]) for k in KEYS}
        rows.append((name, [r.get("accuracy", r.get("precision_at_1")) for r in results], med,
                     mldr_bench.median(epochs), len(results)))
    write_table(args, rows, command, seeds)
    return 0 if all(n == len(seeds) for *_, n in rows) else 1


def write_table(args, rows, command, seeds):
    shown = [k for k in KEYS if any(med[k] is not None for _, _, med, _, _ in rows)]
    lines = ["# Refits", "", "```", command, "```", "",
             f"Test figures, the median of seeds {args.seeds}: each seed's run on every training row for the epochs "
             "its validation run chose.", "",
             "| config | accuracy or P@1 by seed | " + " | ".join(f"median {k}" for k in shown) +
             " | epochs chosen (median) | runs |", "|---|---|" + "---|" * len(shown) + "---|---|"]
    for name, by_seed, med, epochs, n in rows:
        lines.append(f"| {name} | {', '.join(fmt(v) for v in by_seed)} | " +
                     " | ".join(fmt(med[k]) for k in shown) + f" | {epochs} | {n} |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "refit.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    sys.exit(main())
