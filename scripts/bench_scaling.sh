#!/usr/bin/env bash
# How Tether's training cost grows with non-zeros per row, hidden width,
# labels, workers and servers: small synthetic XMC jobs (tether-gen-xmc),
# one knob varied at a time from a base of 20,000 rows, 20,000 features,
# 75 non-zeros and 5 labels per row, 4,000 labels (full softmax), hidden 256,
# 1 worker + 1 server, minibatch 64, Adam, 1 epoch. Prints samples/s and the
# bytes each training sample moves (server bytes in + out ÷ samples).
#
#   scripts/bench_scaling.sh [--build DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    *) echo "scripts/bench_scaling.sh: unknown argument $1 (--build)" >&2; exit 2 ;;
  esac
done
out="$build/bench-scaling"
rm -rf "$out"
mkdir -p "$out"

gen() {  # name nnz labels
  [ -s "$out/$1.train.txt" ] || "$build/bin/tether-gen-xmc" --out_prefix="$out/$1" --train_rows=20000 \
    --test_rows=1000 --num_features=20000 --num_labels="$3" --features_per_row="$2" --labels_per_row=5 \
    > /dev/null
}
config() {  # features labels
  cat > "$out/job.pbtxt" <<EOF
name: "scaling"
data { format: XMC index_base: 0 num_features: $1 num_labels: $2 }
model { type: XMC_MLP loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { staleness: 2 }
train { epochs: 1 minibatch_size: 64 seed: 1 threads: 1 progress_every_s: 0 }
EOF
}
echo "## Cost growth (synthetic XMC, one knob at a time)"
echo
echo "| knob | value | workers | servers | samples/s | KB moved per sample | train s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
run() {  # knob value data hidden workers servers labels
  local dir="$out/$1-$2"
  config 20000 "$7"
  "$build/bin/tether-launch" --config "$out/job.pbtxt" --train_file="$out/$3.train.txt" \
    --test_file="$out/$3.test.txt" --hidden="$4" --workers="$5" --servers="$6" --metrics_dir="$dir" \
    --metrics_out "$dir.json" > "$dir.log" 2>&1 || { echo "scripts/bench_scaling.sh: $1=$2 failed, see $dir.log" >&2; exit 1; }
  python3 - "$dir" "$1" "$2" "$5" "$6" <<'EOF'
import glob, json, sys
d, knob, value, w, s = sys.argv[1:]
m = json.load(open(d + ".json"))
moved = 0
for f in glob.glob(d + "/server-*.jsonl"):
    last = [json.loads(l) for l in open(f) if l.strip()][-1]
    moved += last["bytes_in"] + last["bytes_out"]
print(f"| {knob} | {value} | {w} | {s} | {m['samples_per_second']:.0f} | "
      f"{moved / max(1, m['total_samples']) / 1024:.1f} | {m['train_seconds']:.2f} |")
EOF
}
gen base 75 4000
gen nnz25 25 4000
gen nnz225 225 4000
gen l1000 75 1000
gen l16000 75 16000
run nnz 25 nnz25 256 1 1 4000
run nnz 75 base 256 1 1 4000
run nnz 225 nnz225 256 1 1 4000
run hidden 64 base 64 1 1 4000
run hidden 1024 base 1024 1 1 4000
run labels 1000 l1000 256 1 1 1000
run labels 16000 l16000 256 1 1 16000
run shape 1w2s base 256 1 2 4000
run shape 2w1s base 256 2 1 4000
run shape 2w2s base 256 2 2 4000
