#!/usr/bin/env python3
"""Multi-label benchmark over a folder of data sets in the Extreme
Classification Repository's text format with fixed splits (six Stack
Exchange, RCV1 and Corel16k sets; docs/MODELS.md, "Choosing settings").

The folder (--data_dir, never named by the repository) holds for each set
NAME: NAME_data.txt.xz (header "N F L", 0-based features and labels),
NAME_trSplit*.txt and NAME_tstSplit*.txt (1-based row indices), and a
README.md whose table gives each set's cosine k-nearest-neighbour P@1 / P@3
/ P@5 in % on the same split (the last column of its rows).

  prepare  decompresses each data file into OUT/data/ (Python's lzma) and
           writes OUT/configs/NAME.pbtxt: the --config template (an XMC job:
           model, optimizer, train settings) with its data section set to the
           set's files (widths from the header);
  run      prepare, then runs each config once per --seeds (tether-launch
           --seed=S) and writes OUT/mldr.md: per set the kNN reference, the
           median test P@1 / P@3 / P@5 over the seeds and the margin over kNN
           in points, with the command that made it.

Training length in minibatch steps: --max_steps and --patience_steps set
each set's train.epochs and train.early_stopping.patience so that every
worker takes about that many steps, whatever the set's size: epochs =
ceil(steps / clocks per epoch), clocks per epoch being the job's nominal
epoch (docs/MODELS.md: ceil(ceil(rows / num_workers) / minibatch_size /
minibatches_per_clock)) over the rows left for training after the
template's train.validation_fraction. --refit then trains each seed once
more on every training row (no validation split) for the best epoch its
validation run chose, and reports that run's test figures.

The configs from `prepare` are what tools/search.py takes (--config, once
per set) to choose settings over every set at once.

Example:
  python3 tools/mldr_bench.py run --data_dir MLDR --config examples/mldr_xmc.pbtxt --out mldr --seeds 1,2,3
"""
import argparse
import glob
import json
import lzma
import math
import os
import re
import shlex
import statistics
import sys

import pbtxt
from tether_runs import refit_split, run_launch


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["prepare", "run"])
    p.add_argument("--data_dir", required=True, help="the folder of *_data.txt.xz, split files and README.md")
    p.add_argument("--config", required=True, help="template XMC job config (its data section is replaced)")
    p.add_argument("--out", default="mldr", help="output directory")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated train.seed values (run)")
    p.add_argument("--sets", default="", help="comma-separated set names (default: every set in the folder)")
    p.add_argument("--bin", default="build/bin", help="directory holding tether-launch")
    p.add_argument("--timeout_s", type=int, default=1800, help="bound on each run")
    p.add_argument("--max_steps", type=int, default=0, help="train.epochs from this many steps per worker (0: keep)")
    p.add_argument("--patience_steps", type=int, default=0,
                   help="train.early_stopping.patience from this many steps per worker (0: keep)")
    p.add_argument("--refit", action="store_true",
                   help="retrain each seed on every training row for its validation run's best epoch")
    p.add_argument("extra", nargs="*", help="more flags for tether-launch, after --")
    return p.parse_args(argv)


def find_sets(data_dir, only):
    sets = {}
    for path in sorted(glob.glob(os.path.join(data_dir, "*_data.txt.xz"))):
        name = os.path.basename(path)[: -len("_data.txt.xz")]
        if only and name not in only:
            continue
        tr = sorted(glob.glob(os.path.join(data_dir, f"{name}_trSplit*.txt")))
        ts = sorted(glob.glob(os.path.join(data_dir, f"{name}_tstSplit*.txt")))
        if len(tr) != 1 or len(ts) != 1:
            raise SystemExit(f"[mldr] {name}: expected one train and one test split file, found {tr} and {ts}")
        sets[name] = {"data": path, "train_split": tr[0], "test_split": ts[0]}
    missing = [n for n in only if n not in sets]
    if missing:
        raise SystemExit(f"[mldr] no data file for {', '.join(missing)} in {data_dir}")
    if not sets:
        raise SystemExit(f"[mldr] no *_data.txt.xz in {data_dir}")
    return sets


def knn_reference(data_dir):
    """{name: (P@1, P@3, P@5) in %} from the folder README's table rows."""
    ref = {}
    path = os.path.join(data_dir, "README.md")
    if not os.path.exists(path):
        return ref
    row = re.compile(r"^\|\s*([A-Za-z0-9_]+)\s*\|.*\|\s*([0-9.]+)\s*/\s*([0-9.]+)\s*/\s*([0-9.]+)\s*\|\s*$")
    with open(path) as f:
        for line in f:
            m = row.match(line.strip())
            if m:
                ref[m.group(1)] = tuple(float(m.group(i)) for i in (2, 3, 4))
    return ref


def decompress(src, dst):
    if os.path.exists(dst) and os.path.getsize(dst) > 0:
        return
    tmp = dst + ".tmp"
    with lzma.open(src, "rb") as fin, open(tmp, "wb") as fout:
        while True:
            block = fin.read(1 << 20)
            if not block:
                break
            fout.write(block)
    os.replace(tmp, dst)


def prepare(args, sets):
    with open(args.config) as f:
        template = pbtxt.parse(f.read(), args.config)
    os.makedirs(os.path.join(args.out, "data"), exist_ok=True)
    os.makedirs(os.path.join(args.out, "configs"), exist_ok=True)
    configs = {}
    for name, s in sets.items():
        plain = os.path.abspath(os.path.join(args.out, "data", f"{name}_data.txt"))
        print(f"[mldr] {name}: {plain}", flush=True)
        decompress(s["data"], plain)
        tree = json.loads(json.dumps(template))
        pbtxt.set_field(tree, "name", pbtxt.quote(name))
        pbtxt.remove_field(tree, "data")
        for field, value in [("format", "XMC"), ("train_file", pbtxt.quote(plain)), ("test_file", pbtxt.quote(plain)),
                             ("train_split", pbtxt.quote(os.path.abspath(s["train_split"]))),
                             ("test_split", pbtxt.quote(os.path.abspath(s["test_split"]))), ("index_base", "0")]:
            pbtxt.set_field(tree, "data." + field, value)
        for field in ("normalize_rows", "tf_idf"):  # the template's input weighting stays
            v = pbtxt.get(template, "data." + field)
            if v is not None:
                pbtxt.set_field(tree, "data." + field, v)
        set_length(tree, count_rows(s["train_split"]), args.max_steps, args.patience_steps)
        path = os.path.join(args.out, "configs", f"{name}.pbtxt")
        with open(path, "w") as f:
            f.write(pbtxt.dump(tree))
        configs[name] = path
    return configs


def count_rows(split_path):
    with open(split_path) as f:
        return sum(1 for line in f if line.strip())


def clocks_per_epoch(tree, rows):
    """The nominal epoch's clocks (cli/nominal_epoch.h) over `rows` training rows."""
    workers = int(pbtxt.get(tree, "cluster.num_workers", "1"))
    minibatch = int(pbtxt.get(tree, "train.minibatch_size", "1"))
    per_clock = int(pbtxt.get(tree, "train.minibatches_per_clock", "1"))
    return max(1, math.ceil(math.ceil(rows / workers) / minibatch / per_clock))


def set_length(tree, rows, max_steps, patience_steps):
    """train.epochs and the patience from step counts, for a set of `rows` training rows."""
    fraction = float(pbtxt.get(tree, "train.validation_fraction", "0"))
    clocks = clocks_per_epoch(tree, round(rows * (1 - fraction)))
    if max_steps > 0:
        pbtxt.set_field(tree, "train.epochs", str(math.ceil(max_steps / clocks)))
    if patience_steps > 0:
        pbtxt.set_field(tree, "train.early_stopping.patience", str(max(1, math.ceil(patience_steps / clocks))))
    return clocks


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# Fields a refit leaves out: it trains on every training row.
VALIDATION_FIELDS = ["train.validation_fraction", "data.validation_split", "train.early_stopping",
                     "train.keep_best_model"]


def launch(args, cfg, run_dir, seed):
    """One tether-launch run of config file `cfg`; its metrics JSON, or None."""
    os.makedirs(run_dir, exist_ok=True)
    metrics = os.path.join(run_dir, "metrics.json")
    if os.path.exists(metrics):
        os.remove(metrics)
    cmd = [os.path.join(args.bin, "tether-launch"), "--config", cfg, "--metrics_out", metrics,
           f"--seed={seed}", f"--timeout_s={args.timeout_s}"] + args.extra
    rc, _ = run_launch(cmd, os.path.join(run_dir, "log.txt"), args.timeout_s)
    if rc != 0 or not os.path.exists(metrics):
        print(f"[mldr] {run_dir}: failed (exit {rc}); see {run_dir}/log.txt", flush=True)
        return None
    with open(metrics) as f:
        return json.load(f)


def refit_config(cfg, epochs, path, workers=None):
    """Writes `cfg` without its validation split, for `epochs` epochs (and
    `workers` workers, when given), to `path`; a data.validation_split's
    rows join data.train_split's (refit_split)."""
    with open(cfg) as f:
        tree = pbtxt.parse(f.read(), cfg)
    refit_split(tree, os.path.dirname(os.path.abspath(path)), os.path.dirname(os.path.abspath(cfg)))
    for field in VALIDATION_FIELDS:
        pbtxt.remove_field(tree, field)
    pbtxt.set_field(tree, "train.epochs", str(epochs))
    if workers:
        pbtxt.set_field(tree, "cluster.num_workers", str(workers))
    with open(path, "w") as f:
        f.write(pbtxt.dump(tree))
    return path


def run_seed(args, name, cfg, seed):
    """(the run whose test figures count, the validation run's best epoch or None)."""
    run_dir = os.path.join(args.out, "runs", f"{name}-seed{seed}")
    m = launch(args, cfg, run_dir, seed)
    if m is None or not args.refit:
        return m, m and m.get("best_epoch")
    best = m.get("best_epoch")
    if not best:
        print(f"[mldr] {name} seed {seed}: no best_epoch to refit (is there a validation split?)", flush=True)
        return None, None
    refit_dir = os.path.join(args.out, "refit", f"{name}-seed{seed}")
    os.makedirs(refit_dir, exist_ok=True)
    refit_cfg = refit_config(cfg, best, os.path.join(refit_dir, "config.pbtxt"), getattr(args, "refit_workers", None))
    return launch(args, refit_cfg, refit_dir, seed), best


def run_set(args, name, cfg, seeds):
    results, epochs = [], []
    for seed in seeds:
        m, best = run_seed(args, name, cfg, seed)
        if m is None:
            continue
        results.append(m)
        epochs.append(best or m.get("epochs"))
        print(f"[mldr] {name} seed {seed}: P@1 {m.get('precision_at_1')} (epochs {epochs[-1]})", flush=True)
    p = [median([r.get(f"precision_at_{k}") for r in results]) for k in (1, 3, 5)]
    return p, median(epochs), len(results)


def table(args, rows, command, seeds):
    what = ("refit on every training row for the epochs its validation run chose" if args.refit else
            "the config as prepared")
    epochs_head = "best epoch (median)" if args.refit else "epochs kept"
    lines = ["# Multi-label benchmark", "", "```", command, "```", "",
             f"Test P@1 / P@3 / P@5 in %, the median of {len(seeds)} seed(s) (train.seed {args.seeds}), {what}; "
             "kNN: the folder's cosine k-nearest-neighbour reference (k = 10) on the same split; margin: P@1 minus "
             "kNN's, in points.", "",
             f"| data set | kNN P@1 / P@3 / P@5 | MLP P@1 / P@3 / P@5 | P@1 margin | {epochs_head} | runs |",
             "|---|---|---|---|---|---|"]
    for name, r, p, epochs, n in rows:
        knn = " / ".join(f"{v:.2f}" for v in r) if r else "–"
        mlp = " / ".join("–" if v is None else f"{100 * v:.2f}" for v in p)
        margin = "–" if not r or p[0] is None else f"{100 * p[0] - r[0]:+.2f}"
        lines.append(f"| {name} | {knn} | {mlp} | {margin} | {epochs if epochs is not None else '–'} | {n} |")
    return lines


def run(args, configs, command):
    ref = knn_reference(args.data_dir)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    rows = []
    for name, cfg in configs.items():
        p, epochs, n = run_set(args, name, cfg, seeds)
        rows.append((name, ref.get(name), p, epochs, n))
    lines = table(args, rows, command, seeds)
    with open(os.path.join(args.out, "mldr.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return 0 if all(n == len(seeds) for *_, n in rows) else 1


def main(argv=None):
    args = parse_args(argv)
    only = [s for s in args.sets.split(",") if s]
    sets = find_sets(args.data_dir, only)
    # The command as it would be typed, with the data folder named MLDR: it
    # is a machine's path, not the benchmark's.
    shown = [("MLDR" if a == args.data_dir else a.replace(args.data_dir, "MLDR")) for a in (argv or sys.argv[1:])]
    command = "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0]] + shown)
    configs = prepare(args, sets)
    if args.mode == "prepare":
        for name, path in configs.items():
            print(f"--config {path}")
        return 0
    return run(args, configs, command)


if __name__ == "__main__":
    sys.exit(main())
