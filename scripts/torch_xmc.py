#!/usr/bin/python3
"""The PyTorch side of the training benchmark (scripts/bench_train.sh).

Trains the same XMC MLP as tether-worker on CPU, with the same model,
hyperparameters, thread count and data order, and writes the same JSON-lines
metrics (one line per minibatch, one per evaluation) so that
tools/plot_metrics.py draws both.

Model (worker/models/xmc_mlp.h): sparse x (F) -> EmbeddingBag(sum, feature values as
weights) + b1 -> ReLU (H) -> W2 a + b2 (L); softmax cross-entropy against the
label set normalised to sum 1; rows without labels count 0 but stay in the
batch mean. Init: W1 ~ U(+-sqrt(6/(F+H))), W2 and b2 ~ U(+-sqrt(6/(H+L)))
(Tether's w2 rows hold the bias as their last column), b1 = 0; the same
family as Tether's (Glorot & Bengio 2010), not the same numbers. Adam
(Kingma & Ba 2015) with lr, betas (0.9, 0.999), eps 1e-8; W1 uses
SparseAdam by default, which, like Tether's row tables, updates only the rows
a minibatch touches (--w1_optimizer=adam for dense Adam on W1).

Data order: `tether-bench order` prints the permutation tether-worker uses for
each epoch (worker/sampling.h, EpochOrder), and this script trains on exactly
those minibatches. Evaluation time is left out of train_s, as in Tether.

Needs Debian's python3-torch (scripts/setup_bench.sh). Run with /usr/bin/python3.
"""
import argparse
import gzip
import json
import math
import subprocess
import sys
import time

import torch


def read_xmc(path, index_base):
    """Returns (num_features, num_labels, rows) with rows = [(labels, feats, vals)]."""
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        n, nf, nl = (int(t) for t in f.readline().split())
        rows = []
        for line in f:
            if not line.strip():
                continue
            head, _, rest = line.rstrip("\n").partition(" ")
            if ":" in head:  # no label list: the first token is a feature
                head, rest = "", line
            labels = [int(t) - index_base for t in head.split(",") if t.strip()]
            feats, vals = [], []
            for tok in rest.split():
                i, v = tok.split(":")
                feats.append(int(i) - index_base)
                vals.append(float(v))
            rows.append((labels, feats, vals))
    if len(rows) != n:
        sys.exit(f"{path}: header says {n} rows, found {len(rows)}")
    return nf, nl, rows


def read_split(path):
    with open(path) as f:
        return [int(t) - 1 for t in f.read().split()]


class Csr:
    """Rows of a sparse matrix as three tensors (indptr, indices, values)."""

    def __init__(self, rows, which):
        lens = [len(r[1]) for r in rows]
        self.indptr = torch.zeros(len(rows) + 1, dtype=torch.long)
        self.indptr[1:] = torch.cumsum(torch.tensor(lens, dtype=torch.long), 0)
        self.indices = torch.tensor([i for r in rows for i in r[1]], dtype=torch.long)
        self.values = torch.tensor([v for r in rows for v in r[2]], dtype=torch.float32)

    def gather(self, perm):
        """The rows in `perm` order, as (indptr, indices, values)."""
        lens = self.indptr[1:] - self.indptr[:-1]
        new_lens = lens[perm]
        new_ptr = torch.zeros(len(perm) + 1, dtype=torch.long)
        new_ptr[1:] = torch.cumsum(new_lens, 0)
        total = int(new_ptr[-1])
        start = torch.repeat_interleave(self.indptr[:-1][perm], new_lens)
        within = torch.arange(total) - torch.repeat_interleave(new_ptr[:-1], new_lens)
        src = start + within
        return new_ptr, self.indices[src], self.values[src]


def label_matrix(rows, num_labels):
    """Dense N x L target: 1/|Y| on the row's labels (all zero for no labels)."""
    t = torch.zeros(len(rows), num_labels)
    for r, (labels, _, _) in enumerate(rows):
        for l in labels:
            t[r, l] = 1.0 / len(labels)
    return t


class XmcMlp(torch.nn.Module):
    def __init__(self, f, h, l, sparse, gen):
        super().__init__()
        self.w1 = torch.nn.EmbeddingBag(f, h, mode="sum", sparse=sparse)
        b = math.sqrt(6.0 / (f + h))
        b2 = math.sqrt(6.0 / (h + l))
        with torch.no_grad():
            self.w1.weight.uniform_(-b, b, generator=gen)
        self.b1 = torch.nn.Parameter(torch.zeros(h))
        self.w2 = torch.nn.Parameter(torch.empty(l, h).uniform_(-b2, b2, generator=gen))
        self.b2 = torch.nn.Parameter(torch.empty(l).uniform_(-b2, b2, generator=gen))

    def forward(self, indices, offsets, weights):
        a = torch.relu(self.w1(indices, offsets, per_sample_weights=weights) + self.b1)
        return torch.addmm(self.b2, a, self.w2.t())


def softmax_loss(scores, target):
    has = (target.sum(1) > 0).float()
    return ((torch.logsumexp(scores, 1) * has) - (target * scores).sum(1)).sum() / scores.shape[0]


def evaluate(model, csr, rows, batch=512):
    ks = (1, 3, 5)
    hits = {k: 0.0 for k in ks}
    n = len(rows)
    perm = torch.arange(n)
    ptr, idx, val = csr.gather(perm)
    with torch.no_grad():
        for b in range(0, n, batch):
            e = min(n, b + batch)
            s = model(idx[ptr[b]:ptr[e]], ptr[b:e] - ptr[b], val[ptr[b]:ptr[e]])
            top = torch.topk(s, 5, dim=1).indices.tolist()
            for r in range(e - b):
                y = set(rows[b + r][0])
                for k in ks:
                    hits[k] += sum(1 for j in top[r][:k] if j in y) / k
    return {f"precision_at_{k}": hits[k] / max(1, n) for k in ks}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train_file", required=True)
    p.add_argument("--test_file", help="default: train_file")
    p.add_argument("--train_split")
    p.add_argument("--test_split")
    p.add_argument("--index_base", type=int, required=True)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=7)
    p.add_argument("--minibatch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--w1_optimizer", choices=["sparse_adam", "adam"], default="sparse_adam")
    p.add_argument("--order_cmd", required=True,
                   help="command printing one epoch's row order per line (tether-bench order ...)")
    p.add_argument("--eval_every_epochs", type=int, default=1)
    p.add_argument("--metrics_jsonl", help="append JSON lines here")
    p.add_argument("--metrics_out", help="final metrics JSON")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    nf, nl, rows = read_xmc(a.train_file, a.index_base)
    test_rows = rows if not a.test_file or a.test_file == a.train_file else read_xmc(a.test_file, a.index_base)[2]
    train = [rows[i] for i in read_split(a.train_split)] if a.train_split else rows
    test = [test_rows[i] for i in read_split(a.test_split)] if a.test_split else test_rows
    orders = [[int(t) for t in line.split()] for line in
              subprocess.run(a.order_cmd, shell=True, check=True, capture_output=True, text=True).stdout.splitlines()]
    if len(orders) < a.epochs or any(len(o) != len(train) for o in orders[:a.epochs]):
        sys.exit(f"--order_cmd gave {len(orders)} epochs of {[len(o) for o in orders[:2]]} rows; "
                 f"need {a.epochs} of {len(train)}")

    csr_train, csr_test = Csr(train, 0), Csr(test, 0)
    target = label_matrix(train, nl)
    gen = torch.Generator().manual_seed(a.seed)
    model = XmcMlp(nf, a.hidden, nl, a.w1_optimizer == "sparse_adam", gen)
    dense_params = [model.b1, model.w2, model.b2]
    opts = [torch.optim.Adam(dense_params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)]
    if a.w1_optimizer == "sparse_adam":
        opts.append(torch.optim.SparseAdam([model.w1.weight], lr=a.lr, betas=(0.9, 0.999), eps=1e-8))
    else:
        opts[0].add_param_group({"params": [model.w1.weight]})

    log = open(a.metrics_jsonl, "a") if a.metrics_jsonl else None
    t_open = time.monotonic()

    def write(fields):
        if log:
            fields.update({"t": time.monotonic() - t_open, "unix_time": time.time(), "role": "torch", "rank": 0})
            log.write(json.dumps(fields) + "\n")

    train_s = 0.0
    samples = 0
    clock = 0
    evals = []
    reached = {}
    loss_sum = 0.0
    for epoch in range(a.epochs):
        t0 = time.monotonic()
        perm = torch.tensor(orders[epoch], dtype=torch.long)
        ptr, idx, val = csr_train.gather(perm)
        tgt = target[perm]
        loss_sum, batches = 0.0, 0
        n = len(train)
        for b in range(0, n, a.minibatch_size):
            e = min(n, b + a.minibatch_size)
            for o in opts:
                o.zero_grad(set_to_none=True)
            s = model(idx[ptr[b]:ptr[e]], ptr[b:e] - ptr[b], val[ptr[b]:ptr[e]])
            loss = softmax_loss(s, tgt[b:e])
            loss.backward()
            for o in opts:
                o.step()
            lv = loss.item()
            loss_sum += lv
            batches += 1
            samples += e - b
            clock += 1
            write({"kind": "clock", "clock": clock, "epoch": epoch + 1, "loss": lv, "samples": samples,
                   "train_s": train_s + time.monotonic() - t0})
        train_s += time.monotonic() - t0
        if a.eval_every_epochs > 0 and ((epoch + 1) % a.eval_every_epochs == 0 or epoch + 1 == a.epochs):
            m = evaluate(model, csr_test, test)
            m.update({"kind": "eval", "epoch": epoch + 1, "train_s": train_s, "samples": samples,
                      "loss": loss_sum / max(1, batches)})
            write(m)
            evals.append(m)
            for th in (0.55, 0.60):
                if th not in reached and m["precision_at_1"] >= th:
                    reached[th] = train_s
            print(f"torch epoch {epoch + 1}/{a.epochs} loss {m['loss']:.4f} P@1 {m['precision_at_1']:.4f} "
                  f"train {train_s:.2f} s", file=sys.stderr)
    final = evals[-1] if evals else evaluate(model, csr_test, test)
    out = {"precision_at_1": final["precision_at_1"], "precision_at_3": final["precision_at_3"],
           "precision_at_5": final["precision_at_5"], "train_seconds": train_s,
           "samples_per_second": samples / max(1e-9, train_s), "total_samples": samples,
           "seconds_to_p1_0.55": reached.get(0.55), "seconds_to_p1_0.60": reached.get(0.60),
           "threads": a.threads, "w1_optimizer": a.w1_optimizer, "torch_version": torch.__version__}
    if log:
        log.close()
    if a.metrics_out:
        with open(a.metrics_out + ".tmp", "w") as f:
            json.dump(out, f, indent=2)
        import os
        os.replace(a.metrics_out + ".tmp", a.metrics_out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
