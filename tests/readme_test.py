#!/usr/bin/env python3
"""Every shell block of the README works as written after the quick start.

Each ```sh block of README.md runs, in order, with `bash -e -o pipefail`,
in a fresh folder laid out like a clone after the quick start: every
top-level entry of the repository linked in, and build/bin the binaries
under test. Outputs (metrics files, checkpoints, models) land in that
folder, so a later block sees what an earlier one wrote, as a reader
pasting them one after the other would. A block preceded by the line

    _Not run by the README test: REASON._

(in italics, so the reader sees it too) is skipped, and the REASON
(several hosts, SLURM, a GPU, ...) is printed; a marker without a reason
fails. Every block runs in a process group of its
own, bounded by --timeout_s, and whatever it left running is killed.

Usage: readme_test.py BIN_DIR [--readme README.md] [--timeout_s 300]
Exit 0 when every runnable block exits 0, 1 otherwise.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^_Not run by the README test: (.*?)\.?_\s*$")
FENCE = re.compile(r"^\s{0,3}(```|~~~)\s*([\w+-]*)")
SHELLS = {"sh", "bash", "shell"}


def blocks(text):
    """(line number, info string, body, skip reason or None) of each fenced block."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].lstrip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        prev = start - 1
        while prev >= 0 and not lines[prev].strip():
            prev -= 1
        marker = MARKER.match(lines[prev]) if prev >= 0 else None
        out.append((start + 1, info, "\n".join(body) + "\n", marker.group(1).strip() if marker else None,
                    marker is not None))
    return out


def kill_group(pgid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin_dir")
    p.add_argument("--readme", default=None)
    p.add_argument("--timeout_s", type=float, default=300)
    args = p.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme = args.readme or os.path.join(repo, "README.md")
    bin_dir = os.path.abspath(args.bin_dir)
    with open(readme, encoding="utf-8") as f:
        found = blocks(f.read())
    shell = [b for b in found if b[1] in SHELLS]
    if not shell:
        print(f"FAIL: {readme} has no shell block")
        return 1
    work = tempfile.mkdtemp(prefix="readme.")
    for name in os.listdir(repo):
        if name in (".git", "build") or name.startswith("build-"):
            continue
        os.symlink(os.path.join(repo, name), os.path.join(work, name))
    os.makedirs(os.path.join(work, "build"))
    os.symlink(bin_dir, os.path.join(work, "build", "bin"))
    try:
        return run_blocks(shell, work, args.timeout_s)
    finally:
        subprocess.run(["rm", "-rf", work])


def run_blocks(shell, work, timeout_s):
    failed = ran = 0
    for line, _, body, reason, marked in shell:
        if marked:
            if not reason:
                print(f"FAIL: README.md:{line}: a block marked not to run says no reason")
                failed += 1
            else:
                print(f"skip README.md:{line}: {reason}")
            continue
        ran += 1
        print(f"--- README.md:{line}\n{body.rstrip()}", flush=True)
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", "-e", "-o", "pipefail", "-c", body], cwd=work, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            out, _ = proc.communicate()
            rc = "timeout"
        kill_group(proc.pid)
        tail = "\n".join(out.decode("utf-8", "replace").rstrip().split("\n")[-15:])
        print(f"    exit {rc} after {time.monotonic() - t0:.1f} s", flush=True)
        if rc != 0:
            print(tail)
            print(f"FAIL: README.md:{line}: the block exited {rc}")
            failed += 1
    if failed:
        return 1
    print(f"PASS: {ran} README blocks ran, {len(shell) - ran} skipped with their reasons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
