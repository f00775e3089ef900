#!/usr/bin/env python3
"""tools/pbtxt.py, tools/search.py and tools/mldr_bench.py without running a
job: the text format round trip on the shipped example configs, field
edits, the search space's draws (fixed for a seed, inside their ranges,
every GRID combination once), the ranking by the validation metric only,
data paths made absolute, and the benchmark's reading of a data folder."""
import contextlib
import gzip
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mldr_bench  # noqa: E402
import refit_bench  # noqa: E402
import pbtxt  # noqa: E402
import search  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


class PbtxtTest(unittest.TestCase):
    def test_examples_round_trip(self):
        for name in sorted(os.listdir(EXAMPLES)):
            if not name.endswith(".pbtxt"):
                continue
            with open(os.path.join(EXAMPLES, name)) as f:
                tree = pbtxt.parse(f.read(), name)
            self.assertEqual(pbtxt.parse(pbtxt.dump(tree), name), tree, name)

    def test_get_set_remove(self):
        tree = pbtxt.parse('a { b: 1 c: "x y" }  # note\nd: ENUM\nr: 1 r: 2\nl: [3, 4]\n', "t")
        self.assertEqual(pbtxt.get(tree, "a.b"), "1")
        self.assertEqual(pbtxt.unquote(pbtxt.get(tree, "a.c")), "x y")
        self.assertEqual(pbtxt.get_all(tree, "r"), ["1", "2"])
        self.assertEqual(pbtxt.get_all(tree, "l"), ["3", "4"])
        pbtxt.set_field(tree, "r", "5")
        self.assertEqual(pbtxt.get_all(tree, "r"), ["5"])
        pbtxt.set_field(tree, "e.f.g", "0.5")
        self.assertEqual(pbtxt.get(tree, "e.f.g"), "0.5")
        pbtxt.remove_field(tree, "a.b")
        self.assertIsNone(pbtxt.get(tree, "a.b"))
        self.assertEqual(pbtxt.unquote(pbtxt.quote('say "hi"\\')), 'say "hi"\\')

    def test_errors_name_the_line(self):
        with self.assertRaisesRegex(ValueError, r"^f:2: missing '}'"):
            pbtxt.parse("a {\n b: 1\n", "f")
        with self.assertRaisesRegex(ValueError, r"^f:1: field a: expected ':' or '\{'"):
            pbtxt.parse("a 1", "f")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


class SearchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        write(os.path.join(self.dir, "data", "x.txt"), "")
        self.base = write(os.path.join(self.dir, "cfg", "job.pbtxt"),
                          'data { train_file: "../data/x.txt" index_base: 0 }\ntrain { epochs: 3 }\n')

    def space(self, body):
        return write(os.path.join(self.dir, "space.pbtxt"), 'config: "cfg/job.pbtxt"\n' + body)

    def test_random_draws_are_fixed_and_in_range(self):
        path = self.space('trials: 30 seed: 4\n'
                          'param { field: "optimizer.learning_rate" log_uniform { min: 0.001 max: 0.01 } }\n'
                          'param { field: "train.epochs" int_uniform { min: 5 max: 9 } }\n'
                          'param { field: "model.dropout" choice: 0 choice: 0.5 }\n')
        s = search.Space(path, [])
        draws = s.draws()
        self.assertEqual(len(draws), 30)
        self.assertEqual(draws, search.Space(path, []).draws())
        for d in draws:
            v = dict(d)
            self.assertTrue(0.001 <= float(v["optimizer.learning_rate"]) <= 0.01)
            self.assertIn(int(v["train.epochs"]), range(5, 10))
            self.assertIn(v["model.dropout"], ("0", "0.5"))
        self.assertEqual(s.configs, [os.path.join(self.dir, "cfg", "job.pbtxt")])

    def test_grid_is_every_combination(self):
        s = search.Space(self.space('strategy: GRID\nparam { field: "a.b" choice: 1 choice: 2 }\n'
                                    'param { field: "c" choice: X choice: Y choice: Z }\n'), [])
        self.assertEqual(len(s.draws()), 6)
        self.assertEqual(len({tuple(d) for d in s.draws()}), 6)

    def test_metric_must_be_a_validation_key(self):
        with self.assertRaisesRegex(ValueError, "validation split only"):
            search.Space(self.space('metric: "precision_at_1"\n'), [])

    def test_data_paths_become_absolute(self):
        tree = search.load_config(self.base)
        self.assertEqual(pbtxt.unquote(pbtxt.get(tree, "data.train_file")), os.path.join(self.dir, "data", "x.txt"))

    def test_ranking_uses_the_validation_metric(self):
        s = search.Space(self.space('metric: "validation_log_loss" maximize: false\n'), [])
        trials = [{"id": 0, "score": 0.5}, {"id": 1, "score": None}, {"id": 2, "score": 0.3}]
        ranked = sorted(trials, key=lambda t: search.rank_key(s, t))
        self.assertEqual([t["id"] for t in ranked], [2, 0, 1])

    def test_seeds_run_each_trial_once_per_seed(self):
        s = search.Space(self.space("seeds: 3\n"), [])
        self.assertEqual(s.runs("job"), [("job-seed1", [("train.seed", "1")]), ("job-seed2", [("train.seed", "2")]),
                                         ("job-seed3", [("train.seed", "3")])])
        self.assertEqual(search.Space(self.space(""), []).runs("job"), [("job", [])])
        with self.assertRaisesRegex(ValueError, "sets train.seed itself"):
            search.Space(self.space('seeds: 2\nparam { field: "train.seed" choice: 1 choice: 2 }\n'), [])
        with self.assertRaisesRegex(ValueError, "at least 1"):
            search.Space(self.space("seeds: 0\n"), [])

    def test_unknown_fields_are_named(self):
        with self.assertRaisesRegex(ValueError, "unknown field.*seedz"):
            search.Space(self.space("seedz: 2\n"), [])
        self.assertEqual(search.main(["--space", self.space("seeds: 0\n"), "--out", os.path.join(self.dir, "o")]), 2)

    def test_a_trials_score_is_the_mean_over_seeds(self):
        s = search.Space(self.space("seeds: 3\n"), [])
        tree = search.load_config(self.base)
        trial_dir = os.path.join(self.dir, "out", "trial-000")
        for k, (p1, epoch) in enumerate([(0.60, 7), (0.66, 9), (0.63, 12)], start=1):
            run_tree = search.with_settings(tree, [("train.seed", str(k))])
            run_dir = os.path.join(trial_dir, f"job-seed{k}")
            write(os.path.join(run_dir, "config.pbtxt"), pbtxt.dump(run_tree))
            write(os.path.join(run_dir, "metrics.json"),
                  json.dumps({"validation_precision_at_1": p1, "best_epoch": epoch, "train_seconds": 1.5}))
        args = search.parse_args(["--space", "x", "--bin", "/nonexistent"])
        trial = {"per_config": {}, "best_epoch": {}, "train_seconds": 0.0}
        search.run_trial_config(args, s, tree, [], trial_dir, "job", trial)
        self.assertAlmostEqual(trial["per_config"]["job"], 0.63)
        self.assertEqual(trial["best_epoch"]["job"], 9)
        self.assertAlmostEqual(trial["train_seconds"], 4.5)

    def test_finished_runs_are_reused(self):
        s = search.Space(self.space(""), [])
        tree = search.with_settings(search.load_config(self.base), [("model.dropout", "0.5")])
        run_dir = os.path.join(self.dir, "out", "trial-000", "job")
        write(os.path.join(run_dir, "config.pbtxt"), pbtxt.dump(tree))
        write(os.path.join(run_dir, "metrics.json"), json.dumps({"validation_precision_at_1": 0.6}))
        args = search.parse_args(["--space", "x", "--bin", "/nonexistent"])
        self.assertEqual(search.run_config(args, s, tree, run_dir)["validation_precision_at_1"], 0.6)


    def fake_launcher(self):
        """A tether-launch that refuses, as the real one does, a config with
        a field it does not know, and records each --check_config call."""
        bin_dir = os.path.join(self.dir, "bin")
        write(os.path.join(bin_dir, "tether-launch"),
              '#!/bin/sh\n'
              'echo "$@" >> "$(dirname "$0")/calls"\n'
              'if grep -q "learning_rat:" "$2"; then\n'
              '  echo "E1204 [launch] InvalidArgument: $2:5:3: no field \'learning_rat\' in message '
              'tether.OptimizerConfig" >&2; exit 2\n'
              'fi\n'
              'exit 0\n')
        os.chmod(os.path.join(bin_dir, "tether-launch"), 0o755)
        return bin_dir

    def test_trials_are_checked_before_any_run(self):
        bin_dir = self.fake_launcher()
        space = self.space('trials: 3\nseeds: 2\nlaunch_flag: "--transport=inproc"\n'
                           'set { field: "train.validation_fraction" value: 0.2 }\n'
                           'param { field: "optimizer.learning_rat" choice: 0.1 }\n')
        out = os.path.join(self.dir, "out")
        self.assertEqual(search.main(["--space", space, "--out", out, "--bin", bin_dir]), 2)
        with open(os.path.join(bin_dir, "calls")) as f:
            calls = f.read().splitlines()
        self.assertEqual(len(calls), 3)  # each trial's first seed, checked; none run
        self.assertTrue(all(c.endswith("--check_config --transport=inproc") for c in calls), calls)
        self.assertEqual(sorted(os.listdir(out)), [])  # no trial folder, the check's folder removed

    def test_trials_that_pass_the_check_are_named_nowhere(self):
        bin_dir = self.fake_launcher()
        s = search.Space(self.space('trials: 2\nparam { field: "model.dropout" choice: 0.5 }\n'), [])
        args = search.parse_args(["--space", "x", "--bin", bin_dir, "--out", self.dir])
        bases = {"job": search.load_config(self.base)}
        self.assertEqual(search.check_trials(args, s, bases, s.draws()), [])
        bad = search.Space(self.space('trials: 2\nparam { field: "optimizer.learning_rat" choice: 0.1 }\n'), [])
        problems = search.check_trials(args, bad, bases, bad.draws())
        self.assertEqual(len(problems), 2)
        self.assertRegex(problems[1], r"^trial 001 \(job, \[\('optimizer.learning_rat', '0.1'\)\]\): "
                                      r"InvalidArgument: .*no field 'learning_rat'")


    def test_bad_spaces_are_refused_before_any_run(self):
        with self.assertRaisesRegex(ValueError, "trials must be at least 1, not 0"):
            search.Space(self.space("trials: 0\n"), [])
        with self.assertRaisesRegex(ValueError, "field.s. model.dropout on more than one set or param line"):
            search.Space(self.space('set { field: "model.dropout" value: 0.1 }\n'
                                    'param { field: "model.dropout" choice: 0 choice: 0.5 }\n'), [])
        bin_dir = self.fake_launcher()
        out = os.path.join(self.dir, "out")
        err = io.StringIO()
        missing = write(os.path.join(self.dir, "missing_space.pbtxt"), 'config: "cfg/nope.pbtxt"\n')
        with contextlib.redirect_stderr(err):
            self.assertEqual(search.main(["--space", missing, "--out", out, "--bin", bin_dir]), 2)
            self.assertEqual(search.main(["--space", self.space(""), "--out", out, "--bin", bin_dir,
                                          "--trials", "0"]), 2)
            no_split = self.space('param { field: "model.dropout" choice: 0 choice: 0.5 }\n')
            self.assertEqual(search.main(["--space", no_split, "--out", out, "--bin", bin_dir]), 2)
        self.assertIn("nope.pbtxt", err.getvalue())
        self.assertIn("--trials must be at least 1, not 0", err.getvalue())
        self.assertIn("trial 001 (job): metric validation_precision_at_1 reads the validation split, and this "
                      "config sets none", err.getvalue())
        self.assertFalse(os.path.exists(os.path.join(bin_dir, "calls")), "no job checked or run")

    def test_a_misspelt_metric_stops_at_the_first_run(self):
        bin_dir = os.path.join(self.dir, "bin")
        write(os.path.join(bin_dir, "tether-launch"),
              '#!/bin/sh\n'
              'echo "$@" >> "$(dirname "$0")/calls"\n'
              'case "$*" in *--check_config*) exit 0;; esac\n'
              'echo \'{"validation_accuracy": 0.8, "validation_log_loss": 0.4, "accuracy": 0.7}\' > "$4"\n')
        os.chmod(os.path.join(bin_dir, "tether-launch"), 0o755)
        space = self.space('metric: "validation_acc" strategy: GRID\n'
                           'set { field: "train.validation_fraction" value: 0.2 }\n'
                           'param { field: "model.dropout" choice: 0 choice: 0.5 }\n')
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(search.main(["--space", space, "--out", os.path.join(self.dir, "out"),
                                          "--bin", bin_dir]), 2)
        self.assertIn("has no key 'validation_acc': the job writes validation_accuracy, validation_log_loss",
                      err.getvalue())
        with open(os.path.join(bin_dir, "calls")) as f:
            runs = [c for c in f.read().splitlines() if "--check_config" not in c]
        self.assertEqual(len(runs), 1, "stopped after the first run")


class MldrTest(unittest.TestCase):
    def test_reads_sets_splits_and_references(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        for name in ("aa", "bb_x"):
            write(os.path.join(d, f"{name}_data.txt.xz"), "")
            write(os.path.join(d, f"{name}_trSplit_seed1.txt"), "1\n")
            write(os.path.join(d, f"{name}_tstSplit_seed1.txt"), "2\n")
        write(os.path.join(d, "README.md"), "| files | rows |\n|---|---|\n| aa_* | 9 (6 / 3) |\n\n"
                                            "| data set | popularity | kNN (k = 10) |\n|---|---|---|\n"
                                            "| aa | 1.00 / 2.00 / 3.00 | 47.96 / 33.93 / 25.44 |\n")
        sets = mldr_bench.find_sets(d, [])
        self.assertEqual(sorted(sets), ["aa", "bb_x"])
        self.assertTrue(sets["aa"]["train_split"].endswith("aa_trSplit_seed1.txt"))
        self.assertEqual(mldr_bench.knn_reference(d), {"aa": (47.96, 33.93, 25.44)})

    def test_length_in_steps_scales_with_the_rows(self):
        tree = pbtxt.parse("cluster { num_workers: 2 }\n"
                           "train { epochs: 40 minibatch_size: 128 validation_fraction: 0.2 "
                           "early_stopping { patience: 4 } }\n")
        self.assertEqual(mldr_bench.set_length(tree, 4880, 640, 64), 16)  # Bibtex: 3,904 rows kept
        self.assertEqual(pbtxt.get(tree, "train.epochs"), "40")
        self.assertEqual(pbtxt.get(tree, "train.early_stopping.patience"), "4")
        self.assertEqual(mldr_bench.set_length(tree, 1117, 640, 64), 4)  # 894 rows kept: 447 per worker
        self.assertEqual(pbtxt.get(tree, "train.epochs"), "160")
        self.assertEqual(pbtxt.get(tree, "train.early_stopping.patience"), "16")

    def test_refit_config_drops_the_validation_split(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        cfg = os.path.join(d, "in.pbtxt")
        write(cfg, "train { epochs: 160 validation_fraction: 0.2 early_stopping { patience: 16 } seed: 1 }\n")
        with open(mldr_bench.refit_config(cfg, 65, os.path.join(d, "out.pbtxt"))) as f:
            tree = pbtxt.parse(f.read())
        self.assertEqual(tree, [["train", [["epochs", "65"], ["seed", "1"]]]])

    def test_refit_config_trains_on_the_validation_split_files_rows_too(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        write(os.path.join(d, "train.split"), "1\n2\n3\n5\n")
        write(os.path.join(d, "val.split"), "7\n2\n")
        cfg = os.path.join(d, "in.pbtxt")
        write(cfg, 'data { train_split: "train.split" validation_split: "val.split" }\n'
                   "train { epochs: 160 keep_best_model: true }\n")
        with open(mldr_bench.refit_config(cfg, 12, os.path.join(d, "refit", "out.pbtxt"))) as f:
            tree = pbtxt.parse(f.read())
        merged = os.path.join(d, "refit", "train_and_validation.split")
        self.assertEqual(tree, [["data", [["train_split", pbtxt.quote(merged)]]], ["train", [["epochs", "12"]]]])
        with open(merged) as f:
            self.assertEqual(f.read(), "1\n2\n3\n5\n7\n")


class RefitBenchTest(unittest.TestCase):
    def test_validation_config_counts_the_training_file(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        with gzip.open(os.path.join(d, "train.gz"), "wt") as f:
            f.write("1 1:1\n" * 7494)  # pendigits' rows
        write(os.path.join(d, "job.pbtxt"), 'cluster { num_workers: 2 }\ndata { train_file: "train.gz" }\n'
                                            "train { epochs: 30 minibatch_size: 64 }\n")
        args = refit_bench.parse_args(["--config", "x", "--out", d, "--validation_workers", "1"])
        with open(refit_bench.prepare(args, os.path.join(d, "job.pbtxt"))) as f:
            tree = pbtxt.parse(f.read())
        # 5,995 rows kept: 2,998 a worker, 47 steps an epoch; 640 and 64 steps
        self.assertEqual(pbtxt.get(tree, "train.epochs"), "14")
        self.assertEqual(pbtxt.get(tree, "train.early_stopping.patience"), "2")
        self.assertEqual(pbtxt.get(tree, "train.validation_fraction"), "0.2")
        self.assertEqual(pbtxt.get(tree, "cluster.num_workers"), "1")
        self.assertEqual(args.refit_workers, 2)
        self.assertEqual(pbtxt.unquote(pbtxt.get(tree, "data.train_file")), os.path.join(d, "train.gz"))

    def test_longest_run_within_noise_of_the_best(self):
        # 1,475 validation rows, best 0.9898 at epoch 9: one standard error
        # is sqrt(0.9898 * 0.0102 / 1475) = 0.00261, so 0.9878 (epoch 12)
        # is within it and 0.9851 (epoch 13) is not.
        records = [(e, v, 1475) for e, v in [(1, 0.9071), (8, 0.9851), (9, 0.9898), (10, 0.9871),
                                             (11, 0.9885), (12, 0.9878), (13, 0.9851)]]
        self.assertEqual(refit_bench.choose_epoch(records, 1.0), 12)
        # Two standard errors (0.00522) admit epoch 13 too; none, only the best.
        self.assertEqual(refit_bench.choose_epoch(records, 2.0), 13)
        self.assertEqual(refit_bench.choose_epoch(records, 0.0), 9)
        # A tie at the best: the longer one; no record, no choice.
        self.assertEqual(refit_bench.choose_epoch([(3, 0.9, 100), (5, 0.9, 100), (6, 0.5, 100)], 0.0), 5)
        self.assertIsNone(refit_bench.choose_epoch([], 1.0))
        self.assertIsNone(refit_bench.choose_epoch([(1, None, 100)], 1.0))

    def test_longest_validates_every_epoch(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        with gzip.open(os.path.join(d, "train.gz"), "wt") as f:
            f.write("1 1:1\n" * 7494)
        write(os.path.join(d, "job.pbtxt"), 'cluster { num_workers: 2 }\ndata { train_file: "train.gz" }\n'
                                            "train { epochs: 30 minibatch_size: 64 }\n")
        args = refit_bench.parse_args(["--config", "x", "--out", d, "--max_steps", "2560", "--select", "longest"])
        with open(refit_bench.prepare(args, os.path.join(d, "job.pbtxt"))) as f:
            tree = pbtxt.parse(f.read())
        # 2,998 rows a worker, 47 steps an epoch: 2560 steps are 55 epochs.
        self.assertEqual(pbtxt.get(tree, "train.epochs"), "55")
        self.assertEqual(pbtxt.get(tree, "train.early_stopping.patience"), "0")
        self.assertEqual(pbtxt.get(tree, "train.keep_best_model"), "false")
        self.assertEqual(pbtxt.get(tree, "cluster.num_workers"), "2")


if __name__ == "__main__":
    unittest.main()
