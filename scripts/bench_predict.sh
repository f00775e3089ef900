#!/usr/bin/env bash
# tether-predict against a PyTorch forward pass (scripts/torch_predict.py) on
# the same model and rows with the same thread count, run alternately; prints
# a table of rows/s and the ratio. Reading the data and loading the model are
# left out on both sides (each times its forward passes and top-k only).
#
#   scripts/bench_predict.sh [--build DIR] [--threads N] [--runs R]
#                            [--model FILE.safetensors --input FILE --index_base B [--split FILE]]
#
# Default: trains Bibtex in one process (tether-worker --in_process
# --model_out) and scores its test split (2,515 rows). Any XMC_MLP model file
# works, e.g. the final checkpoint of scripts/bench_xmc_scale.sh exported with
# tether-export. Needs Debian's python3-torch (scripts/setup_bench.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
threads=1
runs=3
model=""
input=data/bibtex/Bibtex_data.txt.gz
index_base=0
split=data/bibtex/bibtex_tstSplit.txt
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --input) input="$2"; split=""; shift 2 ;;
    --index_base) index_base="$2"; shift 2 ;;
    --split) split="$2"; shift 2 ;;
    *) echo "scripts/bench_predict.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
/usr/bin/python3 -c "import torch" 2>/dev/null \
  || { echo "scripts/bench_predict.sh: needs Debian's python3-torch (scripts/setup_bench.sh)" >&2; exit 2; }
out="$build/bench-predict"
mkdir -p "$out"
if [ -z "$model" ]; then
  model="$out/bibtex.safetensors"
  timeout 300 "$build/bin/tether-worker" --config tests/data/bibtex_fixed.pbtxt --in_process --model_out="$model" \
    > "$out/train.log" 2>&1 || { echo "training failed; see $out/train.log" >&2; exit 1; }
fi
npz="$out/model.npz"
timeout 600 "$build/bin/tether-export" --model="$model" --format=npz --out="$npz" --label_counts=false \
  > "$out/export.log" 2>&1 || { echo "tether-export failed; see $out/export.log" >&2; exit 1; }
split_flag=()
[ -n "$split" ] && split_flag=(--split="$split")
echo "## tether-predict vs PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), $threads thread(s)"
echo
echo "Model $model; rows of $input${split:+ (split $split)}."
echo
echo "| run | tether-predict rows/s | PyTorch rows/s | ratio | P@1 tether | P@1 PyTorch |"
echo "|---:|---:|---:|---:|---:|---:|"
ratios=()
for r in $(seq 1 "$runs"); do
  timeout 600 "$build/bin/tether-predict" --model="$model" --input="$input" --format=xmc --index_base="$index_base" \
    "${split_flag[@]}" --top_k=5 --threads="$threads" --output="$out/preds.tsv" --metrics_out="$out/predict.json" \
    > "$out/predict.log" 2>&1 || { echo "tether-predict failed; see $out/predict.log" >&2; exit 1; }
  ours=$(grep -o "([0-9.]* rows/s" "$out/predict.log" | head -1 | tr -d '(' | awk '{print $1}')
  p1=$(/usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['precision_at_1'], 4))" "$out/predict.json")
  theirs_json=$(timeout 900 /usr/bin/python3 scripts/torch_predict.py --model="$npz" --input="$input" \
    --index_base="$index_base" "${split_flag[@]}" --threads="$threads")
  theirs=$(echo "$theirs_json" | /usr/bin/python3 -c "import json,sys; print(round(json.load(sys.stdin)['rows_per_second']))")
  tp1=$(echo "$theirs_json" | /usr/bin/python3 -c "import json,sys; print(round(json.load(sys.stdin)['precision_at_1'], 4))")
  ratio=$(/usr/bin/python3 -c "print(f'{float(\"$ours\") / float(\"$theirs\"):.2f}')")
  ratios+=("$ratio")
  echo "| $r | ${ours%.*} | $theirs | $ratio | $p1 | $tp1 |"
done
median=$(printf "%s\n" "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo
echo "Median ratio (tether-predict / PyTorch): $median"
