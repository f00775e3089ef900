#!/usr/bin/env python3
"""Checks and draws the layering declared in LAYERS (the rooms and the arrows
between them).

  python3 tools/layering.py check [--root DIR]   exit 1 naming every arrow
                                                 LAYERS does not allow
  python3 tools/layering.py dot [--root DIR]     the rooms and arrows as a
                                                 Graphviz graph on stdout

`check` reads every `#include "..."` of every .h/.cc/.cu file under the
root (the files git tracks there, or every file when the root is no git
checkout) and every CMake link (target_link_libraries and tether_add_test's
LIBS of each target, a target belonging to the room whose CMakeLists.txt
defines it), and prints one line per arrow the layering does not allow:

  FILE:LINE: ROOM -> ROOM: #include "x/y.h"
  FILE:LINE: ROOM -> ROOM: target T links L

An include that names no file of the tree and no room's folder (a system or
third-party header) and a link to a target the tree does not define are no
arrows. A folder holding a LAYERS file of its own below the root is another
tree (a test fixture) and is skipped. LAYERS itself is checked too: a room
may only use rooms declared above it (so the arrows have no cycle), every
name must be declared once, and every folder with C++ or CMake files must
belong to a room. Python 3 standard library only.
"""

import argparse
import os
import re
import subprocess
import sys

SOURCE_SUFFIXES = (".h", ".cc", ".cu")
TEST_FILE = re.compile(r"_test\.(h|cc|cu)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
TEST_FILES_ROOM = "test-files"  # the pseudo-room of LAYERS's test-files line


class Layers:
    """LAYERS parsed: rooms in declaration order, each with its folders and
    the rooms it may use directly; `allowed` is the transitive closure."""

    def __init__(self):
        self.order = []          # room names, as declared
        self.folders = {}        # room -> [folder]
        self.uses = {}           # room -> [room] as written (after '*' expansion)
        self.test_uses = []      # rooms any room's test files may also use
        self.allowed = {}        # room -> set of rooms it may use (itself included)
        self.errors = []         # "LAYERS:LINE: why"


def parse_layers(path):
    layers = Layers()
    owner = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = "%s:%d" % (os.path.basename(path), n)
        if ":" not in line:
            layers.errors.append("%s: expected 'ROOM [FOLDER ...] : ROOM ...', got '%s'" % (where, raw.strip()))
            continue
        head, tail = line.split(":", 1)
        head = head.split()
        uses = tail.split()
        if not head:
            layers.errors.append("%s: no room named before ':'" % where)
            continue
        room = head[0]
        if room == TEST_FILES_ROOM:
            for u in uses:
                if u not in layers.folders:
                    layers.errors.append("%s: test files may use '%s', which is not declared above" % (where, u))
                else:
                    layers.test_uses.append(u)
            continue
        if room in layers.folders:
            layers.errors.append("%s: room '%s' is declared twice" % (where, room))
            continue
        folders = [f.strip("/") for f in head[1:]] or [room]
        for folder in folders:
            if folder in owner:
                layers.errors.append("%s: folder %s is claimed by '%s' and '%s'" % (where, folder, owner[folder], room))
            owner[folder] = room
        expanded = []
        for u in uses:
            if u == "*":
                expanded.extend(layers.order)
            elif u not in layers.folders:
                layers.errors.append(
                    "%s: '%s' may use '%s', which is not declared above it (a room uses only rooms "
                    "declared before it, so the arrows have no cycle)" % (where, room, u))
            else:
                expanded.append(u)
        layers.order.append(room)
        layers.folders[room] = folders
        layers.uses[room] = list(dict.fromkeys(expanded))
    for room in layers.order:
        closure = {room}
        for u in layers.uses[room]:
            closure |= layers.allowed[u]  # declared above, so already closed
        layers.allowed[room] = closure
    return layers


def room_of(layers, relpath):
    """The room whose folder (or file) is the longest prefix of relpath, or
    None."""
    best, best_len = None, -1
    for room in layers.order:
        for folder in layers.folders[room]:
            if (relpath == folder or relpath.startswith(folder + "/")) and len(folder) > best_len:
                best, best_len = room, len(folder)
    return best


def tracked_files(root):
    """Files under root, relative to it: git's tracked files in a checkout,
    else every file; folders holding their own LAYERS (below root) left out."""
    files = None
    try:
        # Paths relative to the root (git prints them relative to -C's folder).
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "."], capture_output=True, check=True)
        files = [p for p in out.stdout.decode("utf-8", "replace").split("\0") if p] or None
    except (OSError, subprocess.CalledProcessError):
        files = None
    if files is None:
        files = []
        for d, dirs, names in os.walk(root):
            # Hidden folders and build trees (they hold a CMakeCache.txt) are
            # no part of the source.
            dirs[:] = [x for x in dirs if not x.startswith(".")
                       and not os.path.isfile(os.path.join(d, x, "CMakeCache.txt"))]
            for name in names:
                files.append(os.path.relpath(os.path.join(d, name), root))
    nested = set()
    for p in files:
        if os.path.basename(p) == "LAYERS" and os.path.dirname(p):
            nested.add(os.path.dirname(p))
    def inside_nested(p):
        return any(p.startswith(n + "/") for n in nested)
    return sorted(p for p in files if not inside_nested(p) and os.path.isfile(os.path.join(root, p)))


def include_target(root, relpath, inc, layers):
    """The tree path an include names: relative to the including file's
    folder when such a file exists, else from the root. None for a header
    outside the tree (a system or third-party one)."""
    here = os.path.normpath(os.path.join(os.path.dirname(relpath), inc))
    if os.path.isfile(os.path.join(root, here)):
        return here
    if os.path.isfile(os.path.join(root, inc)) or room_of(layers, inc) is not None:
        return os.path.normpath(inc)
    return None


def check_includes(root, files, layers, problems, unowned):
    for rel in files:
        if not rel.endswith(SOURCE_SUFFIXES):
            continue
        src_room = room_of(layers, rel)
        if src_room is None:
            unowned.add(os.path.dirname(rel) or ".")
            continue
        allowed = layers.allowed[src_room]
        if TEST_FILE.search(rel):
            allowed = allowed.union(*(layers.allowed[r] for r in layers.test_uses)) if layers.test_uses else allowed
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = include_target(root, rel, m.group(1), layers)
                if target is None:
                    continue
                dst_room = room_of(layers, target)
                if dst_room is None or dst_room in allowed:
                    continue
                problems.append((rel, n, src_room, dst_room, '#include "%s"' % m.group(1)))


# ---- CMake

def cmake_commands(text):
    """(name, [(token, line)], line) for each command call, comments and
    quotes handled well enough for target names."""
    out = []
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            name = text[i:j].lower()
            k = j
            while k < n and text[k] in " \t":
                k += 1
            if k >= n or text[k] != "(":
                i = j
                continue
            start_line = line
            i = k + 1
            depth, tokens, tok, tok_line = 1, [], "", line
            while i < n and depth > 0:
                c = text[i]
                if c == "#" and not tok.endswith("$"):
                    while i < n and text[i] != "\n":
                        i += 1
                    continue
                if c == '"':
                    j = text.find('"', i + 1)
                    j = n if j < 0 else j
                    if not tok:
                        tok_line = line
                    tok += text[i + 1:j]
                    line += text[i:j].count("\n")
                    i = j + 1
                    continue
                if c == "(":
                    depth += 1
                    tok += c
                elif c == ")":
                    depth -= 1
                    if depth > 0:
                        tok += c
                elif c in " \t\r\n":
                    if tok:
                        tokens.append((tok, tok_line))
                        tok = ""
                    if c == "\n":
                        line += 1
                else:
                    if not tok:
                        tok_line = line
                    tok += c
                i += 1
            if tok:
                tokens.append((tok, tok_line))
            out.append((name, tokens, start_line))
        else:
            i += 1
    return out


GENEX = re.compile(r"\$<[^<>]*:([^<>:]+)>")


def plain_target(tok):
    """A target name inside a generator expression ($<$<CONFIG:X>:tether_y>
    -> tether_y); None for one that only names a file or a property."""
    if "$<TARGET_FILE" in tok or "$<TARGET_PROPERTY" in tok:
        return None
    while "$<" in tok:
        m = GENEX.search(tok)
        if not m:
            return None
        tok = tok[:m.start()] + m.group(1) + tok[m.end():]
    return tok


def check_links(root, files, layers, problems, unowned):
    lists = [p for p in files if os.path.basename(p) == "CMakeLists.txt"]
    defined = {}   # target or alias -> room
    calls = []     # (file, room, target, lib, line)
    for rel in lists:
        room = room_of(layers, rel) if os.path.dirname(rel) else None
        if room is None and os.path.dirname(rel):
            unowned.add(os.path.dirname(rel))
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            cmds = cmake_commands(f.read())
        for name, tokens, line in cmds:
            words = [t for t, _ in tokens]
            if name in ("add_library", "add_executable") and words:
                if room is not None:
                    defined[words[0]] = room
            elif name == "tether_add_test" and words:
                if room is not None:
                    defined[words[0]] = room
                libs, on = [], False
                for t, l in tokens[1:]:
                    if t in ("SOURCES", "LABELS", "TIMEOUT"):
                        on = False
                    elif t == "LIBS":
                        on = True
                    elif on:
                        libs.append((t, l))
                for t, l in libs:
                    calls.append((rel, room, words[0], t, l))
            elif name == "target_link_libraries" and words:
                for t, l in tokens[1:]:
                    if t in ("PUBLIC", "PRIVATE", "INTERFACE", "LINK_PUBLIC", "LINK_PRIVATE"):
                        continue
                    calls.append((rel, room, words[0], t, l))
    for rel, room, target, lib, line in calls:
        if room is None:
            continue
        name = plain_target(lib)
        if name is None or name not in defined:
            continue
        src = defined.get(target, room)
        dst = defined[name]
        if dst not in layers.allowed[src]:
            problems.append((rel, line, src, dst, "target %s links %s" % (target, lib)))


def run_check(root, layers_path):
    layers = parse_layers(layers_path)
    problems, unowned = [], set()
    files = tracked_files(root)
    check_includes(root, files, layers, problems, unowned)
    check_links(root, files, layers, problems, unowned)
    for e in layers.errors:
        print(e)
    for d in sorted(unowned):
        print("%s: no room in LAYERS holds this folder; add a line for it (ROOM FOLDER : ROOM ...)" % d)
    for rel, line, src, dst, what in sorted(problems):
        print("%s:%d: %s -> %s: %s (LAYERS does not let %s use %s)" % (rel, line, src, dst, what, src, dst))
    bad = len(layers.errors) + len(unowned) + len(problems)
    if bad:
        print("layering: %d problem(s); the allowed arrows are in %s" % (bad, layers_path))
        return 1
    print("layering: %d rooms, every include and link follows %s" % (len(layers.order), layers_path))
    return 0


def run_dot(layers_path):
    layers = parse_layers(layers_path)
    if layers.errors:
        for e in layers.errors:
            print(e, file=sys.stderr)
        return 1
    # Only the arrows not implied by others (a transitive reduction), so the
    # picture shows the layers rather than every permitted pair.
    out = ["digraph layers {", '  rankdir=BT;', '  node [shape=box, fontname="Helvetica", fontsize=11];',
           '  edge [color="#555555"];']
    root = os.path.dirname(layers_path)
    for room in layers.order:
        # The folders a room holds when they are not named after it (and
        # exist: a generated-header prefix is no folder to show).
        other = [f + "/" for f in layers.folders[room] if f != room and os.path.isdir(os.path.join(root, f))]
        label = "\\n".join([room] + other)
        out.append('  "%s" [label="%s"];' % (room, label))
    for room in layers.order:
        direct = [u for u in layers.uses[room] if u != room]
        for u in direct:
            implied = any(u in layers.allowed[v] for v in direct if v != u)
            if not implied:
                out.append('  "%s" -> "%s";' % (room, u))
    out.append("}")
    print("\n".join(out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["check", "dot"])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the tree to read (default: this repository); its LAYERS file declares the rooms")
    ap.add_argument("--layers", help="the LAYERS file to follow (default: ROOT/LAYERS)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers_path = os.path.abspath(args.layers) if args.layers else os.path.join(root, "LAYERS")
    if not os.path.isfile(layers_path):
        print("%s: no such file" % layers_path)
        return 2
    if args.command == "dot":
        return run_dot(layers_path)
    return run_check(root, layers_path)


if __name__ == "__main__":
    sys.exit(main())
