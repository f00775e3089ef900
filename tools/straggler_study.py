#!/usr/bin/env python3
"""Straggler study: one worker slowed, several remedies compared.

For every dataset (--datasets: Bibtex, a9a), every slowdown (--slowdowns: the
slowed worker, --slowdown_rank, runs 2x and 4x slower) and every mode of the
MODES table below, it runs `tether-launch` with 2 servers and 2 workers,
--repeats times. The repeats are alternated: repeat r runs every mode once
(in an order rotated by r) before repeat r + 1 starts, so a slow phase of a
shared machine does not land on one mode. Rank 0 evaluates after every epoch
(--eval_every_epochs=1) and every process writes JSON-lines metrics
(--metrics_dir); the final metrics JSON gives the per-worker counters.

It writes, under --out:
  study.md     one table per (dataset, slowdown): medians over the repeats of
               the time per epoch, the final metric, the time to the target,
               the updates (clocks) and rows per worker and the waiting share,
               then the criterion line;
  study.csv    the same medians, one row per (dataset, slowdown, mode);
  runs.csv     every run, failed ones included (status, exit code, log);
  study.json   all of it with the curves, machine-readable;
  DATASET-xSLOWDOWN.png  the metric against training time, the median run of
               each mode (matplotlib: Debian's python3-matplotlib, which
               scripts/setup.sh installs; without it the plots are skipped
               with a message);
  spread.png   every finished run's time per epoch and time to the target,
               per mode, with the medians (tools/plot_spread.py);
  runs/DATASET-xSLOWDOWN-MODE-rN/  each run's log.txt, metrics.json and
               JSON-lines metrics.

Columns (medians over the runs that finished):
  s/epoch      the slowest worker's training seconds (evaluations left out,
               metrics JSON workers[].train_seconds) / epochs: when an epoch
               of the whole job is done, not rank 0's share of it;
  final        the metric of the final evaluation (P@1 or accuracy);
  s to target  rank 0's training seconds at the first per-epoch evaluation
               at or above the target (staleness_sweep.py's convention); a run
               that never reached it counts as infinitely slow, so the median
               is "not reached" when at least half the runs did not;
  updates      minibatches per worker, rank order: workers[].minibatches
               where the metrics JSON has it, else the worker's clocks (the
               last "clock" line of its JSON-lines metrics; both example
               configs tick every minibatch, so a clock is one update);
  rows         rows trained per worker, all epochs (workers[].samples);
  waiting      share of training time each worker was blocked on pulls
               (workers[].wait_fraction: the bound, transport and busy
               servers); "on the bound" is the part the servers held back for
               the staleness bound (bound_wait_fraction).

Modes whose flags the built binaries do not list in --help (or whose config
fields their proto does not know) are skipped with a message, so the tool runs
on a tree that has only some of them. Every run is bounded (--timeout_s, given
to tether-launch, and the tool's own bound a little above it); tether-launch
runs in its own process group, which is killed (TERM, then KILL) on a timeout,
an error or Ctrl-C, and tether-launch's children die with it
(PR_SET_PDEATHSIG). A failed run is reported, listed in runs.csv and counted;
the tool exits 1 if any run failed.

Examples:
  tools/straggler_study.py --datasets bibtex --slowdowns 2 --out study-bibtex
  tools/straggler_study.py --quick --datasets a9a --modes fixed_s2 --out /tmp/smoke
"""
import argparse
import csv
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys

from plot_env import import_pyplot
from plot_spread import draw_straggler, read_study
from tether_runs import STOP_SIGNALS, Interrupted, current, eval_curve, kill_group, read_jsonl, run_launch

# ---------------------------------------------------------------------------
# The modes: what each passes to tether-launch. Adjust names here.
#   flags:   command-line flags (override flags, forwarded by tether-launch to
#            every server and worker). The mode runs only if tether-launch and
#            tether-worker both list every one of these flags in --help.
#   config:  {top-level block: text} put at the start of that block of a copy
#            of the job config (the block is added if the config has none),
#            for settings that have no flag.
#   probe:   strings the tether-worker binary must contain (its compiled-in
#            proto: config field and enum value names) for a config-only mode.
#   label:   for the tables and plots.
MODES = {
    "fixed_s0": {"flags": ["--staleness=0"], "label": "fixed split, s = 0 (BSP)"},
    "fixed_s2": {"flags": ["--staleness=2"], "label": "fixed split, s = 2"},
    "fixed_sinf": {"flags": ["--staleness=inf"], "label": "fixed split, s = ∞ (ASP)"},
    "on_demand": {"flags": ["--staleness=2", "--data_on_demand=true", "--chunk_rows=640"],
                  "label": "data on demand, s = 2"},
    # Bibtex trains with Adam: its step hardly follows a gradient's scale, so
    # the push is weighed by its batch on the server (docs/CONSISTENCY.md,
    # "Adaptive batch sizes"). Chunks of 10 minibatches: a minibatch does not
    # cross a chunk, so larger chunks leave fewer short ones; they taper
    # toward each epoch's end (--chunk_taper) so the fast worker does not
    # wait long for the slow one's last chunk.
    "adaptive": {"flags": ["--staleness=2", "--data_on_demand=true", "--chunk_rows=640", "--chunk_taper=true",
                           "--adaptive_batch=true", "--adaptive_batch_min=16", "--adaptive_batch_max=160",
                           "--adaptive_batch_step=server_weight"],
                 "label": "adaptive batches on demand, s = 2"},
    # --consistency_model=average clears the config's staleness (AVERAGE
    # refuses a bound of its own); period_rows goes into the copy of the
    # config: a round every minibatch, as examples/bibtex_average.pbtxt.
    "average": {"flags": ["--consistency_model=average"], "config": {"consistency": "period_rows: 64"},
                "probe": ["period_rows"], "label": "weighted model averaging (period 64 rows)"},
    # Delay compensation on the servers (DC-ASGD, Zheng et al., ICML 2017;
    # docs/MODELS.md, "Optimizers"): g + λ·g⊙g⊙(w_now − w_read). λ = DC_LAMBDA.
    "fixed_sinf_dc": {"flags": ["--staleness=inf", "--delay_compensation=%DC_LAMBDA%"],
                      "label": "fixed split, s = ∞ (ASP), delay compensation"},
    "fixed_s2_dc": {"flags": ["--staleness=2", "--delay_compensation=%DC_LAMBDA%"],
                    "label": "fixed split, s = 2, delay compensation"},
}
# λ of the *_dc modes (--delay_compensation of the tool overrides it).
DC_LAMBDA = 100.0
# The fixed split with s = 2: the baseline of the criterion's ratios.
BASELINE_MODE = "fixed_s2"

# The datasets: job config (relative to the repository root), the metric rank
# 0's evaluations report, and the default target (--target NAME=VALUE).
DATASETS = {
    "bibtex": {"config": "tests/data/bibtex_fixed.pbtxt", "metric": "precision_at_1", "target": 0.55},
    "a9a": {"config": "examples/a9a.pbtxt", "metric": "accuracy", "target": 0.84},
}
METRIC_LABEL = {"precision_at_1": "P@1", "accuracy": "accuracy"}

# The criterion a remedy must meet: Bibtex, one worker slowed 2x, s = 2,
# 2 workers + 2 servers, medians of 3 alternated runs.
CRITERION = {"dataset": "bibtex", "slowdown": 2.0, "mode": "adaptive", "baseline": BASELINE_MODE,
              "max_epoch_ratio": 0.75, "max_target_ratio": 0.75, "min_final": 0.60}

# Fields of the data section whose relative paths are resolved against the
# config's folder (core/config/parse.cc, ResolveDataPaths); a copy of the config
# elsewhere gets them absolute.
PATH_FIELDS = ("train_file", "test_file", "train_split", "test_split", "train_label_file", "test_label_file",
               "label_xml")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"[straggler] {msg}", flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="bibtex,a9a",
                   help="comma-separated: names of the DATASETS table (bibtex, a9a) or NAME=CONFIG.pbtxt")
    p.add_argument("--slowdowns", default="2,4", help="comma-separated slowdown factors of the slowed worker")
    p.add_argument("--slowdown_rank", type=int, default=1, help="the slowed worker (rank 0 evaluates)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated modes of the MODES table: " +
                   ", ".join(MODES))
    p.add_argument("--repeats", type=int, default=3, help="alternated runs per (dataset, slowdown, mode)")
    p.add_argument("--seeds", default=None,
                   help="comma-separated train.seed per repeat (repeat r runs with --seed=SEEDS[r]; sets "
                        "--repeats); default: every repeat with the config's seed")
    p.add_argument("--delay_compensation", type=float, default=DC_LAMBDA,
                   help=f"λ of the *_dc modes (default {DC_LAMBDA:g})")
    p.add_argument("--epochs", type=int, default=None, help="override the configs' train.epochs")
    p.add_argument("--workers", type=int, default=2, help="workers per job")
    p.add_argument("--servers", type=int, default=2, help="servers per job")
    p.add_argument("--target", action="append", default=[], metavar="NAME=VALUE",
                   help="target metric of a dataset (default bibtex=0.55 P@1, a9a=0.84 accuracy); repeatable")
    p.add_argument("--metric", action="append", default=[], metavar="NAME=METRIC",
                   help="metric of a NAME=CONFIG dataset (default precision_at_1 for XMC_MLP, else accuracy)")
    p.add_argument("--build", default=os.path.join(REPO, "build", "bin"),
                   help="directory holding tether-launch and tether-worker (or a build tree with bin/ in it)")
    p.add_argument("--out", default="straggler-study", help="output directory")
    p.add_argument("--timeout_s", type=int, default=600, help="bound on each run")
    p.add_argument("--quick", action="store_true", help="smoke test: 1 repeat, 2 epochs")
    p.add_argument("--no_plot", action="store_true", help="write no plots (and need no matplotlib)")
    p.add_argument("extra", nargs="*", help="more flags for every tether-launch, after --")
    args = p.parse_args(argv)
    # The command as given, for study.md: the page that shows the plots names what drew them.
    args.command = shlex.join(["python3", "tools/straggler_study.py"]
                              + list(sys.argv[1:] if argv is None else argv))
    if args.seeds is not None:
        try:
            args.seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        except ValueError:
            p.error(f"--seeds: not a comma-separated list of integers: {args.seeds!r}")
        if not args.seeds:
            p.error("--seeds: no seed given")
        args.repeats = len(args.seeds)
    if not (args.delay_compensation >= 0 and math.isfinite(args.delay_compensation)):
        p.error("--delay_compensation must be a finite number >= 0")
    if args.quick:
        args.repeats = 1
        args.epochs = 2 if args.epochs is None else args.epochs
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.epochs is not None and args.epochs < 1:
        p.error("--epochs must be at least 1")
    if args.timeout_s < 1:
        p.error("--timeout_s must be at least 1")
    if args.workers < 1 or args.servers < 1:
        p.error("--workers and --servers must be at least 1")
    if not 0 <= args.slowdown_rank < args.workers:
        p.error(f"--slowdown_rank {args.slowdown_rank}: not a worker rank in [0, {args.workers})")
    try:
        args.slowdowns = [float(x) for x in args.slowdowns.split(",") if x.strip()]
    except ValueError:
        p.error(f"--slowdowns: not a comma-separated list of numbers: {args.slowdowns!r}")
    if not args.slowdowns or any(not (x >= 1.0) or math.isinf(x) for x in args.slowdowns):
        p.error("--slowdowns: factors must be finite and >= 1")
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown or not args.modes:
        p.error(f"--modes: unknown mode(s) {', '.join(unknown) or '(none given)'}; known: {', '.join(MODES)}")
    bin_dir = args.build
    if not os.path.exists(os.path.join(bin_dir, "tether-launch")) and os.path.exists(
            os.path.join(bin_dir, "bin", "tether-launch")):
        bin_dir = os.path.join(bin_dir, "bin")
    for b in ("tether-launch", "tether-worker"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            p.error(f"--build: no executable {b} in {bin_dir} (build it: cmake --build build --target {b})")
    args.bin = os.path.abspath(bin_dir)
    args.out = os.path.abspath(args.out)
    targets = {}
    for t in args.target:
        name, sep, value = t.partition("=")
        try:
            targets[name] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            p.error(f"--target {t!r}: expected NAME=VALUE, e.g. bibtex=0.55")
    metrics = {}
    for m in args.metric:
        name, sep, value = m.partition("=")
        if not sep or not value:
            p.error(f"--metric {m!r}: expected NAME=METRIC, e.g. tiny=precision_at_1")
        metrics[name] = value
    args.datasets = [parse_dataset(p, d.strip(), targets, metrics) for d in args.datasets.split(",") if d.strip()]
    if not args.datasets:
        p.error("--datasets: none given")
    names = [d["name"] for d in args.datasets]
    for n in set(targets) | set(metrics):
        if n not in names:
            p.error(f"--target/--metric name {n!r} is not one of the datasets ({', '.join(names)})")
    return args


def parse_dataset(p, spec, targets, metrics):
    name, sep, config = spec.partition("=")
    if sep:
        if not os.path.isfile(config):
            p.error(f"--datasets {spec!r}: no config file {config}")
        with open(config) as f:
            text = f.read()
        metric = metrics.get(name) or ("precision_at_1" if re.search(r"\bXMC_MLP\b", text) else "accuracy")
        target = targets.get(name)
        if target is None:
            p.error(f"--datasets {spec!r}: give its target with --target {name}=VALUE")
        return {"name": name, "config": os.path.abspath(config), "metric": metric, "target": target}
    if spec not in DATASETS:
        p.error(f"--datasets: unknown dataset {spec!r}; known: {', '.join(DATASETS)}, or NAME=CONFIG.pbtxt")
    d = DATASETS[spec]
    return {"name": spec, "config": os.path.join(REPO, d["config"]), "metric": metrics.get(spec, d["metric"]),
            "target": targets.get(spec, d["target"])}


# --------------------------------------------------------------------------- probing


def flags_of(binary):
    """The flag names `binary --help` lists."""
    try:
        r = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30,
                           text=True, errors="replace")
    except (OSError, subprocess.TimeoutExpired) as e:
        sys.exit(f"straggler_study: cannot run {binary} --help: {e}")
    return set(re.findall(r"^\s+--([A-Za-z0-9_]+)", r.stdout, re.M))


def flag_name(flag):
    return flag.lstrip("-").split("=", 1)[0]


def available_modes(args):
    """(runnable modes, {skipped mode: why}) for the built binaries."""
    launch = flags_of(os.path.join(args.bin, "tether-launch"))
    worker = flags_of(os.path.join(args.bin, "tether-worker"))
    worker_bytes = None
    ok, skipped = [], {}
    for m in args.modes:
        spec = MODES[m]
        missing = []
        for f in spec.get("flags", []):
            n = flag_name(f)
            lacking = [b for b, have in (("tether-launch", launch), ("tether-worker", worker)) if n not in have]
            if lacking:
                missing.append(f"--{n} (not listed by {' and '.join(lacking)} --help)")
        if spec.get("probe"):
            if worker_bytes is None:
                with open(os.path.join(args.bin, "tether-worker"), "rb") as f:
                    worker_bytes = f.read()
            missing += [f"config field {s!r} (not in tether-worker)" for s in spec["probe"]
                        if s.encode() not in worker_bytes]
        if missing:
            skipped[m] = "this build lacks " + ", ".join(missing)
        else:
            ok.append(m)
    return ok, skipped


# --------------------------------------------------------------------------- configs


def config_for(dataset, mode, run_dir):
    """The config path for a run: the dataset's own, or a copy with the mode's
    config text (data paths made absolute)."""
    edits = MODES[mode].get("config")
    if not edits:
        return dataset["config"]
    with open(dataset["config"]) as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(dataset["config"]))

    def absolute(m):
        entries = []
        for e in m.group(3).split(","):
            e = e.strip()
            entries.append(e if not e or os.path.isabs(e) else os.path.normpath(os.path.join(base, e)))
        return f'{m.group(1)}{m.group(2)}"{",".join(entries)}"'

    text = re.sub(r'^(\s*)((?:%s)\s*:\s*)"([^"]*)"' % "|".join(PATH_FIELDS), absolute, text, flags=re.M)
    for block, body in edits.items():
        pattern = re.compile(r"^%s\s*\{" % re.escape(block), re.M)  # top level only: column 0
        if pattern.search(text):
            text = pattern.sub(lambda m: m.group(0) + "\n  " + body + "\n", text, count=1)
        else:
            text += f"\n{block} {{\n  {body}\n}}\n"
    path = os.path.join(run_dir, "job.pbtxt")
    with open(path, "w") as f:
        f.write(f"# {dataset['config']} with the straggler study's mode {mode!r} (tools/straggler_study.py)\n")
        f.write(text)
    return path


# --------------------------------------------------------------------------- running

def run_one(args, dataset, slowdown, mode, rep):
    tag = f"{dataset['name']}-x{slowdown:g}-{mode}-r{rep + 1}"
    run_dir = os.path.join(args.out, "runs", tag)
    os.makedirs(run_dir, exist_ok=True)
    for f in os.listdir(run_dir):
        if f.endswith(".jsonl") or f in ("metrics.json", "job.pbtxt"):
            os.remove(os.path.join(run_dir, f))
    metrics_out = os.path.join(run_dir, "metrics.json")
    config = config_for(dataset, mode, run_dir)
    cmd = [os.path.join(args.bin, "tether-launch"), f"--config={config}", f"--metrics_out={metrics_out}",
           f"--metrics_dir={run_dir}", "--eval_every_epochs=1", f"--timeout_s={args.timeout_s}",
           f"--workers={args.workers}", f"--servers={args.servers}"]
    if slowdown > 1.0:
        cmd += [f"--slowdown={slowdown:g}", f"--slowdown_rank={args.slowdown_rank}"]
    if args.epochs is not None:
        cmd += [f"--epochs={args.epochs}"]
    if args.seeds is not None:
        cmd += [f"--seed={args.seeds[rep]}"]
    cmd += [f.replace("%DC_LAMBDA%", f"{args.delay_compensation:g}") for f in MODES[mode].get("flags", [])]
    cmd += args.extra
    result = {"dataset": dataset["name"], "slowdown": slowdown, "mode": mode, "repeat": rep + 1,
              "dir": run_dir, "status": "failed", "exit": None}
    log(f"{tag}: {' '.join(cmd)}")
    rc, result["wall_s"] = run_launch(cmd, os.path.join(run_dir, "log.txt"), args.timeout_s)
    result["exit"] = rc
    if rc != 0 or not os.path.exists(metrics_out):
        why = "timed out" if rc == 124 else f"exit {rc}" + ("" if rc != 0 else ", no metrics JSON")
        result["why"] = why
        log(f"{tag}: FAILED ({why}); see {run_dir}/log.txt")
        return result
    try:
        with open(metrics_out) as f:
            m = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        result["why"] = f"unreadable metrics JSON: {e}"
        log(f"{tag}: FAILED ({result['why']})")
        return result
    metric = dataset["metric"]
    curve = eval_curve(run_dir, metric)
    workers = sorted(m.get("workers", []), key=lambda w: w.get("rank", 0))
    epochs = m.get("epochs") or args.epochs
    clocks = []
    for w in workers:
        if isinstance(w.get("minibatches"), int):  # a per-worker count, where the metrics JSON has one
            clocks.append(w["minibatches"])
            continue
        rows = [r for r in read_jsonl(os.path.join(run_dir, f"worker-{w.get('rank', 0)}.jsonl"))
                if r.get("kind") == "clock"]
        clocks.append(max((int(r.get("clock", 0)) for r in rows), default=0))
    slowest = max((float(w.get("train_seconds", 0.0)) for w in workers), default=None)
    final = m.get(metric)
    problems = []
    if final is None:
        problems.append(f"no {metric} in the metrics JSON")
    if not workers or not epochs or not slowest:
        problems.append("no per-worker training times in the metrics JSON")
    if problems:
        result["why"] = "; ".join(problems)
        log(f"{tag}: FAILED ({result['why']})")
        return result
    result.update({
        "status": "ok",
        "epochs": epochs,
        "epoch_s": slowest / epochs,
        "train_s": slowest,
        "final": float(final),
        "time_to_target": next((t for t, v in curve if v >= dataset["target"]), math.inf),
        "updates": clocks,
        "rows": [int(w.get("samples", 0)) for w in workers],
        "wait": [float(w.get("wait_fraction", 0.0)) for w in workers],
        "bound_wait": [float(w.get("bound_wait_fraction", 0.0)) for w in workers],
        "curve": curve,
    })
    log(f"{tag}: {metric} {final:.4f}, {result['epoch_s']:.2f} s/epoch, updates {fmt_list(clocks)}, "
        f"waiting {fmt_list(result['wait'], '.2f')}")
    return result


# --------------------------------------------------------------------------- summarising


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else 0.5 * (xs[mid - 1] + xs[mid])


def fmt(x, spec=".2f"):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "not reached"
    return format(x, spec)


def fmt_list(xs, spec=".0f"):
    return "/".join(format(x, spec) for x in xs)


def summarise(runs):
    """Medians over the finished runs of one (dataset, slowdown, mode)."""
    ok = [r for r in runs if r["status"] == "ok"]
    row = {"runs": len(ok), "failed": len(runs) - len(ok)}
    if not ok:
        return row
    per_worker = lambda k: [median([r[k][i] for r in ok]) for i in range(min(len(r[k]) for r in ok))]  # noqa: E731
    ttt = median([r["time_to_target"] for r in ok])
    row.update({
        "epoch_s": median([r["epoch_s"] for r in ok]),
        "final": median([r["final"] for r in ok]),
        "time_to_target": ttt,
        "reached": sum(1 for r in ok if not math.isinf(r["time_to_target"])),
        "updates": per_worker("updates"),
        "rows": per_worker("rows"),
        "wait": per_worker("wait"),
        "wait_share": median([sum(r["wait"]) / len(r["wait"]) for r in ok]),
        "bound_wait_share": median([sum(r["bound_wait"]) / len(r["bound_wait"]) for r in ok]),
        # The run whose time per epoch is the median (the lower middle one
        # for an even count): its curve is the one plotted.
        "median_run": sorted(ok, key=lambda r: r["epoch_s"])[(len(ok) - 1) // 2],
    })
    return row


def criterion(args, table):
    a = CRITERION
    head = (f"Criterion ({a['dataset']}, one worker slowed {a['slowdown']:g}x, {args.workers} workers + "
            f"{args.servers} servers, s = 2, medians of {args.repeats} alternated runs)")
    ds = next((d for d in args.datasets if d["name"] == a["dataset"]), None)
    key = lambda m: (a["dataset"], a["slowdown"], m)  # noqa: E731
    missing = [m for m in (a["mode"], a["baseline"]) if not table.get(key(m), {}).get("runs")]
    if ds is None or missing:
        why = (f"{a['dataset']} not in --datasets" if ds is None
               else f"no finished run of {', '.join(missing)} at slowdown {a['slowdown']:g}")
        return f"{head}: NOT MEASURED ({why})", None
    ad, base = table[key(a["mode"])], table[key(a["baseline"])]
    epoch_ratio = ad["epoch_s"] / base["epoch_s"]
    if math.isinf(base["time_to_target"]):
        target_ratio = None  # the baseline never got there
    else:
        target_ratio = ad["time_to_target"] / base["time_to_target"]
    label = METRIC_LABEL.get(ds["metric"], ds["metric"])
    checks = [epoch_ratio <= a["max_epoch_ratio"],
              target_ratio is not None and target_ratio <= a["max_target_ratio"],
              ad["final"] >= a["min_final"]]
    verdict = "PASS" if all(checks) else "FAIL"
    if args.repeats < 3:
        verdict += f" (only {args.repeats} repeat(s); the criterion asks for 3)"
    line = (f"{head}: {verdict}. time per epoch {a['mode']} / {a['baseline']} = {epoch_ratio:.3f} "
            f"(≤ {a['max_epoch_ratio']} needed); time to {label} {ds['target']:g} ratio = "
            f"{fmt(target_ratio, '.3f') if target_ratio is not None else 'n/a (baseline did not reach it)'} "
            f"(≤ {a['max_target_ratio']} needed); {a['mode']} final {label} {ad['final']:.4f} "
            f"(≥ {a['min_final']} needed)")
    return line, {"epoch_ratio": epoch_ratio, "target_ratio": target_ratio, "final": ad["final"],
                  "pass": all(checks)}


CSV_COLUMNS = ["dataset", "slowdown", "mode", "metric", "target", "runs", "failed", "epoch_s", "final",
               "time_to_target_s", "target_reached_runs", "updates_per_worker", "rows_per_worker", "wait_share",
               "bound_wait_share", "wait_per_worker"]


def csv_number(x, spec=".4f"):
    return "" if x is None or (isinstance(x, float) and (math.isinf(x) or math.isnan(x))) else format(x, spec)


def write_outputs(args, modes, skipped, results, plt):
    table = {}
    for d in args.datasets:
        for s in args.slowdowns:
            for m in modes:
                table[(d["name"], s, m)] = summarise(
                    [r for r in results if (r["dataset"], r["slowdown"], r["mode"]) == (d["name"], s, m)])
    lines = ["# Straggler study", "",
             f"{args.workers} workers + {args.servers} servers, worker {args.slowdown_rank} slowed, rank 0 "
             f"evaluating after every epoch; medians of up to {args.repeats} alternated run(s) per mode"
             + (f", {args.epochs} epochs" if args.epochs else ", the configs' epochs") + ".", "",
             f"Command: `{args.command}`", ""]
    for m, why in skipped.items():
        lines.append(f"- mode `{m}` skipped: {why}")
    if skipped:
        lines.append("")
    csv_rows = []
    for d in args.datasets:
        label = METRIC_LABEL.get(d["metric"], d["metric"])
        for s in args.slowdowns:
            lines += [f"## {d['name']}, worker {args.slowdown_rank} slowed {s:g}×", "",
                      f"| mode | runs | s/epoch | final {label} | s to {label} ≥ {d['target']:g} | updates per worker "
                      "| rows per worker | waiting per worker | waiting on the bound |",
                      "|---|---|---|---|---|---|---|---|---|"]
            for m in modes:
                r = table[(d["name"], s, m)]
                runs = f"{r['runs']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
                if not r["runs"]:
                    lines.append(f"| {m} | {runs} | — | — | — | — | — | — | — |")
                else:
                    ttt = fmt(r["time_to_target"])
                    if r["reached"] < r["runs"]:
                        ttt += f" ({r['reached']}/{r['runs']} reached)"
                    lines.append(f"| {m} | {runs} | {fmt(r['epoch_s'])} | {fmt(r['final'], '.4f')} | {ttt} | "
                                 f"{fmt_list(r['updates'])} | {fmt_list(r['rows'])} | {fmt_list(r['wait'], '.3f')} | "
                                 f"{fmt(r['bound_wait_share'], '.3f')} |")
                csv_rows.append({
                    "dataset": d["name"], "slowdown": f"{s:g}", "mode": m, "metric": d["metric"],
                    "target": f"{d['target']:g}", "runs": r["runs"], "failed": r["failed"],
                    "epoch_s": csv_number(r.get("epoch_s")), "final": csv_number(r.get("final")),
                    "time_to_target_s": csv_number(r.get("time_to_target")),
                    "target_reached_runs": r.get("reached", 0),
                    "updates_per_worker": fmt_list(r["updates"]) if r["runs"] else "",
                    "rows_per_worker": fmt_list(r["rows"]) if r["runs"] else "",
                    "wait_share": csv_number(r.get("wait_share")),
                    "bound_wait_share": csv_number(r.get("bound_wait_share")),
                    "wait_per_worker": fmt_list(r["wait"], ".4f") if r["runs"] else "",
                })
            lines.append("")
            if plt is not None:
                plot(plt, args, d, s, modes, table)
                lines += [f"![{label} against training time]({d['name']}-x{s:g}.png)", ""]
    if plt is not None:
        lines += ["![every run's time per epoch and time to the target, per mode](spread.png)", ""]
    accept_line, accept = criterion(args, table)
    lines += [accept_line, ""]
    failed = [r for r in results if r["status"] != "ok"]
    if failed:
        lines += [f"{len(failed)} run(s) failed:", ""]
        lines += [f"- {r['dir']}: {r.get('why', 'failed')}" for r in failed]
        lines.append("")
    text = "\n".join(lines)
    with open(os.path.join(args.out, "study.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "study.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        w.writerows(csv_rows)
    run_cols = ["dataset", "slowdown", "mode", "repeat", "status", "exit", "why", "wall_s", "epoch_s", "final",
                "time_to_target", "updates", "rows", "wait", "dir"]
    with open(os.path.join(args.out, "runs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(run_cols)
        for r in results:
            # The run's folder relative to --out, so the file reads the same
            # wherever the study ran.
            cell = {"slowdown": f"{r['slowdown']:g}", "dir": os.path.relpath(r["dir"], args.out)}
            for c in ("updates", "rows", "wait"):
                if c in r:
                    cell[c] = fmt_list(r[c], ".4f" if c == "wait" else ".0f")
            w.writerow([cell[c] if c in cell else csv_number(r.get(c)) if isinstance(r.get(c), float)
                        else r.get(c, "") for c in run_cols])
    if plt is not None:
        targets = {d["name"]: f"{METRIC_LABEL.get(d['metric'], d['metric'])} {d['target']:g}" for d in args.datasets}
        draw_straggler(plt, read_study(os.path.join(args.out, "runs.csv")), os.path.join(args.out, "spread.png"),
                       targets)
    with open(os.path.join(args.out, "study.json"), "w") as f:
        json.dump({"datasets": args.datasets, "slowdowns": args.slowdowns, "modes": modes, "skipped": skipped,
                   "repeats": args.repeats, "epochs": args.epochs, "criterion": accept,
                   "modes_table": {m: MODES[m] for m in modes},
                   "runs": [{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
                            for r in results]}, f, indent=1)
    print(text)
    return len(failed)


def plot(plt, args, d, s, modes, table):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = 0
    for m in modes:
        r = table[(d["name"], s, m)]
        if r["runs"] and r["median_run"]["curve"]:
            pts = r["median_run"]["curve"]
            ax.plot([t for t, _ in pts], [v for _, v in pts], marker="o", ms=3, label=MODES[m].get("label", m))
            drawn += 1
    label = METRIC_LABEL.get(d["metric"], d["metric"])
    ax.axhline(d["target"], color="gray", ls="--", lw=0.8)
    ax.set_xlabel("rank 0's training time (s)")
    ax.set_ylabel(label)
    ax.set_title(f"{d['name']}: worker {args.slowdown_rank} slowed {s:g}×, median run per mode", fontsize=9)
    if drawn:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, f"{d['name']}-x{s:g}.png"), dpi=110)
    plt.close(fig)


def on_term(signum, frame):
    raise Interrupted(signum)


def main(argv=None):
    args = parse_args(argv)
    # Checked before the first run, not after an hour of training.
    plt = None if args.no_plot else import_pyplot("straggler_study", required=False)
    modes, skipped = available_modes(args)
    for m, why in skipped.items():
        log(f"mode {m} SKIPPED: {why}")
    if not modes:
        log("no mode can run with this build")
        return 1
    os.makedirs(args.out, exist_ok=True)
    for sig in STOP_SIGNALS:  # between runs; during one, run_launch ends it first
        signal.signal(sig, on_term)
    results = []
    plan = []
    for d in args.datasets:
        for s in args.slowdowns:
            for rep in range(args.repeats):
                order = modes[rep % len(modes):] + modes[:rep % len(modes)]
                plan += [(d, s, m, rep) for m in order]
    log(f"{len(plan)} runs: {', '.join(d['name'] for d in args.datasets)} × slowdown "
        f"{', '.join(f'{s:g}' for s in args.slowdowns)} × {', '.join(modes)} × {args.repeats} repeat(s)")
    try:
        for i, (d, s, m, rep) in enumerate(plan):
            log(f"run {i + 1}/{len(plan)}")
            results.append(run_one(args, d, s, m, rep))
    except (KeyboardInterrupt, Interrupted) as e:
        kill_group(current())
        log(f"interrupted after {len(results)} of {len(plan)} runs; writing what finished")
        write_outputs(args, modes, skipped, results, None)
        return e.code if isinstance(e, Interrupted) else 130
    failed = write_outputs(args, modes, skipped, results, plt)
    log(f"wrote {args.out}/study.md, study.csv, runs.csv, study.json" + ("" if plt is None else " and plots"))
    if failed:
        log(f"{failed} of {len(results)} run(s) FAILED")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
