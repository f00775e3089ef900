#!/usr/bin/env bash
# Model files end to end on the bundled Bibtex data (export and
# prediction). Usage: model_files_test.sh MODE BIN_DIR
#   predict  train in one process (1 worker, 2 shards) with --model_out, then
#            tether-predict on the test split with 2 threads: every test
#            metric (P@k, nDCG@k, PSP@k, PSnDCG@k) equals training's
#            evaluation of the same model; predictions have one line per row
#   numpy    the same model converted to .npz (tether-export --model), loaded
#            by numpy.load in tests/integration/npz_forward.py, which runs the
#            forward pass and P@1/3/5 and pyxclib's PSP@1/3/5 on its own:
#            within 1e-4 of tether-predict. Skipped (exit 77, ctest SKIP) when
#            /usr/bin/python3 has no numpy.
if [ "$1" = numpy ] && ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no numpy (apt-get install python3-numpy; scripts/setup.sh does)"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"

# One worker: its pulls see its own pushes, so the model training evaluated
# is exactly the one the shards hold at the end (--model_out).
timeout -k 5 120 "$bin/tether-worker" --config=examples/bibtex.pbtxt --in_process --num_workers=1 \
  --metrics_out="$tmp/train.json" --model_out="$tmp/m.safetensors"
test -s "$tmp/m.safetensors"
predict() {  # predict THREADS OUT_PREFIX
  timeout -k 5 120 "$bin/tether-predict" --model="$tmp/m.safetensors" --input=data/bibtex/Bibtex_data.txt.gz \
    --format=xmc --index_base=0 --split=data/bibtex/bibtex_tstSplit.txt --top_k=5 --threads="$1" \
    --output="$tmp/$2.tsv" --metrics_out="$tmp/$2.json" | tee "$tmp/$2.out"
}

case "$mode" in
predict)
  predict 2 p
  python3 - "$tmp/train.json" "$tmp/p.json" "$tmp/p.tsv" "$tmp/p.out" <<'PY'
import json, sys
train, pred = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
keys = [f"{m}_at_{k}" for m in ("precision", "ndcg", "psp", "psndcg") for k in (1, 3, 5)]
bad = 0
for k in keys:
    a, b = train.get(k), pred.get(k)
    ok = a is not None and b is not None and abs(a - b) <= 1e-12
    print(f"{k}: training {a} tether-predict {b}{'' if ok else '  <-- differ'}")
    bad += not ok
lines = open(sys.argv[3]).read().splitlines()
if len(lines) != 2515 or len(lines[0].split("\t")) != 5:
    print(f"predictions: {len(lines)} lines, first {lines[0]!r}; expected 2515 lines of 5 entries"); bad += 1
printed = dict(l.split() for l in open(sys.argv[4]).read().splitlines())
if abs(float(printed["precision_at_1"]) - pred["precision_at_1"]) > 1e-5:
    print("stdout precision_at_1 differs from the JSON"); bad += 1
if not 0 < pred["psp_at_1"] < 1:
    print("psp_at_1 out of (0, 1)"); bad += 1
sys.exit(1 if bad else 0)
PY
  # Data of another width than the model's: refused (exit 1), naming the
  # model file as what set the width (predict takes no config).
  printf '2 10 159\n0 0:1\n1 1:1\n' > "$tmp/narrow.txt"
  rc=0
  timeout -k 5 60 "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/narrow.txt" --format=xmc \
    --index_base=0 --output="$tmp/narrow.tsv" 2> "$tmp/narrow.log" || rc=$?
  if [ "$rc" != 1 ] || ! grep -q "has 10 features but the model $tmp/m.safetensors's num_features is 1836" "$tmp/narrow.log"; then
    echo "FAIL: predict on 10-feature data: exit $rc; log:"; tail -3 "$tmp/narrow.log"; exit 1
  fi
  test ! -e "$tmp/narrow.tsv" || { echo "FAIL: a refused predict left $tmp/narrow.tsv"; exit 1; }
  ;;
numpy)
  predict 1 p
  timeout -k 5 60 "$bin/tether-export" --model="$tmp/m.safetensors" --out="$tmp/m.npz" --format=npz
  timeout -k 5 120 /usr/bin/python3 tests/integration/npz_forward.py --npz "$tmp/m.npz" \
    --data data/bibtex/Bibtex_data.txt.gz --split data/bibtex/bibtex_tstSplit.txt --index_base 0 \
    --predict_metrics "$tmp/p.json" --tolerance 1e-4
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
