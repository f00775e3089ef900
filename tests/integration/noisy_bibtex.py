"""Bibtex with a long tail of noise ids, from the bundled data.

Usage: python3 tests/integration/noisy_bibtex.py OUT_DIR (from the repository root)

Writes OUT_DIR/train.txt (the 4,880 rows of the train split, each given two
extra feature ids that occur nowhere else: 2^40 + 2i and 2^40 + 2i + 1 for
training row i) and OUT_DIR/test.txt (the 2,515 rows of the test split, as
they are), XMC text with index base 0, for data.hashed_features: true.
Prints the count of training ids and the share seen in one row; writes the
count of noise ids to OUT_DIR/noise.
"""
import gzip
import sys

out_dir = sys.argv[1]
with gzip.open("data/bibtex/Bibtex_data.txt.gz", "rt") as f:
    header = f.readline().split()
    rows = [line.rstrip("\n") for line in f]
n, num_labels = int(header[0]), int(header[2])
assert len(rows) == n == 7395, "the bundled Bibtex changed"


def split(path):  # 1-based row numbers, one a line
    return [int(line) - 1 for line in open(path) if line.strip()]


train, test = split("data/bibtex/bibtex_trSplit.txt"), split("data/bibtex/bibtex_tstSplit.txt")
noise_base = 1 << 40  # far above Bibtex's ids (< 1836): they occur nowhere else
out = []
for i, r in enumerate(train):
    labels, _, feats = rows[r].partition(" ")
    out.append(f"{labels} {feats} {noise_base + 2 * i}:1 {noise_base + 2 * i + 1}:1")
open(f"{out_dir}/train.txt", "w").write(f"{len(out)} 0 {num_labels}\n" + "\n".join(out) + "\n")
open(f"{out_dir}/test.txt", "w").write(f"{len(test)} 0 {num_labels}\n" + "\n".join(rows[r] for r in test) + "\n")
ids = {}
for line in out:
    for tok in line.split(" ")[1:]:
        k = tok.split(":")[0]
        ids[k] = ids.get(k, 0) + 1
once = sum(1 for c in ids.values() if c == 1)
print(f"training ids: {len(ids)}, seen in one row: {once} ({100.0 * once / len(ids):.1f} %), noise ids: {2 * len(out)}")
open(f"{out_dir}/noise", "w").write(f"{2 * len(out)}\n")
