#!/usr/bin/env python3
"""Tests of tools/tether_runs.py's run_launch against a fake job (a shell
that starts a child and sleeps; a few seconds): a SIGTERM, SIGHUP or SIGINT
to the tool while its job runs ends and reaps the job's whole process
group, and the tool exits 128 + the signal.

Run: python3 tools/tether_runs_test.py (ctest: unit.tether_runs).
"""
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

# The tool: runs one job through run_launch; a job ending by itself would
# print "job ended" and exit 0.
TOOL = textwrap.dedent(r'''
    import sys
    sys.path.insert(0, sys.argv[1])
    import tether_runs
    rc, _ = tether_runs.run_launch(["sh", "-c", "sleep 300 & echo $$ > " + sys.argv[2] + "; wait"], sys.argv[3], 300)
    print("job ended", rc)
''')


def group_members(pgid):
    """Pids of the live (not zombie) processes of process group pgid."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def poll_until(predicate, bound_s):
    deadline = time.time() + bound_s
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


class RunLaunchSignalTest(unittest.TestCase):
    def run_and_signal(self, sig):
        with tempfile.TemporaryDirectory() as d:
            pid_file, log = os.path.join(d, "pgid"), os.path.join(d, "log.txt")
            tool = subprocess.Popen([sys.executable, "-c", TOOL, HERE, pid_file, log], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            pgid = None
            try:
                read = lambda: open(pid_file).read().strip() if os.path.exists(pid_file) else ""  # noqa: E731
                text = poll_until(read, 30)
                self.assertTrue(text, "the fake job did not start within 30 s")
                pgid = int(text)  # the job's shell leads its own session and group
                self.assertEqual(len(poll_until(lambda: len(group_members(pgid)) >= 2 and group_members(pgid), 30)),
                                 2, "the job's shell and its child")
                tool.send_signal(sig)
                out, _ = tool.communicate(timeout=30)
            finally:
                if tool.poll() is None:
                    tool.kill()
                    tool.wait()
                left = []
                if pgid is not None:
                    poll_until(lambda: not group_members(pgid), 20)
                    left = group_members(pgid)
                if left:
                    os.killpg(pgid, signal.SIGKILL)  # ours: the fake job's group
            self.assertEqual(tool.returncode, 128 + sig, out)
            self.assertNotIn("job ended", out)
            self.assertNotIn("Traceback", out)
            self.assertEqual(left, [], f"processes of the job's group outlived the tool after signal {sig}")

    def test_sigterm_ends_the_job_group(self):
        self.run_and_signal(signal.SIGTERM)

    def test_sighup_ends_the_job_group(self):
        self.run_and_signal(signal.SIGHUP)

    def test_sigint_ends_the_job_group(self):
        self.run_and_signal(signal.SIGINT)


if __name__ == "__main__":
    unittest.main(verbosity=2)
