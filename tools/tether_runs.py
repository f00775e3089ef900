"""Running tether-launch jobs from the study tools and reading what they wrote.

Shared by tools/search.py, staleness_sweep.py, mldr_bench.py, refit_bench.py
and straggler_study.py:
  run_launch(cmd, log_path, timeout_s)  one job in a session of its own,
      bounded, its whole process group ended and reaped whatever happens:
      on SIGTERM, SIGHUP or SIGINT to the tool too, which then exits
      128 + the signal (Interrupted);
  kill_group(proc)                      TERM, then KILL, the group of proc;
  read_jsonl(path)                      a metrics_dir JSON-lines file;
  eval_curve(metrics_dir, metric)       rank 0's per-epoch evaluations;
  refit_split(tree, out_dir, base_dir)  a refit's data.train_split: the
      training and validation split files' rows together.

Not thread-safe: one job at a time (the running one is kept for a signal
handler, current()).
"""
import gzip
import json
import os
import signal
import subprocess
import time

import pbtxt

_current = {"proc": None}

# The signals that end a tool while its job runs. The job runs in a session
# of its own (so a Ctrl-C reaches the tool only, which ends the job in
# order); without these handlers a SIGTERM or SIGHUP (timeout, a closed
# terminal, a scheduler) would end the tool and leave the job training.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Interrupted(SystemExit):
    """Raised by run_launch when the tool got one of STOP_SIGNALS while its
    job ran, after the job's process group has been ended and reaped. A
    SystemExit: uncaught, the tool exits 128 + the signal (143 for SIGTERM)
    without a traceback; .signum is the signal."""

    def __init__(self, signum):
        super().__init__(128 + signum)
        self.signum = signum


def _on_stop_signal(signum, frame):
    # A second signal while the job is being ended must not cut that short.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)


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
    ended and reaped on return, on an error, and on SIGTERM, SIGHUP or
    SIGINT to this process, which then raise Interrupted (exit 128 + the
    signal). Returns (exit status, 124 when it ran out of time; wall seconds)."""
    start = time.time()
    # Installed before the job starts, so that no signal finds it running
    # without them; the tool's own handlers are back once it is reaped.
    saved = {sig: signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS}
    try:
        with open(log_path, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            _current["proc"] = proc
            try:
                rc = proc.wait(timeout=timeout_s + min(30, 5 + timeout_s // 10))
            except subprocess.TimeoutExpired:
                kill_group(proc)
                rc = 124
            finally:
                kill_group(proc)  # no-op once reaped; on a signal or an error it ends the job
                _current["proc"] = None
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
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


def refit_split(tree, out_dir, base_dir="."):
    """For a refit on the training and validation rows together: when config tree `tree` names both
    data.train_split and data.validation_split (relative paths taken against base_dir), writes the rows of
    both (1-based, ascending, each once) to out_dir/train_and_validation.split and points data.train_split at
    it, as the validation file may name rows outside train_split. Returns the path written, or None."""
    train, val = pbtxt.get(tree, "data.train_split"), pbtxt.get(tree, "data.validation_split")
    if train is None or val is None:
        return None
    rows = set()
    for v in (train, val):
        path = os.path.join(base_dir, pbtxt.unquote(v))
        with open(path, "rb") as f:
            raw = f.read()
        rows.update(int(tok) for tok in (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).split())
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.abspath(os.path.join(out_dir, "train_and_validation.split"))
    with open(out, "w") as f:
        f.write("".join(f"{r}\n" for r in sorted(rows)))
    pbtxt.set_field(tree, "data.train_split", pbtxt.quote(out))
    return out
