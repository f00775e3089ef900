#!/usr/bin/env python3
"""Key/type tree of Tether's metrics files, to hold their schema fixed.

The tree of a JSON value keeps its shape and drops its values:
  object  -> {key: tree of the value}, every key;
  array   -> [the distinct trees of its elements, sorted];
  scalar  -> "integer" | "float" | "string" | "bool" | "null".
A float is a number written with a fraction or exponent (nlohmann writes
every double that way, 2.0 included), an integer one written without.

The tree of a metrics_dir (JSON-lines files ROLE-RANK.jsonl) maps
"ROLE/KIND" to the list of distinct trees of its lines.

Usage:
  metrics_schema.py tree METRICS.json            print the tree
  metrics_schema.py tree-dir METRICS_DIR         print the JSON-lines tree
  metrics_schema.py check FIXTURE.json METRICS.json|METRICS_DIR
      exit 0 when the tree equals the fixture, else 1 listing every path
      that differs.
"""
import json
import os
import sys


def _load(text):
    # parse_float/parse_int see the number as written, so 2.0 stays a float.
    return json.loads(text, parse_float=lambda s: ("float", s), parse_int=lambda s: ("integer", s))


def tree(v):
    if isinstance(v, tuple):
        return v[0]
    if isinstance(v, dict):
        return {k: tree(x) for k, x in v.items()}
    if isinstance(v, list):
        distinct = {json.dumps(tree(x), sort_keys=True) for x in v}
        return [json.loads(s) for s in sorted(distinct)]
    if isinstance(v, bool):
        return "bool"
    if v is None:
        return "null"
    if isinstance(v, str):
        return "string"
    raise TypeError(f"unexpected JSON value {v!r}")


def file_tree(path):
    with open(path) as f:
        return tree(_load(f.read()))


def dir_tree(path):
    kinds = {}
    for name in sorted(os.listdir(path)):
        if not name.endswith(".jsonl"):
            continue
        role = name.rsplit("-", 1)[0]
        with open(os.path.join(path, name)) as f:
            for line in f:
                if not line.strip():
                    continue
                v = _load(line)
                kind = v.get("kind") if isinstance(v.get("kind"), str) else "?"
                kinds.setdefault(f"{role}/{kind}", set()).add(json.dumps(tree(v), sort_keys=True))
    return {k: [json.loads(s) for s in sorted(v)] for k, v in sorted(kinds.items())}


def diff(want, got, path="$"):
    """Yields one line per path where `got` differs from `want`."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k not in got:
                yield f"{path}.{k}: missing (want {json.dumps(want[k])})"
            elif k not in want:
                yield f"{path}.{k}: unexpected key (got {json.dumps(got[k])})"
            else:
                yield from diff(want[k], got[k], f"{path}.{k}")
    elif isinstance(want, list) and isinstance(got, list) and len(want) == 1 and got:
        # One element shape expected: name the path inside each shape found.
        for i, g in enumerate(got):
            yield from diff(want[0], g, f"{path}[{i}]")
    elif isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (w, g) in enumerate(zip(want, got)):
            yield from diff(w, g, f"{path}[{i}]")
    elif want != got:
        yield f"{path}: want {json.dumps(want)}, got {json.dumps(got)}"


def main(argv):
    if len(argv) == 3 and argv[1] == "tree":
        print(json.dumps(file_tree(argv[2]), indent=2, sort_keys=True))
        return 0
    if len(argv) == 3 and argv[1] == "tree-dir":
        print(json.dumps(dir_tree(argv[2]), indent=2, sort_keys=True))
        return 0
    if len(argv) == 4 and argv[1] == "check":
        with open(argv[2]) as f:
            want = json.load(f)
        got = dir_tree(argv[3]) if os.path.isdir(argv[3]) else file_tree(argv[3])
        problems = list(diff(want, got))
        for p in problems:
            print(f"{argv[3]}: {p} (fixture {argv[2]})")
        if not problems:
            print(f"{argv[3]}: key/type tree matches {argv[2]}")
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
