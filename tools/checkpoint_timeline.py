#!/usr/bin/env python3
"""A stop and a resume on a timeline: what a checkpoint keeps.

Runs one job twice with tether-launch and draws worker 0's clock against
wall time:
  1. the job with a checkpoint every --every_clocks clocks, stopped as
     Ctrl-C stops it (SIGINT to tether-launch) once worker 0 passes
     --stop_at_clock: the workers take a stop checkpoint and leave (exit 130);
  2. the same job resumed from that checkpoint (--resume_from) to its end,
     which writes the final checkpoint.
The checkpoints each run wrote are read from its log (worker 0's
"checkpoint at clock C written" lines and their times), the clocks from
worker 0's JSON lines (--metrics_dir). Writes under --out:
  timeline.json  the points, the checkpoints, the stop and the exit codes;
  timeline.png   the picture (matplotlib: Debian's python3-matplotlib,
                 which scripts/setup.sh installs).
The runs' own files (metrics, checkpoints, logs) go to --work (default: a
temporary folder, removed at the end). --replot redraws timeline.png from
timeline.json without running anything.

  tools/checkpoint_timeline.py --out docs/checkpoints           # about a minute on 2 cores
  tools/checkpoint_timeline.py --out docs/checkpoints --replot

Every run is bounded (--timeout_s, given to tether-launch too) and its
process group is ended and reaped; the tool exits 1 when a run did not end
as expected (the stop with 130, the resume with 0).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tether_runs import kill_group, read_jsonl  # noqa: E402

# glog's prefix: I20261202 04:30:06.123456 ... [worker 0] checkpoint at clock 50 written: DIR (...)
CKPT = re.compile(r"^[IWE](\d{8}) (\d\d:\d\d:\d\d\.\d+).*\[worker 0\] (?:final )?checkpoint (?:at clock (\d+) )?"
                  r"written: (\S+)")


def log_time(day, clock):
    """Seconds since the epoch of a glog date and time (local time)."""
    return datetime.datetime.strptime(f"{day} {clock}", "%Y%m%d %H:%M:%S.%f").timestamp()


def checkpoints_in(log_path):
    """[(unix time, clock, the checkpoint's folder name)] of worker 0's
    written checkpoints."""
    out = []
    with open(log_path, errors="replace") as f:
        for line in f:
            m = CKPT.match(line)
            if m:
                clock = int(m.group(3)) if m.group(3) else None
                if clock is None:
                    tail = re.search(r"ckpt-0*(\d+)", m.group(4))
                    clock = int(tail.group(1)) if tail else None
                out.append((log_time(m.group(1), m.group(2)), clock, os.path.basename(m.group(4).rstrip("/"))))
    return out


def clocks_of(metrics_dir):
    """[(unix time, clock)] of worker 0's clock lines."""
    return [(r["unix_time"], r["clock"]) for r in read_jsonl(os.path.join(metrics_dir, "worker-0.jsonl"))
            if r.get("kind") == "clock" and "unix_time" in r]


def run(cmd, log_path, timeout_s, stop_when=None):
    """Runs cmd in a session of its own; stop_when() is polled every 50 ms
    and, once true, the launcher gets SIGINT (as from Ctrl-C). Returns
    (exit status, unix time of the SIGINT or None, start, end)."""
    start = time.time()
    stopped = None
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = start + timeout_s + 30
            while proc.poll() is None and time.time() < deadline:
                if stopped is None and stop_when is not None and stop_when():
                    stopped = time.time()
                    proc.send_signal(signal.SIGINT)
                time.sleep(0.05)
            rc = proc.returncode if proc.returncode is not None else 124
        finally:
            kill_group(proc)
    return rc, stopped, start, time.time()


def measure(args, work):
    for name in ("run1", "run2", "ckpt"):
        shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    launch = os.path.join(args.bin, "tether-launch")
    ckpt = os.path.join(work, "ckpt")
    common = [launch, "--config", args.config, f"--checkpoint_dir={ckpt}", f"--timeout_s={args.timeout_s}",
              f"--checkpoint_every_clocks={args.every_clocks}"] + args.extra
    run1 = os.path.join(work, "run1")

    def past_stop():
        c = clocks_of(run1)
        return bool(c) and c[-1][1] >= args.stop_at_clock

    rc1, stop_t, start1, end1 = run(common + [f"--metrics_dir={run1}"], os.path.join(work, "run1.log"),
                                     args.timeout_s, past_stop)
    run2 = os.path.join(work, "run2")
    rc2, _, start2, end2 = run(common + [f"--metrics_dir={run2}", f"--resume_from={ckpt}",
                                         f"--metrics_out={os.path.join(work, 'run2.json')}"],
                               os.path.join(work, "run2.log"), args.timeout_s)
    data = {"config": args.config, "every_clocks": args.every_clocks, "stop_at_clock": args.stop_at_clock,
            "t0": start1, "run1": {"start": start1, "end": end1, "exit": rc1, "stop": stop_t,
                                   "clocks": clocks_of(run1),
                                   "checkpoints": checkpoints_in(os.path.join(work, "run1.log"))},
            "run2": {"start": start2, "end": end2, "exit": rc2, "clocks": clocks_of(run2),
                     "checkpoints": checkpoints_in(os.path.join(work, "run2.log"))}}
    with open(os.path.join(args.out, "timeline.json"), "w") as f:
        json.dump(data, f)
        f.write("\n")
    ok = rc1 == 130 and rc2 == 0 and stop_t is not None
    print(f"checkpoint_timeline: run 1 exit {rc1} (stopped at {stop_t is not None}), run 2 exit {rc2}; "
          f"checkpoints {[c[1] for c in data['run1']['checkpoints']]} then "
          f"{[c[1] for c in data['run2']['checkpoints']]}")
    return data, ok


def draw(plt, data, path):
    t0 = data["t0"]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    r1, r2 = data["run1"], data["run2"]
    for r, color, label in ((r1, "tab:blue", "run 1"), (r2, "tab:green", "run 2: --resume_from")):
        pts = r["clocks"]
        ax.plot([t - t0 for t, _ in pts], [c for _, c in pts], color=color, lw=1.5, label=label)
        for t, c, _ in r["checkpoints"]:
            ax.plot(t - t0, c, "v", color="black", ms=7, zorder=5)
    ax.plot([], [], "v", color="black", label="checkpoint written (worker 0)")
    if r1["stop"] is not None:
        stop_clock = max((c for t, c in r1["clocks"] if t <= r1["stop"]), default=0)
        ax.axvline(r1["stop"] - t0, color="tab:red", ls="--", lw=1)
        ax.annotate("Ctrl-C (SIGINT)", (r1["stop"] - t0, stop_clock), xytext=(-120, 10),
                    textcoords="offset points", color="tab:red", fontsize=8,
                    arrowprops={"arrowstyle": "->", "color": "tab:red"})
    if r2["clocks"]:
        ax.axvspan(r2["start"] - t0, r2["clocks"][0][0] - t0, color="0.88",
                   label="run 2 starting: data read, checkpoint loaded")
    if r1["checkpoints"]:
        last = r1["checkpoints"][-1]
        ax.annotate(f"stop checkpoint, clock {last[1]}", (last[0] - t0, last[1]), xytext=(-150, 45),
                    textcoords="offset points", fontsize=8, arrowprops={"arrowstyle": "->"})
    if r2["clocks"]:
        t, c = r2["clocks"][0]
        ax.annotate(f"resumed: first clock {c}", (t - t0, c), xytext=(25, -40), textcoords="offset points",
                    fontsize=8, arrowprops={"arrowstyle": "->"})
    ax.set_xlabel("wall time since run 1 started (s)")
    ax.set_ylabel("worker 0's clock")
    ax.set_title(f"{os.path.basename(data['config'])}: a checkpoint every {data['every_clocks']} clocks, "
                 f"stopped past clock {data['stop_at_clock']}, then resumed", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin", default="build/bin", help="directory holding tether-launch")
    p.add_argument("--config", default="tests/data/bibtex_fixed.pbtxt")
    p.add_argument("--out", default="checkpoint-timeline", help="where timeline.json and timeline.png go")
    p.add_argument("--work", default=None, help="the runs' files (default: a temporary folder, removed)")
    p.add_argument("--every_clocks", type=int, default=50)
    p.add_argument("--stop_at_clock", type=int, default=130)
    p.add_argument("--timeout_s", type=int, default=300)
    p.add_argument("--replot", action="store_true", help="redraw timeline.png from timeline.json")
    p.add_argument("extra", nargs="*", help="more flags for tether-launch, after --")
    args = p.parse_args(argv)
    from plot_env import import_pyplot
    plt = import_pyplot("checkpoint_timeline")
    if args.replot:
        with open(os.path.join(args.out, "timeline.json")) as f:
            data, ok = json.load(f), True
    else:
        os.makedirs(args.out, exist_ok=True)
        work = args.work or tempfile.mkdtemp(prefix="checkpoint_timeline.")
        os.makedirs(work, exist_ok=True)
        try:
            data, ok = measure(args, work)
        finally:
            if args.work is None:
                shutil.rmtree(work, ignore_errors=True)
    draw(plt, data, os.path.join(args.out, "timeline.png"))
    print(f"checkpoint_timeline: wrote {os.path.join(args.out, 'timeline.png')}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
