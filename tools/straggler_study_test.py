#!/usr/bin/env python3
"""Tests of tools/straggler_study.py against fake binaries (no training, a
few seconds): which modes a build can run, the config copy of a config-only
mode, the alternated order, the medians and the criterion line, a failed
run counted and the exit status, and no process outliving a run that timed
out or a Ctrl-C. The real binaries are exercised by straggler_study_test.sh.

Run: python3 tools/straggler_study_test.py (ctest: tools.straggler_study).
"""
import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import straggler_study as study  # noqa: E402

TOOL = os.path.join(HERE, "straggler_study.py")

# A fake tether-launch (and tether-worker: the same script; FAKE_HELP
# answers --help with the flags of $FAKE_FLAGS); a run does what
# $FAKE_BEHAVIOUR says:
#   ok:    writes the metrics JSON and JSON-lines metrics of a 2-worker job
#          whose figures depend on the mode's flags (see below), exit 0;
#   fail:  exit 3 on the run whose --staleness is $FAKE_FAIL_STALENESS,
#          ok otherwise;
#   hang:  starts a child `sleep` (its pid in $FAKE_PIDS) and sleeps.
FAKE = textwrap.dedent(r'''
    #!/usr/bin/env python3
    import json, os, subprocess, sys, time
    flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(json.dumps(flags) + "\n")
    behaviour = os.environ.get("FAKE_BEHAVIOUR", "ok")
    if behaviour == "hang":
        child = subprocess.Popen(["sleep", "300"])
        with open(os.environ["FAKE_PIDS"], "a") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
        time.sleep(300)
        sys.exit(0)
    if behaviour == "fail" and flags.get("staleness") == os.environ.get("FAKE_FAIL_STALENESS"):
        print("fake failure"); sys.exit(3)
    # adaptive: 1 s/epoch and both workers do 30 clocks; any other mode
    # 2 s/epoch and the slow worker does half the clocks. The repeat count
    # (lines in FAKE_CALLS) moves the figures a little, so medians differ
    # from means.
    calls = sum(1 for _ in open(os.environ["FAKE_CALLS"]))
    adaptive = flags.get("adaptive_batch") == "true"
    epochs = int(flags.get("epochs", 3))
    per_epoch = (1.0 if adaptive else 2.0) + 0.01 * calls
    d = flags["metrics_dir"]
    with open(os.path.join(d, "worker-0.jsonl"), "w") as f:
        for e in range(1, epochs + 1):
            f.write(json.dumps({"kind": "clock", "clock": 30 * e}) + "\n")
            f.write(json.dumps({"kind": "eval", "epoch": e, "train_s": per_epoch * e,
                                "precision_at_1": 0.5 + 0.05 * e}) + "\n")
        f.write('{"kind": "eval", "torn')
    with open(os.path.join(d, "worker-1.jsonl"), "w") as f:
        for e in range(1, epochs + 1):
            f.write(json.dumps({"kind": "clock", "clock": (30 if adaptive else 15) * e}) + "\n")
    workers = [{"rank": 1, "train_seconds": per_epoch * epochs, "samples": 100 * epochs, "wait_fraction": 0.1,
                "bound_wait_fraction": 0.0},
               {"rank": 0, "train_seconds": per_epoch * epochs - 0.5, "samples": 200 * epochs,
                "wait_fraction": 0.5, "bound_wait_fraction": 0.4}]
    if adaptive:  # a metrics JSON with per-worker minibatch counts: they win over the clocks
        for w in workers:
            w["minibatches"] = 31 * epochs
    with open(flags["metrics_out"], "w") as f:
        json.dump({"precision_at_1": 0.5 + 0.05 * epochs, "epochs": epochs, "workers": workers}, f)
''').lstrip()

FAKE_HELP = textwrap.dedent(r'''
    #!/usr/bin/env bash
    if [ "${1:-}" = --help ]; then
      printf 'usage: fake\nflags:\n'
      IFS=, read -ra flags <<<"$FAKE_FLAGS"
      for f in "${flags[@]}"; do printf '  --%s        help of %s\n' "$f" "$f"; done
      exit 0
    fi
    exec python3 FAKE_PY "$@"
''').lstrip()

ADAPTIVE_FLAGS = "chunk_taper,adaptive_batch,adaptive_batch_min,adaptive_batch_max,adaptive_batch_step"
ALL_FLAGS = "config,metrics_out,metrics_dir,eval_every_epochs,timeout_s,workers,servers,slowdown,slowdown_rank," \
            "epochs,staleness"


def state(pid):
    """The process's state letter (Z: a zombie), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return None


class StragglerStudyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        # The binaries are bash (--help, answered without starting Python:
        # the probes are most of the fake's calls), handing a run to fake.py.
        with open(os.path.join(self.bin, "fake.py"), "w") as f:
            f.write(FAKE)
        for b in ("tether-launch", "tether-worker"):
            path = os.path.join(self.bin, b)
            with open(path, "w") as f:
                f.write(FAKE_HELP.replace("FAKE_PY", os.path.join(self.bin, "fake.py")))
            os.chmod(path, 0o755)
        self.env = dict(os.environ, FAKE_CALLS=os.path.join(self.dir, "calls"),
                        FAKE_PIDS=os.path.join(self.dir, "pids"), FAKE_FLAGS=ALL_FLAGS)
        self.config = os.path.join(self.dir, "conf", "job.pbtxt")
        os.makedirs(os.path.dirname(self.config))
        with open(self.config, "w") as f:
            f.write('name: "tiny"\ndata {\n  train_file: "../d/train.txt,/abs/more.txt"\n  train_split: "s.txt"\n}\n'
                    'model { type: XMC_MLP }\nconsistency {\n  staleness: 2\n}\n'
                    'table {\n  name: "w1"\n  consistency { cache: false }\n}\n')
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def run_tool(self, *extra, timeout=60):
        cmd = [sys.executable, TOOL, "--build", self.bin, "--out", self.out, "--datasets",
               f"tiny={self.config}", "--target", "tiny=0.58", "--slowdowns", "2", "--no_plot", *extra]
        return subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)

    def calls(self):
        with open(self.env["FAKE_CALLS"]) as f:
            return [json.loads(line) for line in f]

    def study_csv(self):
        with open(os.path.join(self.out, "study.csv")) as f:
            return list(csv.DictReader(f))

    def test_modes_the_build_lacks_are_skipped_with_a_message(self):
        self.env["FAKE_FLAGS"] = ALL_FLAGS + ",data_on_demand,chunk_rows"  # nothing of adaptive or AVERAGE
        r = self.run_tool("--modes", "fixed_s2,on_demand,adaptive,average", "--repeats", "1", "--epochs", "2")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("mode adaptive SKIPPED: this build lacks --chunk_taper (not listed by tether-launch and "
                      "tether-worker --help), --adaptive_batch (not listed by tether-launch and tether-worker --help)",
                      r.stdout)
        self.assertIn("mode average SKIPPED: this build lacks --consistency_model", r.stdout)
        self.assertEqual([c.get("data_on_demand") for c in self.calls()], [None, "true"])
        self.assertEqual([row["mode"] for row in self.study_csv()], ["fixed_s2", "on_demand"])
        with open(os.path.join(self.out, "study.md")) as f:
            self.assertIn("- mode `adaptive` skipped: this build lacks --chunk_taper (not listed by tether-launch and "
                          "tether-worker --help), --adaptive_batch", f.read())

    def test_bad_options_are_refused_naming_the_option(self):
        for argv, message in ((["--modes", "fixed_s2,adaptve"], "--modes: unknown mode(s) adaptve; known: fixed_s0"),
                              (["--slowdown_rank", "2"], "--slowdown_rank 2: not a worker rank in [0, 2)"),
                              (["--slowdowns", "2,0.5"], "--slowdowns: factors must be finite and >= 1"),
                              (["--datasets", "mnist"], "--datasets: unknown dataset 'mnist'; known: bibtex, a9a"),
                              (["--datasets", "bibtex", "--target", "a9a=0.8"], "--target/--metric name 'a9a' is "
                               "not one of the datasets (bibtex)"),
                              (["--datasets", f"tiny={self.config}"], "give its target with --target tiny=VALUE")):
            err = io.StringIO()
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(err):
                study.parse_args(["--build", self.bin, *argv])
            self.assertEqual(e.exception.code, 2, err.getvalue())
            self.assertIn(message, err.getvalue())

    def test_no_runnable_mode_fails(self):
        r = self.run_tool("--modes", "adaptive")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("no mode can run with this build", r.stdout)

    def test_alternated_repeats_medians_and_criterion(self):
        self.env["FAKE_FLAGS"] = ALL_FLAGS + ",data_on_demand,chunk_rows," + ADAPTIVE_FLAGS
        r = self.run_tool("--modes", "fixed_s2,adaptive", "--repeats", "3", "--epochs", "3")
        self.assertEqual(r.returncode, 0, r.stdout)
        calls = self.calls()
        # Round-robin, the order rotated each repeat: never all repeats of one mode in a row.
        self.assertEqual([c.get("adaptive_batch", "fixed") for c in calls],
                         ["fixed", "true", "true", "fixed", "fixed", "true"])
        for c in calls:
            self.assertEqual((c["staleness"], c["slowdown"], c["slowdown_rank"], c["workers"], c["servers"],
                              c["eval_every_epochs"], c["epochs"]), ("2", "2", "1", "2", "2", "1", "3"))
        rows = {row["mode"]: row for row in self.study_csv()}
        self.assertEqual(list(rows["fixed_s2"].keys()), study.CSV_COLUMNS)
        fixed, adaptive = rows["fixed_s2"], rows["adaptive"]
        # fixed ran as calls 1, 4, 5: s/epoch 2.01, 2.04, 2.05 -> median 2.04;
        # adaptive as calls 2, 3, 6: 1.02, 1.03, 1.06 -> 1.03.
        self.assertEqual((fixed["runs"], fixed["failed"], fixed["epoch_s"]), ("3", "0", "2.0400"))
        self.assertEqual(adaptive["epoch_s"], "1.0300")
        self.assertEqual(fixed["final"], "0.6500")
        # P@1 0.58 first reached at epoch 2 (0.6): 2 x s/epoch.
        self.assertEqual((fixed["time_to_target_s"], fixed["target_reached_runs"]), ("4.0800", "3"))
        self.assertEqual((fixed["updates_per_worker"], adaptive["updates_per_worker"]), ("90/45", "93/93"))
        self.assertEqual(fixed["rows_per_worker"], "600/300")
        self.assertEqual((fixed["wait_per_worker"], fixed["wait_share"], fixed["bound_wait_share"]),
                         ("0.5000/0.1000", "0.3000", "0.2000"))
        # The criterion line names a dataset called bibtex; "tiny" is not it.
        self.assertIn("NOT MEASURED (bibtex not in --datasets)", r.stdout)
        args = study.parse_args(["--build", self.bin, "--datasets", "bibtex", "--repeats", "3"])
        table = {("bibtex", 2.0, "fixed_s2"): {"runs": 3, "epoch_s": 2.0, "time_to_target": 8.0, "final": 0.61},
                 ("bibtex", 2.0, "adaptive"): {"runs": 3, "epoch_s": 1.4, "time_to_target": 5.6, "final": 0.605}}
        line, res = study.criterion(args, table)
        self.assertEqual(line, "Criterion (bibtex, one worker slowed 2x, 2 workers + 2 servers, s = 2, "
                         "medians of 3 alternated runs): PASS. time per epoch adaptive / fixed_s2 = 0.700 "
                         "(≤ 0.75 needed); time to P@1 0.55 ratio = 0.700 (≤ 0.75 needed); adaptive final P@1 "
                         "0.6050 (≥ 0.6 needed)")
        self.assertTrue(res["pass"])
        table[("bibtex", 2.0, "adaptive")]["time_to_target"] = 6.4  # 0.8 of the baseline's
        self.assertFalse(study.criterion(args, table)[1]["pass"])
        table[("bibtex", 2.0, "adaptive")].update(time_to_target=5.6, final=0.59)
        self.assertFalse(study.criterion(args, table)[1]["pass"])
        table[("bibtex", 2.0, "fixed_s2")]["time_to_target"] = float("inf")  # the baseline never got there
        self.assertIn("ratio = n/a (baseline did not reach it)", study.criterion(args, table)[0])
        del table[("bibtex", 2.0, "adaptive")]
        self.assertIn("NOT MEASURED (no finished run of adaptive at slowdown 2)", study.criterion(args, table)[0])

    @unittest.skipUnless(subprocess.run(["/usr/bin/python3", "-c", "import matplotlib"], stderr=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL).returncode == 0,
                         "SKIP: Debian's python3-matplotlib is not installed (scripts/setup.sh installs it)")
    def test_plots_with_matplotlib(self):
        cmd = [sys.executable, TOOL, "--build", self.bin, "--out", self.out, "--datasets", f"tiny={self.config}",
               "--target", "tiny=0.58", "--slowdowns", "2,4", "--modes", "fixed_s2", "--quick"]
        r = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout)
        for png in ("tiny-x2.png", "tiny-x4.png"):
            with open(os.path.join(self.out, png), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        with open(os.path.join(self.out, "study.md")) as f:
            self.assertIn("![P@1 against training time](tiny-x4.png)", f.read())

    def test_a_failed_run_is_counted_and_the_exit_is_nonzero(self):
        self.env.update(FAKE_BEHAVIOUR="fail", FAKE_FAIL_STALENESS="inf")
        r = self.run_tool("--modes", "fixed_s2,fixed_sinf", "--repeats", "2", "--epochs", "2")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED (exit 3)", r.stdout)
        self.assertIn("2 of 4 run(s) FAILED", r.stdout)
        rows = {row["mode"]: row for row in self.study_csv()}
        self.assertEqual((rows["fixed_sinf"]["runs"], rows["fixed_sinf"]["failed"], rows["fixed_sinf"]["epoch_s"]),
                         ("0", "2", ""))
        self.assertEqual((rows["fixed_s2"]["runs"], rows["fixed_s2"]["failed"]), ("2", "0"))
        with open(os.path.join(self.out, "runs.csv")) as f:
            runs = list(csv.DictReader(f))
        self.assertEqual(sorted((r["mode"], r["status"], r["exit"]) for r in runs),
                         [("fixed_s2", "ok", "0")] * 2 + [("fixed_sinf", "failed", "3")] * 2)
        ok = next(r for r in runs if r["status"] == "ok")
        self.assertEqual((ok["slowdown"], ok["updates"], ok["rows"], ok["wait"], ok["final"]),
                         ("2", "60/30", "400/200", "0.5000/0.1000", "0.6000"))
        self.assertEqual(next(r for r in runs if r["status"] == "failed")["why"], "exit 3")

    def test_config_only_mode_gets_a_copy_with_absolute_paths(self):
        args = study.parse_args(["--build", self.bin, "--datasets", f"tiny={self.config}", "--target", "tiny=0.5"])
        run_dir = os.path.join(self.dir, "run")
        os.makedirs(run_dir)
        self.assertEqual(study.config_for(args.datasets[0], "fixed_s2", run_dir), self.config)
        with open(study.config_for(args.datasets[0], "average", run_dir)) as f:
            text = f.read()
        conf = os.path.dirname(self.config)
        self.assertIn(f'train_file: "{os.path.join(self.dir, "d", "train.txt")},/abs/more.txt"', text)
        self.assertIn(f'train_split: "{os.path.join(conf, "s.txt")}"', text)
        # Into the job's consistency block, not the table's.
        self.assertIn("consistency {\n  period_rows: 64\n\n  staleness: 2\n}", text)
        self.assertIn("  consistency { cache: false }\n", text)

    def wait_for_pids(self, n, bound_s=20):
        deadline = time.time() + bound_s
        while time.time() < deadline:
            if os.path.exists(self.env["FAKE_PIDS"]):
                with open(self.env["FAKE_PIDS"]) as f:
                    pids = [int(p) for line in f for p in line.split()]
                if len(pids) >= 2 * n:
                    return pids
            time.sleep(0.05)
        self.fail(f"the fake launch did not start {n} time(s) within {bound_s} s")

    def assert_all_gone(self, pids, bound_s=20):
        deadline = time.time() + bound_s
        alive = pids
        while time.time() < deadline:
            alive = [p for p in pids if state(p) not in (None, "Z")]
            if not alive:
                return
            time.sleep(0.05)
        for p in alive:  # ours: the fake's processes, by pid
            os.kill(p, signal.SIGKILL)
        self.fail(f"processes {alive} outlived the study")

    def test_a_run_past_its_timeout_is_killed_with_its_children(self):
        self.env["FAKE_BEHAVIOUR"] = "hang"
        r = self.run_tool("--modes", "fixed_s2", "--repeats", "1", "--timeout_s", "1", timeout=120)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("FAILED (timed out)", r.stdout)
        self.assert_all_gone(self.wait_for_pids(1))

    def test_ctrl_c_kills_the_job_and_writes_what_finished(self):
        self.env["FAKE_BEHAVIOUR"] = "hang"
        cmd = [sys.executable, TOOL, "--build", self.bin, "--out", self.out, "--datasets", f"tiny={self.config}",
               "--target", "tiny=0.6", "--modes", "fixed_s2", "--no_plot"]
        p = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            pids = self.wait_for_pids(1)
            p.send_signal(signal.SIGINT)
            out, _ = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 130, out)
        self.assertIn("interrupted after 0 of 6 runs", out)
        self.assertTrue(os.path.exists(os.path.join(self.out, "study.csv")))
        self.assert_all_gone(pids)


if __name__ == "__main__":
    unittest.main(verbosity=2)
