"""Protobuf text format, as much as job configs and search spaces use, in
the Python standard library alone (the study tools need no protobuf
package): parse into a tree, read and set fields by dotted path, write back.

A tree is a list of [name, value] pairs in file order; a value is a raw
scalar token as written ('0.5', 'ADAM', '"path"', 'true') or a sub-tree.
Comments are dropped; a repeated field is several pairs of one name.

  tree = parse(text, where)               ValueError "WHERE:LINE: why"
  get(tree, "optimizer.learning_rate")    raw token or sub-tree, or None
  get_all(tree, "param")                  every value of that name
  set_field(tree, "model.dropout", "0.5") creates sections as needed,
                                          replaces every earlier value
  unquote('"a\\"b"')                      the string a"b
  quote('a"b')                            '"a\\"b"'
  dump(tree)                              text, two spaces per level
"""
import re

_TOKEN = re.compile(r'''
    (?P<space>[ \t\r]+) |
    (?P<newline>\n) |
    (?P<comment>\#[^\n]*) |
    (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*') |
    (?P<symbol>[{}:\[\],;<>]) |
    (?P<word>[-+]?[A-Za-z0-9_.]+(?:[eE][-+]?[0-9]+)?)
''', re.VERBOSE)


def _tokens(text, where):
    line = 1
    pos = 0
    out = []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"{where}:{line}: unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "newline":
            line += 1
        elif kind not in ("space", "comment"):
            out.append((kind, m.group(), line))
        pos = m.end()
    return out


def parse(text, where="<text>"):
    """The tree of `text`; ValueError naming where:line on a syntax error."""
    toks = _tokens(text, where)
    pos = 0

    def fail(msg, at=None):
        line = toks[at][2] if at is not None and at < len(toks) else (toks[-1][2] if toks else 1)
        raise ValueError(f"{where}:{line}: {msg}")

    def message(close):
        nonlocal pos
        tree = []
        while True:
            if pos >= len(toks):
                if close is None:
                    return tree
                fail(f"missing '{close}'")
            kind, tok, _ = toks[pos]
            if close is not None and tok == close and kind == "symbol":
                pos += 1
                return tree
            if kind != "word":
                fail(f"expected a field name, got {tok!r}", pos)
            name = tok
            pos += 1
            colon = pos < len(toks) and toks[pos][1] == ":"
            if colon:
                pos += 1
            if pos >= len(toks):
                fail(f"field {name}: missing value")
            kind, tok, _ = toks[pos]
            if tok in ("{", "<"):
                pos += 1
                tree.append([name, message("}" if tok == "{" else ">")])
            elif tok == "[":
                pos += 1
                while pos < len(toks) and toks[pos][1] != "]":
                    if toks[pos][1] in ("{", "<"):
                        opener = toks[pos][1]
                        pos += 1
                        tree.append([name, message("}" if opener == "{" else ">")])
                    elif toks[pos][0] in ("word", "string"):
                        tree.append([name, toks[pos][1]])
                        pos += 1
                    else:
                        fail(f"field {name}: unexpected {toks[pos][1]!r} in a list", pos)
                    if pos < len(toks) and toks[pos][1] == ",":
                        pos += 1
                if pos >= len(toks):
                    fail(f"field {name}: missing ']'")
                pos += 1
            elif not colon:
                fail(f"field {name}: expected ':' or '{{'", pos)
            elif kind in ("word", "string"):
                value = tok
                pos += 1
                while pos < len(toks) and toks[pos][0] == "string" and kind == "string":
                    value = quote(unquote(value) + unquote(toks[pos][1]))  # adjacent strings join
                    pos += 1
                tree.append([name, value])
            else:
                fail(f"field {name}: unexpected {tok!r}", pos)
            if pos < len(toks) and toks[pos][1] in (",", ";"):
                pos += 1

    return message(None)


def get_all(tree, path):
    """Every value at dotted `path` (through the first section of each name)."""
    head, _, rest = path.partition(".")
    if not rest:
        return [v for n, v in tree if n == head]
    for n, v in tree:
        if n == head and isinstance(v, list):
            return get_all(v, rest)
    return []


def get(tree, path, default=None):
    """The last value at dotted `path` (as a parser keeps the last), or default."""
    values = get_all(tree, path)
    return values[-1] if values else default


def set_field(tree, path, value):
    """Sets dotted `path` to `value` (a raw token or a sub-tree): sections
    are created as needed; earlier values of the field are replaced."""
    head, _, rest = path.partition(".")
    if rest:
        for pair in tree:
            if pair[0] == head and isinstance(pair[1], list):
                set_field(pair[1], rest, value)
                return
        sub = []
        tree.append([head, sub])
        set_field(sub, rest, value)
        return
    at = [i for i, (n, _) in enumerate(tree) if n == head]
    if at:
        tree[at[0]][1] = value
        for i in reversed(at[1:]):
            del tree[i]
    else:
        tree.append([head, value])


def remove_field(tree, path):
    """Removes every value at dotted `path`."""
    head, _, rest = path.partition(".")
    if rest:
        for n, v in tree:
            if n == head and isinstance(v, list):
                remove_field(v, rest)
        return
    tree[:] = [p for p in tree if p[0] != head]


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "\\": "\\"}


def unquote(token):
    """The string a quoted token stands for (a bare token is returned as is)."""
    if len(token) < 2 or token[0] not in "\"'" or token[-1] != token[0]:
        return token
    body, out, i = token[1:-1], [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def quote(s):
    """A double-quoted token for the string s."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dump(tree, indent=0):
    """Text format of the tree, one field per line."""
    pad = "  " * indent
    lines = []
    for name, value in tree:
        if isinstance(value, list):
            lines.append(f"{pad}{name} {{")
            body = dump(value, indent + 1)
            if body:
                lines.append(body.rstrip("\n"))
            lines.append(f"{pad}}}")
        else:
            lines.append(f"{pad}{name}: {value}")
    return "\n".join(lines) + ("\n" if lines else "")
