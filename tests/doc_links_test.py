#!/usr/bin/env python3
"""Every cross-reference in the tracked Markdown files resolves.

  links       [text](target) and ![alt](target) with a relative target:
              the file or folder exists; a #anchor names a heading of the
              target page (GitHub's slugs, "-1" for a repeated heading)
  code paths  a backtick span, or a word of one, that looks like a path in
              the repository (its first folder is one of the repository's
              top folders, e.g. `server/table.h`, `scripts/test.sh --repeats 3`)
              names a tracked file or folder; `worker/model_registry.{h,cc}`
              names both, `server/clock_tracker` any file of that stem, a
              glob at least one file. Placeholders (<target>, DIR, N, ...)
              and what a build makes (build/...) are not checked.

  figures     every picture a page shows has, on the same page, the command
              that draws it (tools/ or scripts/, naming the picture or its folder)
  doc refs    in any tracked file (a code comment, a script, a message), a
              page cited as docs/<page>.md exists; `docs/<page>.md §N` names a
              numbered heading; `docs/<page>.md, "Title"` a heading or table row

Fenced code blocks are skipped (their commands are checked where they run).
Usage: doc_links_test.py [REPO_ROOT]. Exit 0 clean, 1 on any broken
reference, 77 (skipped) when REPO_ROOT is not a git checkout.
"""
import fnmatch
import os
import re
import subprocess
import sys
import unicodedata

# Folders code may live in after the layout settles, so a path into one that
# does not exist yet is caught as well as one into a folder that moved.
CODE_TOPS = {"proto", "core", "telemetry", "eval", "optim", "checkpoint", "input", "compute", "server",
             "worker", "serving", "local", "cli", "launch", "bench", "tools", "scripts", "tests", "docs",
             "examples", "data", "sparse", ".ci"}

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def git_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        return None, str(e)
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p], None


def slug(text):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation
    removed except - and _, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.lower():
        cat = unicodedata.category(ch)
        if ch in "-_" or cat[0] in "LN" or cat == "Mn":
            out.append(ch)
        elif ch == " ":
            out.append("-")
    return "".join(out)


def lines_outside_fences(text):
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield no, line


def anchors(text):
    seen = {}
    out = set()
    for _, line in lines_outside_fences(text):
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", text):
        out.add(m.group(1))
    return out


PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|\$|%|^[A-Z][A-Z0-9_-]*$")


COMMANDS = {"python3", "bash", "sh", "nice", "cmake", "ctest", "git", "sudo", "env", "timeout"}


def path_candidates(span):
    """Words of a backtick span that look like repository paths: the span is
    one word, or a command (its first word a path or a known program); the
    words of a quoted message are not references."""
    words = span.split()
    if len(words) > 1 and "/" not in words[0] and words[0] not in COMMANDS:
        return
    for word in words:
        word = word.strip("'\",;:()[]")
        if "=" in word:
            word = word.split("=", 1)[1]
        word = re.sub(r":\d+(-\d+)?$", "", word)  # file:line
        if "/" not in word or "://" in word or word.startswith(("/", "-", "~")):
            continue
        top = word.split("/", 1)[0]
        if top not in CODE_TOPS:
            continue
        parts = [p for p in word.split("/") if p]
        if any(PLACEHOLDER.search(p) for p in parts):
            continue
        yield word


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for alt in m.group(1).split(","):
        out += expand_braces(word[:m.start()] + alt + word[m.end():])
    return out


def path_exists(word, files, dirs):
    for w in expand_braces(word):
        w = w.rstrip("/") if w != "/" else w
        w = w.rstrip(".")
        if any(c in w for c in "*?["):
            if not fnmatch.filter(files, w) and not fnmatch.filter(dirs, w):
                return False
            continue
        if w in files or w in dirs:
            continue
        if any(f.startswith(w + ".") for f in files):  # a stem: server/clock_tracker
            continue
        return False
    return True


DOC_REF = re.compile(r"\bdocs/([A-Za-z0-9_/-]+\.md)`?,?(?:\s+(?:§ ?(\d+)|section (\d+)|\\?\"([^\"\\]+)\\?\"))?")


def doc_refs(root, tracked, files, texts):
    """References to a docs page from any tracked text file (code comments,
    scripts, messages): the page exists; a section number names a numbered
    heading of it; a quoted title names one of its headings or table rows."""
    bad = []
    for rel in tracked:
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192] or b"docs/" not in data:
            continue
        for no, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            for m in DOC_REF.finditer(line):
                page = "docs/" + m.group(1)
                if page not in files:
                    bad.append(f"{rel}:{no}: {page} is no tracked page")
                    continue
                text = texts.get(page, "")
                num = m.group(2) or m.group(3)
                if num and not re.search(r"^#+\s+" + num + r"\.", text, re.M):
                    bad.append(f"{rel}:{no}: {page} has no section {num}")
                title = m.group(4)
                if title and title.rstrip(".").lower() not in re.sub(r"[`*]", "", text).lower():
                    bad.append(f"{rel}:{no}: {page} has no section \"{title}\"")
    return bad


IMAGE = re.compile(r"!\[[^\]]*\]\(\s*([^)\s]+)\s*\)")


def figure_commands(page, text):
    """Every picture a page shows has the command that draws it on the same
    page: a command (in a code span or block, running something under
    tools/ or scripts/) that names the picture's path or its folder."""
    here = os.path.dirname(page)
    commands = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        spans = [line] if fenced else [m.group(2) for m in SPAN.finditer(line)]
        commands += [s for s in spans if "tools/" in s or "scripts/" in s]
    bad = []
    for no, line in lines_outside_fences(text):
        for m in IMAGE.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            path = os.path.normpath(os.path.join(here, target))
            names = {path, os.path.dirname(path), os.path.relpath(path, here), os.path.dirname(os.path.relpath(path, here))}
            names = {n.rstrip("/") for n in names if n and n != "."}
            def names_it(cmd):
                words = {w.strip("'\"").rstrip("/") for w in re.split(r"[\s=]+", cmd)}
                return bool(words & names)
            if not any(names_it(c) for c in commands):
                bad.append(f"{page}:{no}: picture {target} has no command on the page that draws it "
                           f"(a tools/ or scripts/ command naming {path} or its folder)")
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    tracked, err = git_files(root)
    if tracked is None:
        print(f"SKIP: {root} is not a git checkout ({err.strip()}); the link check reads `git ls-files`")
        return 77
    files = set(tracked)
    dirs = set()
    for f in tracked:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    pages = sorted(f for f in tracked if f.endswith(".md"))
    texts = {p: open(os.path.join(root, p), encoding="utf-8").read() for p in pages}
    anchor_cache = {}
    bad = []
    links = spans = 0
    for page in pages:
        here = os.path.dirname(page)
        for no, line in lines_outside_fences(texts[page]):
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                    continue
                links += 1
                path, _, frag = target.partition("#")
                dest = os.path.normpath(os.path.join(here, path)) if path else page
                if dest.startswith(".."):
                    bad.append(f"{page}:{no}: link '{target}' leaves the repository")
                    continue
                if dest not in files and dest not in dirs:
                    bad.append(f"{page}:{no}: link '{target}': no tracked file or folder {dest}")
                    continue
                if frag:
                    if not dest.endswith(".md"):
                        bad.append(f"{page}:{no}: link '{target}': an anchor into a file that is not Markdown")
                        continue
                    if dest not in anchor_cache:
                        anchor_cache[dest] = anchors(texts[dest])
                    if frag not in anchor_cache[dest]:
                        bad.append(f"{page}:{no}: link '{target}': {dest} has no heading #{frag}")
            for m in SPAN.finditer(LINK.sub("", line)):
                for word in path_candidates(m.group(2)):
                    spans += 1
                    if not path_exists(word, files, dirs):
                        bad.append(f"{page}:{no}: `{word}` names no tracked file or folder")
    for page in pages:
        bad += figure_commands(page, texts[page])
    bad += doc_refs(root, tracked, files, texts)
    for b in bad:
        print(b)
    if bad:
        print(f"FAIL: {len(bad)} broken reference(s) in {len(pages)} Markdown files")
        return 1
    print(f"ok: {links} links and {spans} code paths in {len(pages)} Markdown files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
