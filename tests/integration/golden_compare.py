#!/usr/bin/env python3
"""Compares a metrics JSON with a pinned one, bit for bit, key by key.

Usage: golden_compare.py EXPECTED.json ACTUAL.json
       golden_compare.py --write ACTUAL.json EXPECTED.json   (pin a new result)

Every key is compared except the ones that measure time, rate, memory
peaks or bytes, which differ from run to run or with the wire's framing
(a worker's per-table "wire" counts and 16-bit saturations among them):
a key (at any depth) whose name contains one of PINNED_OUT. Floats are
compared exactly, as JSON writes them (repr, 17 significant digits).
Exit 0 when equal; 1 with one line per difference otherwise.
"""
import json
import sys

PINNED_OUT = ("seconds", "per_second", "fraction", "bytes", "peak", "unix_s", "wire")


def pinned(value):
    """The part of a metrics JSON value that is pinned (recursively)."""
    if isinstance(value, dict):
        return {k: pinned(v) for k, v in value.items() if not any(p in k for p in PINNED_OUT)}
    if isinstance(value, list):
        return [pinned(v) for v in value]
    return value


def differences(want, got, path=""):
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            sub = f"{path}.{k}"
            if k not in got:
                yield f"{sub}: missing (expected {json.dumps(want[k])})"
            elif k not in want:
                yield f"{sub}: not expected (got {json.dumps(got[k])})"
            else:
                yield from differences(want[k], got[k], sub)
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got)):
            yield from differences(w, g, f"{path}[{i}]")
    elif json.dumps(want) != json.dumps(got):
        yield f"{path or '.'}: expected {json.dumps(want)}, got {json.dumps(got)}"


def main(argv):
    if len(argv) == 4 and argv[1] == "--write":
        with open(argv[2]) as f:
            result = pinned(json.load(f))
        with open(argv[3], "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)
            f.write("\n")
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        want = json.load(f)
    with open(argv[2]) as f:
        got = pinned(json.load(f))
    diffs = list(differences(want, got))
    for d in diffs:
        print(f"golden: {argv[1]}: {d}")
    if not diffs:
        print(f"golden: {argv[2]} equals {argv[1]} on every pinned key")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
