"""Running tether-launch jobs from the study tools and reading what they wrote.

Shared by tools/staleness_sweep.py and tools/straggler_study.py:
  run_launch(cmd, log_path, timeout_s)  one job in a session of its own,
      bounded, its whole process group ended and reaped whatever happens;
  kill_group(proc)                      TERM, then KILL, the group of proc;
  read_jsonl(path)                      a metrics_dir JSON-lines file;
  eval_curve(metrics_dir, metric)       rank 0's per-epoch evaluations.

Not thread-safe: one job at a time (the running one is kept for a signal
handler, current()).
"""
import json
import os
import signal
import subprocess
import time

_current = {"proc": None}


def current():
    """The job running now (a subprocess.Popen), or None."""
    return _current["proc"]


def kill_group(proc, grace_s=5.0):
    """TERM then KILL the process group of proc (its own session), and reap it."""
    if proc is None or proc.returncode is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_launch(cmd, log_path, timeout_s):
    """Runs cmd (tether-launch ... --timeout_s=timeout_s) with stdout and
    stderr to log_path, in a session of its own. tether-launch's own
    --timeout_s ends the job first; past timeout_s plus a grace of
    min(30, 5 + timeout_s / 10) s the whole group is killed. Its group is
    ended and reaped on return, on Ctrl-C or on an error alike.
    Returns (exit status, 124 when it ran out of time; wall seconds)."""
    start = time.time()
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        _current["proc"] = proc
        try:
            rc = proc.wait(timeout=timeout_s + min(30, 5 + timeout_s // 10))
        except subprocess.TimeoutExpired:
            kill_group(proc)
            rc = 124
        finally:
            kill_group(proc)  # no-op once reaped; on Ctrl-C or an error it ends the job
            _current["proc"] = None
    return rc, time.time() - start


def read_jsonl(path):
    """The rows of a JSON-lines file ([] when it is missing); a torn last
    line of a killed run is skipped."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass  # a torn last line of a killed run
    return rows


def eval_curve(metrics_dir, metric):
    """(train seconds, metric) points from rank 0's per-epoch evaluations
    (metrics_dir/worker-0.jsonl, rows of kind "eval")."""
    pts = []
    for row in read_jsonl(os.path.join(metrics_dir, "worker-0.jsonl")):
        if row.get("kind") == "eval" and row.get(metric) is not None:
            pts.append((float(row.get("train_s", row.get("t", 0.0))), float(row[metric])))
    return pts
