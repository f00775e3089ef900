#!/usr/bin/env python3
"""Scores a Tether XMC_MLP model from its .npz file with numpy alone.

Loads the archive with numpy.load (the metadata is the uint8 array
__metadata__, a JSON object), rebuilds W1 and W2 (rows absent from the file
take their initializer's value: InitialWeight of server/table.h, re-done
here), reads an XMC data file and its split, runs the forward pass
    scores = relu(x W1 + b1) W2[:, :H]^T + W2[:, H]
and computes P@1/3/5 (mean over every row, rows without labels counting 0)
and PSP@1/3/5 exactly as pyxclib's xc_metrics (compute_inv_propesity,
psprecision) from the file's label_counts. Compares them with the metrics
JSON of tether-predict (--predict_metrics) within --tolerance; exit 1 on a
difference.
"""
import argparse
import gzip
import json
import sys

import numpy as np

MASK = (1 << 64) - 1


def mix(x):  # SplitMix64's finaliser, core/partition.h MixKey
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def initial_weight(seed, table_id, key, j, bound):  # server/table.cc InitialWeight, in float32
    h = mix(mix((seed ^ (table_id << 56)) & MASK) ^ key)
    h = mix((h + j) & MASK)
    u = np.float32(h >> 40) * np.float32(1.0 / 16777216.0)
    return (np.float32(2.0) * u - np.float32(1.0)) * np.float32(bound)


def full_table(z, spec, num_keys):
    """A row table as a dense num_keys x dim array, initial rows filled in."""
    name, dim = spec["name"], spec["dim"]
    keys, rows = z[name + ".keys"], z[name]
    assert rows.shape == (len(keys), dim), (name, rows.shape)
    out = np.empty((num_keys, dim), dtype=np.float32)
    present = np.zeros(num_keys, dtype=bool)
    out[keys] = rows
    present[keys] = True
    init = spec["init"]
    for key in np.nonzero(~present)[0]:
        if init["kind"] == "ZEROS":
            out[key] = 0
        else:
            out[key] = [initial_weight(init["seed"], spec["id"], int(key), j, init["bound"]) for j in range(dim)]
    return out, int((~present).sum())


def read_xmc(path, index_base, split):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        n, F, L = map(int, f.readline().split())
        lines = f.read().splitlines()
    rows = [int(s) - 1 for s in open(split).read().split()] if split else range(n)
    X = np.zeros((len(rows), F), dtype=np.float32)
    Y = []
    for i, r in enumerate(rows):
        parts = lines[r].split(" ")
        labels = []
        if parts and ":" not in parts[0]:
            labels = [int(t) - index_base for t in parts[0].split(",") if t]
            parts = parts[1:]
        for p in parts:
            if p:
                k, v = p.split(":")
                X[i, int(k) - index_base] += np.float32(float(v))
        Y.append(labels)
    return X, Y, F, L


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--npz", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--split", default="")
    ap.add_argument("--index_base", type=int, required=True)
    ap.add_argument("--predict_metrics", required=True)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--psp_a", type=float, default=0.55)
    ap.add_argument("--psp_b", type=float, default=1.5)
    a = ap.parse_args()

    z = np.load(a.npz)
    meta = json.loads(bytes(z["__metadata__"]).decode())
    assert meta["format"] == "tether-model" and meta["model_type"] == "XMC_MLP", meta.get("model_type")
    F, L, H = int(meta["num_features"]), int(meta["num_labels"]), int(meta["hidden"])
    specs = {t["name"]: t for t in json.loads(meta["tables"])}
    W1, missing1 = full_table(z, specs["w1"], F)
    W2, missing2 = full_table(z, specs["w2"], L)
    b1 = z["b1"]
    assert b1.shape == (H,)

    X, Y, fF, fL = read_xmc(a.data, a.index_base, a.split)
    assert (fF, fL) == (F, L), ((fF, fL), (F, L))
    X *= np.float32(float(meta["feature_scale"]))
    if meta.get("tf_idf") == "true":  # the file's feature weights, before any normalisation
        X *= z["feature_idf"].astype(np.float32)[None, :]
    if meta["normalize_rows"] == "true":
        norms = np.sqrt((X.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
        X = np.where(norms > 0, X / np.maximum(norms, 1e-300), X).astype(np.float32)
    hidden = np.maximum(X @ W1 + b1, np.float32(0))
    scores = hidden @ W2[:, :H].T + W2[:, H]
    print(f"numpy: {len(Y)} rows, {F} features, {L} labels, H={H}; rows filled from the initializer: "
          f"w1 {missing1}, w2 {missing2}")

    order = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    truth = np.zeros((len(Y), L + 1), dtype=np.float64)
    for i, ys in enumerate(Y):
        truth[i, ys] = 1
    rel = np.take_along_axis(truth, order, axis=1)
    ours = {f"precision_at_{k}": float((rel[:, :k].sum(axis=1) / k).mean()) for k in (1, 3, 5)}

    # pyxclib: compute_inv_propesity, then psprecision = _precision(flags) /
    # _precision(flags of the best ranking by inverse propensity).
    counts = z["label_counts"].astype(np.float64)
    N = int(meta["label_counts_rows"])
    C = (np.log(N) - 1) * np.power(a.psp_b + 1, a.psp_a)
    wts = np.append(1.0 + C * np.power(counts + a.psp_b, -a.psp_a), 0.0)
    flags = np.take_along_axis(truth, order, axis=1) * wts[order]
    best = -np.sort(-(truth * wts), axis=1)[:, :5]
    for k in (1, 3, 5):
        num = (flags[:, :k].sum(axis=1) / k).mean()
        den = (best[:, :k].sum(axis=1) / k).mean()
        ours[f"psp_at_{k}"] = float(num / den)

    theirs = json.load(open(a.predict_metrics))
    bad = 0
    for key, v in ours.items():
        t = theirs.get(key)
        ok = t is not None and abs(v - t) <= a.tolerance
        print(f"{key}: numpy {v:.6f} tether-predict {t}{'' if ok else '  <-- differ'}")
        bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
