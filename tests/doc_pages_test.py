#!/usr/bin/env python3
"""Every documentation page stays short enough to read: README.md at most 300
lines, docs/PERFORMANCE.md (the summary of every comparison) at most 600, any
other Markdown page under docs/ at most 800. A page past its bound is split
into pages of one topic each (docs/OPERATIONS.md is the index), not trimmed
of what users need.

Usage: doc_pages_test.py [REPO_ROOT]. Exit 0 when every page is within its
bound, 1 naming each page over it, 77 (skipped) when REPO_ROOT is not a git
checkout.
"""
import subprocess
import sys

LIMITS = {"README.md": 300, "docs/PERFORMANCE.md": 600}
DOCS_LIMIT = 800


def limit_of(path):
    if path in LIMITS:
        return LIMITS[path]
    return DOCS_LIMIT if path.startswith("docs/") else None


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    try:
        tracked = subprocess.run(["git", "-C", root, "ls-files", "*.md"], capture_output=True, text=True,
                                 check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"SKIP: {root} is not a git checkout ({e}); the page check reads `git ls-files`")
        return 77
    over, checked = [], 0
    for path in tracked:
        limit = limit_of(path)
        if limit is None:
            continue
        with open(f"{root}/{path}", encoding="utf-8") as f:
            lines = sum(1 for _ in f)
        checked += 1
        if lines > limit:
            over.append(f"{path}: {lines} lines, over its {limit}: split it into pages of one topic each")
    for o in over:
        print(o)
    if over:
        print(f"FAIL: {len(over)} page(s) over their bound")
        return 1
    print(f"ok: {checked} pages within their bounds (README.md 300, docs/PERFORMANCE.md 600, docs/ 800)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
