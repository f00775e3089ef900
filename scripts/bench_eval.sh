#!/usr/bin/env bash
# Partitioned evaluation: the time to evaluate one trained model's test set
# with 1, 2 and 4 workers (each worker scores its own part, rank 0 merges).
# A synthetic XMC set (tether-gen-xmc: 5,000 training rows, --test_rows test
# rows, 20,000 features, 2,000 labels) trains one epoch with 1 worker and a
# final checkpoint; that checkpoint is then evaluated (a resume of a
# finished job trains nothing) by each number of workers, 1 server,
# --repeats times. Prints the median of the metrics JSON's eval_seconds
# (rank 0: its own part, then waiting for the others' and merging) and of
# eval_seconds_slowest_worker, the speedup over 1 worker, and checks that
# every run reports the same hit counts.
#
#   scripts/bench_eval.sh [--build DIR] [--test_rows N] [--workers 1,2,4] [--repeats R] [--hidden H]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build test_rows=40000 workers=1,2,4 repeats=3 hidden=128
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --test_rows) test_rows="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --hidden) hidden="$2"; shift 2 ;;
    *) echo "scripts/bench_eval.sh: unknown argument $1 (--build, --test_rows, --workers, --repeats, --hidden)" >&2
       exit 2 ;;
  esac
done
out="$(pwd)/$build/bench-eval"
rm -rf "$out"
mkdir -p "$out"
"$build/bin/tether-gen-xmc" --out_prefix="$out/xmc" --train_rows=5000 --test_rows="$test_rows" \
  --num_features=20000 --num_labels=2000 --features_per_row=75 --labels_per_row=5 > /dev/null
cat > "$out/job.pbtxt" <<EOF
name: "bench_eval"
data { format: XMC index_base: 0 num_features: 20000 num_labels: 2000
       train_file: "$out/xmc.train.txt" test_file: "$out/xmc.test.txt" }
model { type: XMC_MLP hidden: $hidden loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { staleness: 2 }
train { epochs: 1 minibatch_size: 64 seed: 1 threads: 1 progress_every_s: 0 eval_minibatch_size: 512 }
EOF
"$build/bin/tether-launch" --config "$out/job.pbtxt" --workers=1 --servers=1 --checkpoint_dir="$out/ck" \
  --metrics_out "$out/train.json" > "$out/train.log" 2>&1 \
  || { echo "scripts/bench_eval.sh: training failed, see $out/train.log" >&2; exit 1; }
for w in ${workers//,/ }; do
  for r in $(seq 1 "$repeats"); do
    rm -rf "$out/ck-$w-$r"
    cp -r "$out/ck" "$out/ck-$w-$r"
    "$build/bin/tether-launch" --config "$out/job.pbtxt" --workers="$w" --servers=1 \
      --checkpoint_dir="$out/ck-$w-$r" --resume_from="$out/ck-$w-$r" --metrics_out "$out/eval-$w-$r.json" \
      > "$out/eval-$w-$r.log" 2>&1 \
      || { echo "scripts/bench_eval.sh: evaluation by $w workers failed, see $out/eval-$w-$r.log" >&2; exit 1; }
    rm -rf "$out/ck-$w-$r"
  done
done
python3 - "$out" "$workers" "$repeats" "$test_rows" "$(nproc)" <<'EOF'
import json, statistics, sys
out, workers, repeats, rows, cores = sys.argv[1], [int(w) for w in sys.argv[2].split(",")], int(sys.argv[3]), sys.argv[4], sys.argv[5]
print(f"## Partitioned evaluation: {rows} test rows, 2,000 labels, {cores} cores, median of {repeats}")
print()
print("| workers | eval s (rank 0) | slowest worker's part s | speedup vs 1 | P@1 | hits@1 | hits@5 |")
print("|---:|---:|---:|---:|---:|---:|---:|")
base = None
hits = None
for w in workers:
    runs = [json.load(open(f"{out}/eval-{w}-{r}.json")) for r in range(1, repeats + 1)]
    t = statistics.median(j["eval_seconds"] for j in runs)
    slow = statistics.median(j["eval_seconds_slowest_worker"] for j in runs)
    base = t if base is None else base
    for j in runs:
        h = (j["test_rows"], j["precision_hits_at_1"], j["precision_hits_at_3"], j["precision_hits_at_5"])
        if hits is not None and h != hits:
            sys.exit(f"scripts/bench_eval.sh: {w} workers report {h}, the first run {hits}")
        hits = h
        assert j["eval_workers"] == w
    j = runs[0]
    print(f"| {w} | {t:.2f} | {slow:.2f} | {base / t:.2f}x | {j['precision_at_1']:.4f} | "
          f"{j['precision_hits_at_1']} | {j['precision_hits_at_5']} |")
EOF
