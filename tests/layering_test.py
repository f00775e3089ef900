#!/usr/bin/env python3
"""tools/layering.py on small trees: the fixture tests/data/layering (one
forbidden include, one forbidden link: both named, nothing else), a LAYERS
that would allow a cycle or names an unknown room, a folder no room holds,
and the picture's arrows. Python 3 standard library only."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "layering.py")
FIXTURE = os.path.join(HERE, "data", "layering")


def run(*args):
    p = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout.strip().split("\n"), p.stderr


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class LayeringTest(unittest.TestCase):
    def test_fixture_names_the_forbidden_include_and_the_forbidden_link(self):
        rc, out, _ = run("check", "--root", FIXTURE)
        self.assertEqual(rc, 1)
        layers = os.path.join(os.path.abspath(FIXTURE), "LAYERS")
        self.assertEqual(out, [
            'left/left.cc:5: left -> right: #include "right/right.h" (LAYERS does not let left use right)',
            "right/CMakeLists.txt:5: right -> left: target fx_right links fx_left (LAYERS does not let right use left)",
            "layering: 2 problem(s); the allowed arrows are in " + layers,
        ])

    def test_the_fixture_draws_only_its_declared_arrows(self):
        rc, out, _ = run("dot", "--root", FIXTURE)
        self.assertEqual(rc, 0)
        edges = sorted(line.strip() for line in out if "->" in line)
        self.assertEqual(edges, ['"left" -> "base";', '"right" -> "base";'])

    def test_uses_are_transitive_and_the_picture_leaves_implied_arrows_out(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "LAYERS", "a :\nb : a\nc : b a\n")
            write(root, "a/a.h", "#pragma once\n")
            write(root, "b/b.h", '#pragma once\n#include "a/a.h"\n')
            write(root, "c/c.cc", '#include "a/a.h"\n#include "b/b.h"\n#include <string>\n#include "zlib.h"\n')
            rc, out, _ = run("check", "--root", root)
            self.assertEqual(rc, 0, out)
            self.assertEqual(out, ["layering: 3 rooms, every include and link follows " + os.path.join(root, "LAYERS")])
            rc, out, _ = run("dot", "--root", root)
            self.assertEqual(sorted(line.strip() for line in out if "->" in line), ['"b" -> "a";', '"c" -> "b";'])

    def test_a_room_may_only_use_rooms_declared_above_it(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "LAYERS", "a : b\nb : a\nc : nosuch\n")
            rc, out, _ = run("check", "--root", root)
            self.assertEqual(rc, 1)
            self.assertIn("LAYERS:1: 'a' may use 'b', which is not declared above it (a room uses only rooms "
                          "declared before it, so the arrows have no cycle)", out)
            self.assertIn("LAYERS:3: 'c' may use 'nosuch', which is not declared above it (a room uses only rooms "
                          "declared before it, so the arrows have no cycle)", out)

    def test_a_folder_without_a_room_and_test_helpers(self):
        with tempfile.TemporaryDirectory() as root:
            write(root, "LAYERS", "a :\nhelp h :\nb : a\ntest-files : help\n")
            write(root, "a/a.h", "#pragma once\n")
            write(root, "h/temp.h", "#pragma once\n")
            write(root, "b/b_test.cc", '#include "h/temp.h"\n#include "a/a.h"\n')
            write(root, "b/b.cc", '#include "h/temp.h"\n')
            write(root, "new/x.cc", "int x;\n")
            rc, out, _ = run("check", "--root", root)
            self.assertEqual(rc, 1)
            self.assertEqual(out[:2], [
                "new: no room in LAYERS holds this folder; add a line for it (ROOM FOLDER : ROOM ...)",
                'b/b.cc:1: b -> help: #include "h/temp.h" (LAYERS does not let b use help)',
            ])
            self.assertEqual(len(out), 3)


if __name__ == "__main__":
    unittest.main()
