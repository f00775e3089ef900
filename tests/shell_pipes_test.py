#!/usr/bin/env python3
"""No shell script pipes into a reader that stops early.

The test scripts run under `set -o pipefail`. A reader that exits at its
first match (`grep -q`, `grep -m N`) closes the pipe while the writer may
still be writing: `cat a.log b.log | grep -q X` matches in a.log, grep
exits, cat's write of b.log meets the closed pipe and dies of SIGPIPE
(status 141), and pipefail turns the found match into a failure. Whether it
happens depends on scheduling and on how many writes the writer makes
(`echo "$out"` of more than a stdio buffer is several), so such a check
passes for months and then fails once.

Every tracked shell script is searched for a pipe into `grep` with -q,
--quiet, --silent, -m or --max-count; any hit fails, naming file:line.
Write the check so that nothing is left writing:

  grep -q X <<< "$out"               a variable
  grep -q X a.log b.log              files
  grep -q X <<< "$(cmd)"             a command's whole output

Shell scripts are the tracked files named *.sh or *.sbatch, .ci/run, and
any file whose first line is a sh or bash shebang. Comments are skipped.

Usage: shell_pipes_test.py [REPO_ROOT]   (default: the current directory)
Exit 0 clean, 1 on any hit, 77 (skipped) when REPO_ROOT is not a git checkout.
"""
import os
import re
import subprocess
import sys

# A single '|' (not '||'), then optional line continuation, then grep with a
# flag cluster holding q or m, or the long forms.
EARLY_READER = re.compile(
    r"(?<!\|)\|(?!\|)\s*(?:\\\n\s*)?grep\s+(?:-[A-Za-z]*[qm][A-Za-z]*\b|--quiet\b|--silent\b|--max-count\b)")
SHEBANG = re.compile(rb"^#!\s*(?:/usr)?/bin/(?:env\s+)?(?:ba)?sh\b")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.decode().split("\0") if p]


def is_shell(root, path):
    if path.endswith((".sh", ".sbatch")) or path == ".ci/run":
        return True
    try:
        with open(os.path.join(root, path), "rb") as f:
            return bool(SHEBANG.match(f.readline()))
    except OSError:
        return False


def strip_comments(text):
    """Blank out comment lines, keeping line numbers."""
    return "\n".join("" if line.lstrip().startswith("#") else line for line in text.split("\n"))


def hits(text):
    """Yields the 1-based line of each pipe into an early-exiting grep."""
    text = strip_comments(text)
    for m in EARLY_READER.finditer(text):
        yield text.count("\n", 0, m.start()) + 1


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files = tracked_files(root)
    if files is None:
        print(f"SKIP: {root} is not a git checkout")
        return 77
    bad = 0
    checked = 0
    for path in files:
        full = os.path.join(root, path)
        if not os.path.isfile(full) or not is_shell(root, path):
            continue
        checked += 1
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for line in hits(text):
            print(f"{path}:{line}: a pipe into an early-exiting grep (-q/-m): under pipefail the writer's "
                  "SIGPIPE fails the check; grep the files, or use <<< \"$var\" / <<< \"$(cmd)\"")
            bad += 1
    print(f"{checked} shell scripts checked, {bad} pipe(s) into an early-exiting grep")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
