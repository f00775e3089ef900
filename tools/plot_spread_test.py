#!/usr/bin/env python3
"""tools/plot_spread.py's data functions on the studies committed under
docs/sweeps/: the per-run values it draws give back, as medians, exactly the
figures of the tables the studies printed. Needs no matplotlib."""
import csv
import io
import json
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plot_spread  # noqa: E402

SWEEPS = os.path.join(os.path.dirname(HERE), "docs", "sweeps")


class SweepTest(unittest.TestCase):
    def test_runs_reproduce_the_medians_of_the_table(self):
        for name in ("bibtex", "a9a"):
            with open(os.path.join(SWEEPS, name, "sweep.json")) as f:
                sweep = json.load(f)
            runs = plot_spread.runs_of_sweep(sweep)
            self.assertEqual(list(runs), ["0", "1", "2", "4", "8", "inf"])
            for row in sweep["rows"]:
                got = runs[row["staleness"]]
                self.assertEqual(len(got), row["runs"])
                self.assertAlmostEqual(plot_spread.median([r["seconds_to_target"] for r in got]),
                                       row["seconds_to_target"], places=9)
                self.assertAlmostEqual(plot_spread.median([r["final"] for r in got]), row["final"], places=12)

    def test_given_per_run_values_win_over_the_curve(self):
        sweep = {"target": 0.5, "curves": {"0": [[[1.0, 0.4], [2.0, 0.6]], [[1.0, 0.3]]]},
                 "runs": {"0": [{"seconds_to_target": 1.5, "final": 0.65}]}}
        runs = plot_spread.runs_of_sweep(sweep)["0"]
        self.assertEqual((runs[0]["seconds_to_target"], runs[0]["final"]), (1.5, 0.65))
        self.assertEqual((runs[1]["seconds_to_target"], runs[1]["final"]), (None, 0.3))


class StudyTest(unittest.TestCase):
    def test_runs_reproduce_the_medians_of_study_csv(self):
        groups = plot_spread.read_study(os.path.join(SWEEPS, "straggler", "runs.csv"))
        self.assertEqual(sorted(groups), [("a9a", 2.0), ("a9a", 4.0), ("bibtex", 2.0), ("bibtex", 4.0)])
        with open(os.path.join(SWEEPS, "straggler", "study.csv"), newline="") as f:
            medians = list(csv.DictReader(f))
        self.assertEqual(len(medians), 24)
        for m in medians:
            runs = groups[(m["dataset"], float(m["slowdown"]))][m["mode"]]
            self.assertEqual(len(runs), int(m["runs"]))
            self.assertAlmostEqual(plot_spread.median([r["epoch_s"] for r in runs]), float(m["epoch_s"]), places=3)
            self.assertAlmostEqual(plot_spread.median([r["time_to_target"] for r in runs]),
                                   float(m["time_to_target_s"]), places=3)

    def test_failed_runs_are_left_out_and_inf_is_never_reached(self):
        text = ("dataset,slowdown,mode,repeat,status,exit,why,wall_s,epoch_s,final,time_to_target,updates,rows,wait,dir\n"
                "x,2,a,1,ok,0,,1,0.5,0.6,inf,1/1,2/2,0.1/0.1,runs/x\n"
                "x,2,a,2,failed,1,boom,1,,,,,,,runs/y\n")
        groups = plot_spread.runs_of_study(list(csv.DictReader(io.StringIO(text))))
        self.assertEqual(len(groups[("x", 2.0)]["a"]), 1)
        self.assertTrue(math.isinf(groups[("x", 2.0)]["a"][0]["time_to_target"]))


if __name__ == "__main__":
    unittest.main()
