#!/usr/bin/env bash
# Partitioned evaluation with real processes started by
# hand (tcp on 127.0.0.1), Bibtex:
#   1. train 3 epochs with 2 servers and 2 workers, SSP 2, a test evaluation
#      after every epoch (train.eval_every_epochs 1) and checkpoints on: the
#      metrics log of worker 0 holds one merged evaluation per epoch (the
#      last one the final evaluation), each
#      over the whole test split (2515 rows, from both workers' parts);
#   2. evaluate the final checkpoint with 1, 2 and 4 workers (a resume of a
#      finished job trains nothing and evaluates): the exact hit counts
#      (precision_hits_at_{1,3,5}) and test_rows are identical, P@k equal,
#      nDCG@k and PSP@k within 1e-12, and eval_workers is the number of
#      workers; the figures equal those the training run reported.
# Every process is bounded by `timeout` and reaped; no fixed sleep waits
# for an event (port files are polled with a bound).
# Usage: partitioned_eval_test.sh BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init eval "$1"
limit_s=150

flags=(--config=tests/data/bibtex_fixed.pbtxt --staleness=2 --epochs=3)
start_job train 2 2 "${flags[@]}" --eval_every_epochs=1 --metrics_dir="$tmp/mlog" --checkpoint_dir="$tmp/ck"
wait_job train
final=$(ls -d "$tmp"/ck/ckpt-*-final)
echo "trained: $final"
python3 - "$tmp/mlog/worker-0.jsonl" <<'PY'
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
epochs = [e["epoch"] for e in evals]
print("mid-training evaluations after epochs", epochs, "rows", [e["test_rows"] for e in evals])
assert epochs == [1, 2, 3], f"FAIL: expected evaluations after epochs 1, 2 and 3 (the final one), got {epochs}"
assert all(e["test_rows"] == 2515 for e in evals), "FAIL: an evaluation did not cover the whole test split"
assert evals[1]["precision_at_1"] > evals[0]["precision_at_1"] > 0.2, "FAIL: P@1 did not improve"
PY

for w in 1 2 4; do
  cp -r "$tmp/ck" "$tmp/ck$w"
  start_job eval$w 2 "$w" "${flags[@]}" --checkpoint_dir="$tmp/ck$w" --resume_from="$tmp/ck$w"
  wait_job "eval$w"
  grep -q "nothing left to train" "$tmp/eval$w-worker0.log" || fail "eval$w trained"
done

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
runs = {w: json.load(open(f"{tmp}/eval{w}.json")) for w in (1, 2, 4)}
train = json.load(open(f"{tmp}/train.json"))
exact = ["test_rows"] + [f"precision_hits_at_{k}" for k in (1, 3, 5)] + [f"precision_at_{k}" for k in (1, 3, 5)]
close = [f"{m}_at_{k}" for m in ("ndcg", "psp", "psndcg") for k in (1, 3, 5)]
for w, j in runs.items():
    print(f"{w} worker(s): eval_workers {j['eval_workers']} rows {j['test_rows']} hits@1,3,5 "
          f"{j['precision_hits_at_1']} {j['precision_hits_at_3']} {j['precision_hits_at_5']} "
          f"P@1 {j['precision_at_1']!r} nDCG@3 {j['ndcg_at_3']!r} PSP@1 {j['psp_at_1']!r} "
          f"eval_seconds {j['eval_seconds']:.3f}")
    assert j["eval_workers"] == w, f"FAIL: {w} workers but eval_workers {j['eval_workers']}"
    assert isinstance(j["precision_hits_at_1"], int), "FAIL: hit counts are not integers"
for ref in (runs[1], train):
    for w, j in runs.items():
        for k in exact:
            assert j[k] == ref[k], f"FAIL: {k}: {w} workers {j[k]!r}, reference {ref[k]!r}"
        for k in close:
            assert abs(j[k] - ref[k]) <= 1e-12, f"FAIL: {k}: {w} workers {j[k]!r}, reference {ref[k]!r}"
assert runs[1]["test_rows"] == 2515
assert runs[1]["precision_at_1"] > 0.4, "FAIL: the checkpoint's P@1 is too low to be the trained model"
print("OK: 1, 2 and 4 workers agree (hit counts exactly, nDCG@k and PSP@k within 1e-12)")
PY
