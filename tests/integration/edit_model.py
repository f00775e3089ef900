#!/usr/bin/env python3
"""Writes a copy of a safetensors model file with one thing changed, as a
hand-edited file would have it (the reader must refuse it).

Usage: edit_model.py SRC DST EDIT ARGS...
  key TENSOR VALUE        the last key of a row table's keys tensor
  count INDEX VALUE       entry INDEX of the label_counts tensor
  meta FIELD VALUE        the metadata string FIELD
  spec TABLE FIELD VALUE  a field of table TABLE's spec, in both its
                          table_spec.TABLE text and its 'tables' entry
"""
import array
import json
import re
import struct
import sys


def main():
    src, dst, edit, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = bytearray(raw[8 + n:])
    meta = header["__metadata__"]
    if edit in ("key", "count"):
        name = args[0] if edit == "key" else "label_counts"
        begin, end = header[name]["data_offsets"]
        values = array.array("Q")
        values.frombytes(bytes(data[begin:end]))
        values[-1 if edit == "key" else int(args[0])] = int(args[1])
        data[begin:end] = values.tobytes()
    elif edit == "meta":
        meta[args[0]] = args[1]
    elif edit == "spec":
        table, field, value = args
        key = "table_spec." + table
        meta[key], count = re.subn(r"(?m)^%s: .*$" % field, "%s: %s" % (field, value), meta[key])
        assert count == 1, f"{key} has no single field {field}"
        tables = json.loads(meta["tables"])
        for t in tables:
            if t["name"] == table:
                t[field] = int(value)
        meta["tables"] = json.dumps(tables, separators=(",", ":"))
    else:
        sys.exit(f"unknown edit {edit}")
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(data))


if __name__ == "__main__":
    main()
