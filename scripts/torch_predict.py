#!/usr/bin/python3
"""The PyTorch side of the prediction benchmark (scripts/bench_predict.sh).

Loads a Tether XMC_MLP model from its .npz file (tether-export --format npz;
rows the file does not hold take their initializer's value, as in
tests/integration/npz_forward.py), reads an XMC data file and its split, and
times the same forward pass tether-predict runs, on the CPU with the same
thread count:
    scores = relu(x W1 + b1) W2[:, :H]^T + W2[:, H];  top-k per row
with x as a torch sparse CSR matrix. Reading and loading are left out of the
time, as in tether-predict's "scored N rows in S s". Prints one JSON line:
rows, seconds, rows_per_second, precision_at_1 (to show it is the same model).

Needs Debian's python3-torch and python3-numpy (scripts/setup_bench.sh).
Run with /usr/bin/python3.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from npz_forward import full_table, read_xmc  # noqa: E402  (the test's loader: one implementation)


def main():
    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="the .npz from tether-export --format npz")
    ap.add_argument("--input", required=True)
    ap.add_argument("--index_base", type=int, required=True)
    ap.add_argument("--split", default="")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top_k", type=int, default=5)
    ap.add_argument("--batch", type=int, default=512, help="rows per forward pass")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    z = np.load(a.model)
    meta = json.loads(bytes(z["__metadata__"]).decode())
    assert meta["model_type"] == "XMC_MLP", meta.get("model_type")
    F, L, H = int(meta["num_features"]), int(meta["num_labels"]), int(meta["hidden"])
    specs = {t["name"]: t for t in json.loads(meta["tables"])}
    w1, _ = full_table(z, specs["w1"], F)
    w2, _ = full_table(z, specs["w2"], L)
    X, Y, _, _ = read_xmc(a.input, a.index_base, a.split)
    X *= np.float32(float(meta["feature_scale"]))
    if meta.get("tf_idf") == "true":  # the file's feature weights, before any normalisation
        X *= z["feature_idf"].astype(np.float32)[None, :]
    if meta["normalize_rows"] == "true":
        norms = np.sqrt((X.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
        X = np.where(norms > 0, X / np.maximum(norms, 1e-300), X).astype(np.float32)
    W1 = torch.from_numpy(w1)
    B1 = torch.from_numpy(z["b1"].astype(np.float32))
    W2t = torch.from_numpy(np.ascontiguousarray(w2[:, :H].T))
    B2 = torch.from_numpy(np.ascontiguousarray(w2[:, H]))
    n = X.shape[0]
    # The input as sparse CSR batches, built before the clock starts (Tether
    # reads its rows as CSR too).
    batches = [torch.from_numpy(X[b:b + a.batch]).to_sparse_csr() for b in range(0, n, a.batch)]
    del X
    top = []
    with torch.no_grad():
        start = time.perf_counter()
        for xb in batches:
            h = torch.relu(torch.sparse.mm(xb, W1) + B1)
            top.append(torch.topk(h @ W2t + B2, a.top_k, dim=1).indices)
        seconds = time.perf_counter() - start
    top = torch.cat(top).numpy()
    p1 = float(np.mean([1.0 if Y[i] and top[i, 0] in Y[i] else 0.0 for i in range(n)]))
    print(json.dumps({"rows": n, "seconds": seconds, "rows_per_second": n / seconds, "precision_at_1": p1,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
