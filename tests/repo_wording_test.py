#!/usr/bin/env python3
"""The repository describes the product, never its making.

Every tracked text file is searched for the forms below; any hit fails the
test, naming file:line and the form. There are no exceptions: reword the
text (an upstream project's report is cited as owner/repo#N).

  issue-number    "issue N" / "issues N" / "issue #N", any case
  session         an ordinal, or this/previous/last/same/each/every,
                  followed by "session"
  helper-name     the word for a helper followed by a letter that names
                  someone (joined by a dash, or a capital letter)
  device-loan     the device tool's words for a machine it did not hand out
  shared-folder   the relative path of the development machines' shared folder
  machine-path    absolute paths of the development machines

The patterns are assembled from pieces so that this file does not match
itself. Binary files (a NUL byte in the first 8 KiB) are skipped.

Usage: repo_wording_test.py [REPO_ROOT]   (default: the current directory)
Exit 0 clean, 1 on any hit, 77 (skipped) when REPO_ROOT is not a git checkout.
"""
import os
import re
import subprocess
import sys

ORDINALS = ("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
            "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth")
SESSION = "ses" + "sion"
FORMS = [
    ("issue-number", re.compile(r"\b" + "is" + "sues?" + r"\s*#?\s*\d", re.I)),
    ("session", re.compile(r"\b(?:" + "|".join(ORDINALS.split()) + r"|\d+(?:st|nd|rd|th)"
                           r"|this|previous|last|same|each|every)\s+" + SESSION, re.I)),
    ("helper-name", re.compile(r"\b(?i:" + "hel" + "per" + r")(?:[-_][A-Za-z]|[ ]?[A-Z])\b")),
    ("device-loan", re.compile("not" + "_" + "drawn" + "|" + r"\bnot\s+" + "le" + "nt\\b", re.I)),
    ("shared-folder", re.compile(r"\.\./" + "sha" + "red\\b")),
    ("machine-path", re.compile(r"(?<![\w.$}/-])/(?:" + "wo" + "rk" + "|" + "ro" + "ot" + r")/")),
]


# Each form must catch its samples and leave the product's own words alone
# (assembled from pieces too).
SAMPLES = {
    "issue-number": (["Is" + "sue 13", "is" + "sues 4 and 14", "is" + "sue #7"],
                     ["owner/repo#12", "tis" + "sue 3", "the is" + "sue of a request"]),
    "session": (["the six" + "th " + SESSION, "this " + SESSION + "'s change", "Eve" + "ry " + SESSION,
                 "2n" + "d " + SESSION],
                ["a " + SESSION + " of its own", "its own " + SESSION]),
    "helper-name": (["hel" + "per D", "hel" + "per-f", "Hel" + "perB"],
                    ["hel" + "per function", "hel" + "pers", "Tokenizing hel" + "pers shared"]),
    "device-loan": (["not" + "_drawn", "was not" + " lent"], ["not lentil"]),
    "shared-folder": (["../sha" + "red/cases"], ["../shared_ptr", "shared/"]),
    "machine-path": (["/wo" + "rk/main", "`/ro" + "ot/x`", "path=/wo" + "rk/x"],
                     ["net" + "work/", "$tmp/wo" + "rk/x", "./wo" + "rk/", "frame" + "work/x"]),
}


def self_check():
    bad = []
    for name, rx in FORMS:
        yes, no = SAMPLES[name]
        bad += [f"{name} misses '{s}'" for s in yes if not rx.search(s)]
        bad += [f"{name} wrongly matches '{s}'" for s in no if rx.search(s)]
    return bad


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, str(e)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p], None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = self_check()
    if bad:
        print("FAIL: the patterns themselves: " + "; ".join(bad))
        return 1
    files, err = tracked_files(root)
    if files is None:
        print(f"SKIP: {root} is not a git checkout ({err.strip()}); the wording check reads `git ls-files`")
        return 77
    hits = 0
    scanned = 0
    for rel in files:
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:
            continue
        scanned += 1
        text = data.decode("utf-8", "replace")
        for no, line in enumerate(text.splitlines(), 1):
            for name, rx in FORMS:
                m = rx.search(line)
                if m:
                    hits += 1
                    print(f"{rel}:{no}: {name}: '{m.group(0)}' in: {line.strip()[:160]}")
    if hits:
        print(f"FAIL: {hits} line(s) speak of how the code was made, not of the product "
              f"(reword them; cite upstream reports as owner/repo#N)")
        return 1
    print(f"ok: {scanned} tracked text files, none matches the {len(FORMS)} forms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
