#!/usr/bin/env python3
"""Settings search: runs a stated space of settings through tether-launch
and ranks them by a validation metric only.

The space is a text file in Protobuf text format (docs/MODELS.md,
"Choosing settings"):

  config: "../bibtex.pbtxt"          # base job config(s), relative to this file;
  config: "../other.pbtxt"           #   several: every trial runs on each
  metric: "validation_precision_at_1"  # a metrics JSON key of the validation split
  maximize: true                     # false for validation_log_loss
  strategy: RANDOM                   # RANDOM (trials draws) or GRID (every combination)
  trials: 20
  seed: 1                            # the draws' seed
  launch_flag: "--transport=inproc"  # flags for every tether-launch
  seeds: 3                           # runs each trial with train.seed 1, 2, 3 (default 1:
                                     #   the config's own seed) and ranks by their mean
  set { field: "train.validation_fraction" value: 0.2 }           # in every trial
  param { field: "optimizer.learning_rate" log_uniform { min: 0.0005 max: 0.01 } }
  param { field: "model.dropout" choice: 0 choice: 0.3 choice: 0.5 }
  param { field: "model.label_smoothing" uniform { min: 0 max: 0.3 } }
  param { field: "train.epochs" int_uniform { min: 5 max: 30 } }

A trial's score is the mean of the metric over the configs and seeds (each
run's metric is its kept epoch's, the best one on the validation rows):
with a validation split of a thousand rows a P@1 moves by about 1.5 points
from seed to seed, as much as the gaps between good trials, so a ranking
over several seeds is the surer one (at that many times the cost). The
test split is scored by every run at its end, as training always does, but
is read by nothing here: neither the ranking nor the tables show it, except
--refit's, which is the one final evaluation of the chosen settings.

Writes OUT/search.md (the command, the space, the ranked table), OUT/search.json,
OUT/best_settings.pbtxt (the chosen `set` lines) and OUT/best-NAME.pbtxt, the
full config of each base config with the chosen settings. Each run keeps its
config, log and metrics JSON under OUT/trial-NNN/NAME/; a run whose config
and metrics are already there is not run again (an interrupted search
resumes; a SIGTERM, SIGHUP or Ctrl-C ends the running job with all its
processes first, tools/tether_runs.py, and exits 128 + the signal). Before any run, every trial's config goes through `tether-launch
--check_config`: a field the schema lacks or a value the job refuses is
named with its trial, and the search exits 2 having run nothing (exit 2
too for a space the tool cannot read or a base config it cannot find, for
trials: 0, for a field on two set or param lines, and for a trial config
with no validation split; 1 when no trial finished). A metric name the
first finished run's metrics JSON lacks stops the search with exit 2,
naming the validation keys it has.

  --refit   then trains each config once more with the chosen settings on
            the training and validation rows together, for the epoch count
            its best run chose (metrics key best_epoch), and writes their
            test metrics to OUT/refit.md.

Example:
  python3 tools/search.py --space examples/search/bibtex_space.pbtxt --out search-bibtex
"""
import argparse
import itertools
import json
import math
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile

import pbtxt
from tether_runs import refit_split, run_launch

# Config fields that name files: a relative path in a base config is taken
# against that config's folder (as LoadJobConfig does), so trial configs,
# written elsewhere, get absolute ones.
DATA_PATH_FIELDS = ["data.train_file", "data.test_file", "data.train_split", "data.test_split",
                    "data.train_label_file", "data.test_label_file", "data.label_xml", "data.validation_split"]

# Fields a refit run leaves out: it trains on every training row.
VALIDATION_FIELDS = ["train.validation_fraction", "data.validation_split", "train.early_stopping",
                     "train.keep_best_model"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--space", required=True, help="the search space (.pbtxt, see above)")
    p.add_argument("--config", action="append", default=[],
                   help="a base config (repeatable); replaces the space's config lines")
    p.add_argument("--bin", default="build/bin", help="directory holding tether-launch")
    p.add_argument("--out", default="search", help="output directory")
    p.add_argument("--trials", type=int, default=None, help="override the space's trials (RANDOM)")
    p.add_argument("--timeout_s", type=int, default=900, help="bound on each run")
    p.add_argument("--refit", action="store_true", help="refit the best settings on training + validation rows")
    p.add_argument("--dry_run", action="store_true", help="write the trial configs and the plan; run nothing")
    return p.parse_args(argv)


class Space:
    """A parsed search space."""

    def __init__(self, path, configs_override):
        with open(path) as f:
            tree = pbtxt.parse(f.read(), path)
        known = {"config", "metric", "maximize", "strategy", "trials", "seed", "seeds", "launch_flag", "set", "param"}
        unknown = sorted({name for name, _ in tree} - known)
        if unknown:
            raise ValueError(f"{path}: unknown field(s) {', '.join(unknown)} (a space takes "
                             f"{', '.join(sorted(known))})")
        base = os.path.dirname(os.path.abspath(path))
        self.path = path
        self.configs = configs_override or [os.path.join(base, pbtxt.unquote(c)) for c in pbtxt.get_all(tree, "config")]
        if not self.configs:
            raise ValueError(f"{path}: no config line (and no --config)")
        self.metric = pbtxt.unquote(pbtxt.get(tree, "metric", '"validation_precision_at_1"'))
        if not self.metric.startswith("validation_"):
            raise ValueError(f"{path}: metric {self.metric!r} is not a validation_* key: the search ranks by the "
                             "validation split only")
        self.maximize = pbtxt.get(tree, "maximize", "true") == "true"
        self.strategy = pbtxt.get(tree, "strategy", "RANDOM")
        if self.strategy not in ("RANDOM", "GRID"):
            raise ValueError(f"{path}: strategy must be RANDOM or GRID, not {self.strategy}")
        self.trials = int(pbtxt.get(tree, "trials", "10"))
        self.seed = int(pbtxt.get(tree, "seed", "1"))
        self.launch_flags = [pbtxt.unquote(f) for f in pbtxt.get_all(tree, "launch_flag")]
        self.seeds = int(pbtxt.get(tree, "seeds", "1"))
        if self.seeds < 1:
            raise ValueError(f"{path}: seeds must be at least 1, not {self.seeds}")
        self.fixed = []
        for s in pbtxt.get_all(tree, "set"):
            self.fixed.append((pbtxt.unquote(pbtxt.get(s, "field", '""')), pbtxt.get(s, "value")))
        self.params = []
        for prm in pbtxt.get_all(tree, "param"):
            field = pbtxt.unquote(pbtxt.get(prm, "field", '""'))
            choices = pbtxt.get_all(prm, "choice")
            ranges = [k for k in ("uniform", "log_uniform", "int_uniform") if pbtxt.get(prm, k) is not None]
            if not field or (not choices and len(ranges) != 1) or (choices and ranges):
                raise ValueError(f"{path}: param {field or '?'}: give a field and either choices or one range")
            spec = {"field": field, "choices": choices}
            if ranges:
                r = pbtxt.get(prm, ranges[0])
                lo, hi = float(pbtxt.get(r, "min", "nan")), float(pbtxt.get(r, "max", "nan"))
                if not (lo <= hi) or (ranges[0] == "log_uniform" and lo <= 0):
                    raise ValueError(f"{path}: param {field}: {ranges[0]} needs min <= max (and > 0 for log)")
                spec.update(kind=ranges[0], lo=lo, hi=hi)
            self.params.append(spec)
        if self.strategy == "GRID" and any(not p["choices"] for p in self.params):
            raise ValueError(f"{path}: GRID takes choice lists only")
        if self.trials < 1:
            raise ValueError(f"{path}: trials must be at least 1, not {self.trials}")
        named = [f for f, _ in self.fixed] + [p["field"] for p in self.params]
        twice = sorted({f for f in named if named.count(f) > 1})
        if twice:
            raise ValueError(f"{path}: field(s) {', '.join(twice)} on more than one set or param line: the later "
                             "would silently replace the earlier; keep one")
        if self.seeds > 1 and "train.seed" in [f for f, _ in self.fixed] + [p["field"] for p in self.params]:
            raise ValueError(f"{path}: seeds: {self.seeds} sets train.seed itself; drop its set or param line")

    def runs(self, name):
        """A config's runs in a trial: (run folder name, extra settings), one per seed."""
        if self.seeds == 1:
            return [(name, [])]
        return [(f"{name}-seed{k}", [("train.seed", str(k))]) for k in range(1, self.seeds + 1)]

    def draws(self, trials=None):
        """The trials' settings: lists of (field, raw value)."""
        if self.strategy == "GRID":
            combos = itertools.product(*[[(p["field"], c) for c in p["choices"]] for p in self.params])
            return [list(c) for c in combos]
        rng = random.Random(self.seed)
        out = []
        for _ in range(trials or self.trials):
            setting = []
            for p in self.params:
                if p["choices"]:
                    v = rng.choice(p["choices"])
                elif p["kind"] == "int_uniform":
                    v = str(rng.randint(int(p["lo"]), int(p["hi"])))
                elif p["kind"] == "log_uniform":
                    v = f"{math.exp(rng.uniform(math.log(p['lo']), math.log(p['hi']))):.3g}"
                else:
                    v = f"{rng.uniform(p['lo'], p['hi']):.3g}"
                setting.append((p["field"], v))
            out.append(setting)
        return out


def load_config(path):
    with open(path) as f:
        tree = pbtxt.parse(f.read(), path)
    base = os.path.dirname(os.path.abspath(path))
    for field in DATA_PATH_FIELDS:
        v = pbtxt.get(tree, field)
        if v is None:
            continue
        parts = [p.strip() for p in pbtxt.unquote(v).split(",")]
        parts = [p if not p or os.path.isabs(p) else os.path.normpath(os.path.join(base, p)) for p in parts]
        pbtxt.set_field(tree, field, pbtxt.quote(",".join(parts)))
    return tree


def config_name(path):
    return os.path.splitext(os.path.basename(path))[0]


def with_settings(tree, settings):
    t = json.loads(json.dumps(tree))  # deep copy
    for field, value in settings:
        pbtxt.set_field(t, field, value)
    return t


def run_config(args, space, tree, run_dir, extra_flags=()):
    """Runs one job (or reuses its finished result); the metrics JSON or None."""
    os.makedirs(run_dir, exist_ok=True)
    cfg_path = os.path.join(run_dir, "config.pbtxt")
    metrics_path = os.path.join(run_dir, "metrics.json")
    text = pbtxt.dump(tree)
    if os.path.exists(metrics_path) and os.path.exists(cfg_path):
        with open(cfg_path) as f:
            if f.read() == text:
                with open(metrics_path) as m:
                    return json.load(m)
    with open(cfg_path, "w") as f:
        f.write(text)
    if os.path.exists(metrics_path):
        os.remove(metrics_path)
    cmd = [os.path.join(args.bin, "tether-launch"), "--config", cfg_path, "--metrics_out", metrics_path,
           f"--timeout_s={args.timeout_s}"] + space.launch_flags + list(extra_flags)
    if args.dry_run:
        print("[search] would run: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        return None
    rc, wall = run_launch(cmd, os.path.join(run_dir, "log.txt"), args.timeout_s)
    if rc != 0 or not os.path.exists(metrics_path):
        print(f"[search] {run_dir}: failed (exit {rc}); see its log.txt", flush=True)
        return None
    with open(metrics_path) as f:
        m = json.load(f)
    m.setdefault("wall_seconds", wall)
    return m


def check_trials(args, space, bases, draws):
    """Every trial's first run, for each base config, through `tether-launch
    --check_config` (the launcher's own checks: the fields, their values, the
    model, the data files; nothing is started) before any trial runs, so a
    field the schema lacks or a value the config refuses is named with its
    trial, not found by each run in turn. The problems, one line each."""
    launcher = os.path.join(args.bin, "tether-launch")
    problems = []
    with tempfile.TemporaryDirectory(prefix="check-", dir=args.out) as tmp:
        for i, setting in enumerate(draws):
            for name, tree in bases.items():
                extra = space.runs(name)[0][1]
                cfg = os.path.join(tmp, f"trial-{i:03d}-{name}.pbtxt")
                with open(cfg, "w") as f:
                    f.write(pbtxt.dump(with_settings(tree, list(space.fixed) + setting + extra)))
                try:
                    r = subprocess.run([launcher, "--config", cfg, "--check_config"] + space.launch_flags,
                                       capture_output=True, text=True, timeout=60)
                except (OSError, subprocess.TimeoutExpired) as e:
                    return [f"{launcher} --check_config: {e}"]
                if r.returncode != 0:
                    lines = [ln for ln in r.stderr.splitlines() if "[launch]" in ln] or r.stderr.splitlines()[-1:]
                    why = lines[-1].split("[launch] ", 1)[-1] if lines else f"exit {r.returncode}"
                    problems.append(f"trial {i:03d} ({name}, {setting}): {why}")
    return problems


class MetricMissing(Exception):
    """A finished run's metrics JSON lacks the space's metric: a misspelt
    name, found at the first run's end rather than after every trial."""


def check_validation(space, bases, draws):
    """A validation_* metric needs a validation split in every trial's config
    (train.validation_fraction > 0 or data.validation_split). The problems,
    one line each."""
    problems = []
    for i, setting in enumerate(draws):
        for name, tree in bases.items():
            t = with_settings(tree, list(space.fixed) + setting)
            fraction = pbtxt.get(t, "train.validation_fraction")
            try:
                split = fraction is not None and float(fraction) > 0
            except ValueError:
                split = True  # not a number: --check_config names it
            if not split and pbtxt.get(t, "data.validation_split") is None:
                problems.append(f"trial {i:03d} ({name}): metric {space.metric} reads the validation split, and "
                                "this config sets none: add set { field: \"train.validation_fraction\" value: 0.2 } "
                                "(or data.validation_split) to the space")
    return problems


def run_trial_config(args, space, tree, settings, trial_dir, name, trial):
    """Runs one config of a trial once per seed; records the mean metric and
    the median best epoch when every run finished."""
    scores, epochs = [], []
    for run_name, extra in space.runs(name):
        run_dir = os.path.join(trial_dir, run_name)
        m = run_config(args, space, with_settings(tree, settings + extra), run_dir)
        if m is not None and space.metric not in m:
            keys = sorted(k for k in m if k.startswith("validation_"))
            raise MetricMissing(f"{run_dir}/metrics.json has no key {space.metric!r}: the job writes "
                                f"{', '.join(keys) or 'no validation_* key'}")
        if m is None or m.get(space.metric) is None:
            return
        scores.append(float(m[space.metric]))
        epochs.append(m.get("best_epoch"))
        trial["train_seconds"] += float(m.get("train_seconds") or 0.0)
    trial["per_config"][name] = statistics.fmean(scores)
    known = [e for e in epochs if e is not None]
    trial["best_epoch"][name] = int(statistics.median_low(known)) if known else None


def fmt(v, spec=".4f"):
    return "–" if v is None else format(v, spec)


def rank_key(space, trial):
    s = trial["score"]
    if s is None:
        return (1, 0.0)
    return (0, -s if space.maximize else s)


def write_table(args, space, trials, command):
    names = [config_name(c) for c in space.configs]
    fields = [p["field"] for p in space.params]
    ranked = sorted(trials, key=lambda t: rank_key(space, t))
    lines = [f"# Settings search: {os.path.basename(space.path)}", "",
             "```", command, "```", "",
             f"{space.strategy} search, {len(trials)} trial(s), ranked by the mean {space.metric} over "
             f"{len(names)} config(s)" + (f" and {space.seeds} seeds (train.seed 1 to {space.seeds})"
                                          if space.seeds > 1 else "") +
             f" ({'higher' if space.maximize else 'lower'} is better). Each run keeps its "
             "best epoch on the validation rows (best epoch: the median over seeds, the lower middle one for an "
             "even count); the test split plays no part here.", ""]
    if space.fixed:
        lines.append("In every trial: " + ", ".join(f"`{f}: {v}`" for f, v in space.fixed) + ".")
        lines.append("")
    head = ["rank", "trial"] + [f"`{f}`" for f in fields] + names + ["mean", "best epoch", "train s"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for i, t in enumerate(ranked):
        vals = dict(t["settings"])
        row = [str(i + 1), f"{t['id']:03d}"] + [vals.get(f, "") for f in fields]
        row += [fmt(t["per_config"].get(n)) for n in names]
        row += [fmt(t["score"]), "/".join(str(t["best_epoch"].get(n, "–")) for n in names),
                fmt(t["train_seconds"], ".1f")]
        lines.append("| " + " | ".join(row) + " |")
    with open(os.path.join(args.out, "search.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "search.json"), "w") as f:
        json.dump({"command": command, "metric": space.metric, "configs": space.configs, "trials": ranked}, f,
                  indent=2)
    return ranked


def main(argv=None):
    args = parse_args(argv)
    try:
        space = Space(args.space, [os.path.abspath(c) for c in args.config])
    except (OSError, ValueError) as e:
        print(f"[search] {e}", file=sys.stderr)
        return 2
    if args.trials is not None and args.trials < 1:
        print(f"[search] --trials must be at least 1, not {args.trials}", file=sys.stderr)
        return 2
    try:
        bases = {config_name(c): load_config(c) for c in space.configs}
    except (OSError, ValueError) as e:
        print(f"[search] {args.space}: base config: {e}", file=sys.stderr)
        return 2
    if len(bases) != len(space.configs):
        print("[search] two base configs share a file name; rename one", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    command = "python3 " + " ".join(shlex.quote(a) for a in [sys.argv[0]] + (argv or sys.argv[1:]))
    draws = space.draws(args.trials)
    print(f"[search] {len(draws)} trial(s) x {len(bases)} config(s), metric {space.metric}", flush=True)
    problems = check_validation(space, bases, draws)
    if problems:
        print("[search] refused before any run:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    problems = check_trials(args, space, bases, draws)
    if problems:
        print("[search] refused before any run (tether-launch --check_config):\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 2
    trials = []
    for i, setting in enumerate(draws):
        settings = list(space.fixed) + setting
        trial = {"id": i, "settings": setting, "per_config": {}, "best_epoch": {}, "train_seconds": 0.0}
        for name, tree in bases.items():
            try:
                run_trial_config(args, space, tree, settings, os.path.join(args.out, f"trial-{i:03d}"), name, trial)
            except MetricMissing as e:
                print(f"[search] metric {space.metric}: {e}; stopped after the first run", file=sys.stderr)
                return 2
        done = len(trial["per_config"]) == len(bases)
        trial["score"] = statistics.fmean(trial["per_config"].values()) if done else None
        trials.append(trial)
        print(f"[search] trial {i:03d} {setting}: {space.metric} {fmt(trial['score'])}", flush=True)
        write_table(args, space, trials, command)
    if args.dry_run:
        return 0
    ranked = write_table(args, space, trials, command)
    best = ranked[0] if ranked and ranked[0]["score"] is not None else None
    if best is None:
        print("[search] no trial finished", file=sys.stderr)
        return 1
    chosen = list(space.fixed) + best["settings"]
    with open(os.path.join(args.out, "best_settings.pbtxt"), "w") as f:
        f.write(f"# {command}\n# trial {best['id']:03d}: mean {space.metric} {best['score']:.4f}\n")
        for field, value in chosen:
            f.write(f"set {{ field: {pbtxt.quote(field)} value: {value} }}\n")
    for name, tree in bases.items():
        with open(os.path.join(args.out, f"best-{name}.pbtxt"), "w") as f:
            f.write(f"# {command}\n# trial {best['id']:03d}\n" + pbtxt.dump(with_settings(tree, chosen)))
    print(f"[search] best: trial {best['id']:03d} {best['settings']} mean {space.metric} {best['score']:.4f}",
          flush=True)
    if args.refit:
        refit(args, space, bases, best, chosen, command)
    return 0


def refit(args, space, bases, best, chosen, command):
    """The chosen settings on training + validation rows, for the epochs the best run chose."""
    rows = []
    for name, tree in bases.items():
        t = with_settings(tree, chosen)
        refit_split(t, os.path.join(args.out, "refit", name))
        for field in VALIDATION_FIELDS:
            pbtxt.remove_field(t, field)
        epochs = best["best_epoch"].get(name)
        if epochs:
            pbtxt.set_field(t, "train.epochs", str(epochs))
        m = run_config(args, space, t, os.path.join(args.out, "refit", name))
        rows.append((name, epochs, m))
    keys = ["precision_at_1", "precision_at_3", "precision_at_5", "accuracy", "auc"]
    shown = [k for k in keys if any(m and m.get(k) is not None for _, _, m in rows)]
    lines = [f"# Refit of the chosen settings (trial {best['id']:03d})", "", "```", command, "```", "",
             "Trained on the training and validation rows together for the epochs the search's run chose; "
             "the test split's metrics, read once.", "",
             "| config | epochs | " + " | ".join(shown) + " |", "|---|---|" + "---|" * len(shown)]
    for name, epochs, m in rows:
        lines.append(f"| {name} | {epochs} | " + " | ".join(fmt(m.get(k) if m else None) for k in shown) + " |")
    with open(os.path.join(args.out, "refit.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
