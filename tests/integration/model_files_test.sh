#!/usr/bin/env bash
# Model files end to end on the bundled Bibtex data (export and
# prediction). Usage: model_files_test.sh MODE BIN_DIR
#   predict  train in one process (1 worker, 2 shards) with --model_out, then
#            tether-predict on the test split with 2 threads: every test
#            metric (P@k, nDCG@k, PSP@k, PSnDCG@k) equals training's
#            evaluation of the same model; predictions have one line per row;
#            copies of the file with a key out of range, metadata that
#            disagrees with the job_config, a label count above the training
#            rows, or a table spec other than the config's are refused by
#            tether-predict and tether-export. Without --format and
#            --index_base the input is read as the model's data was (xmc,
#            base 0): the same predictions bit for bit; --index_base=1 on
#            rows numbered from 1 is taken, warning once with both bases,
#            and scores them as the same rows numbered from 0 (labels
#            written 1-based).
#   numpy    the same model converted to .npz (tether-export --model), loaded
#            by numpy.load in tests/integration/npz_forward.py, which runs the
#            forward pass and P@1/3/5 and pyxclib's PSP@1/3/5 on its own:
#            within 1e-4 of tether-predict; the same arrays written again by
#            numpy.savez_compressed (deflated) score exactly as the model.
#            Skipped (exit 77, ctest SKIP) when /usr/bin/python3 has no numpy.
#   npz      training also writes a checkpoint, whose clock --model_out
#            records too; tether-export writes it as
#            npz and as safetensors; tether-predict gives the same
#            predictions and metrics from either, bit for bit, and from the
#            npz deflated; tether-export converts the npz to a safetensors
#            file byte-identical to the one exported directly; a damaged npz
#            is refused (exit 1) naming the file and the member.
#   tfidf    training with data.tf_idf and normalize_rows (--tf_idf=true
#            --normalize_rows=true): the model file carries the input's
#            TF-IDF weights and says tf_idf; tether-predict weighs the test
#            rows by them before normalising and gives every test metric of
#            training's evaluation; the checkpoint exported by tether-export
#            (weights counted again from the training split) predicts the
#            same, bit for bit.
if [ "$1" = numpy ] && ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no numpy (apt-get install python3-numpy; scripts/setup.sh does)"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"

# One worker: its pulls see its own pushes, so the model training evaluated
# is exactly the one the shards hold at the end (--model_out).
extra=()
[ "$mode" = npz ] && extra=(--checkpoint_dir="$tmp/ck")
[ "$mode" = tfidf ] && extra=(--checkpoint_dir="$tmp/ck" --tf_idf=true --normalize_rows=true)
timeout -k 5 120 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --in_process --num_workers=1 \
  --metrics_out="$tmp/train.json" --model_out="$tmp/m.safetensors" "${extra[@]}"
test -s "$tmp/m.safetensors"
predict() {  # predict THREADS OUT_PREFIX [MODEL]
  timeout -k 5 120 "$bin/tether-predict" --model="${3:-$tmp/m.safetensors}" --input=data/bibtex/Bibtex_data.txt.gz \
    --format=xmc --index_base=0 --split=data/bibtex/bibtex_tstSplit.txt --top_k=5 --threads="$1" \
    --output="$tmp/$2.tsv" --metrics_out="$tmp/$2.json" | tee "$tmp/$2.out"
}
same_predictions() {  # same_predictions PREFIX_A PREFIX_B: predictions and metrics bit for bit
  cmp "$tmp/$1.tsv" "$tmp/$2.tsv" || fail "predictions of $1 and $2 differ"
  python3 - "$tmp/$1.json" "$tmp/$2.json" <<'PY' || fail "metrics of $1 and $2 differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
timing = {"seconds", "rows_per_second"}
a, b = ({k: v for k, v in m.items() if k not in timing} for m in (a, b))
print(f"{len(a)} metrics compared:", "equal" if a == b else f"differ: {a} vs {b}")
sys.exit(0 if a == b and "precision_at_1" in a else 1)
PY
  echo "$1 and $2: the same $(wc -l < "$tmp/$1.tsv") prediction lines"
}

as_training() {  # as_training PREFIX: every test metric equals training's (mode predict: the lines and stdout too)
  python3 - "$tmp/train.json" "$tmp/$1.json" "$tmp/$1.tsv" "$tmp/$1.out" "$mode" <<'PY'
import json, sys
train, pred = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
keys = [f"{m}_at_{k}" for m in ("precision", "ndcg", "psp", "psndcg") for k in (1, 3, 5)]
bad = 0
for k in keys:
    a, b = train.get(k), pred.get(k)
    ok = a is not None and b is not None and abs(a - b) <= 1e-12
    print(f"{k}: training {a} tether-predict {b}{'' if ok else '  <-- differ'}")
    bad += not ok
if sys.argv[5] != "predict":
    sys.exit(1 if bad else 0)
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
}

case "$mode" in
predict)
  predict 2 p
  as_training p
  timeout -k 5 120 "$bin/tether-predict" --model="$tmp/m.safetensors" --input=data/bibtex/Bibtex_data.txt.gz \
    --split=data/bibtex/bibtex_tstSplit.txt --top_k=5 --threads=2 --output="$tmp/d.tsv" --metrics_out="$tmp/d.json" \
    > "$tmp/d.out" 2> "$tmp/d.log" || fail "predict without --format and --index_base failed: $(grep '^E' "$tmp/d.log")"
  grep -qF "reading data/bibtex/Bibtex_data.txt.gz: format xmc (the model's), index base 0 (the model's)" \
    "$tmp/d.log" || fail "predict did not say it reads the input as the model's data"
  same_predictions p d
  printf '2 1836 159\n3 5:1 7:0.5\n0,9 0:1 1835:2\n' > "$tmp/base0.txt"
  printf '2 1836 159\n4 6:1 8:0.5\n1,10 1:1 1836:2\n' > "$tmp/base1.txt"
  timeout -k 5 60 "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/base0.txt" --output="$tmp/b0.tsv" \
    2> "$tmp/b0.log" || fail "predict on 0-based rows failed: $(grep '^E' "$tmp/b0.log")"
  ! grep -q "contradicts" "$tmp/b0.log" || fail "predict warned with no flag given"
  timeout -k 5 60 "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/base1.txt" --index_base=1 \
    --output="$tmp/b1.tsv" 2> "$tmp/b1.log" || fail "predict --index_base=1 failed: $(grep '^E' "$tmp/b1.log")"
  [ "$(grep -c "^W.*--index_base=1 contradicts $tmp/m.safetensors's data.index_base 0 (the data it was trained on): \
the input's feature id i is scored as the model's feature i - 1" "$tmp/b1.log")" = 1 ] ||
    fail "predict --index_base=1 did not warn once naming both bases: $(grep '^W' "$tmp/b1.log")"
  python3 - "$tmp/b0.tsv" "$tmp/b1.tsv" <<'PY' || fail "rows numbered from 1 did not score as the same rows from 0"
import sys
zero, one = (open(p).read().split("\n") for p in sys.argv[1:])
shifted = ["\t".join(f"{int(e.split(':')[0]) + 1}:{e.split(':')[1]}" for e in line.split("\t")) if line else ""
           for line in zero]
print(f"{len(zero) - 1} rows: the same scores, labels written 1-based" if shifted == one else f"{zero} vs {one}")
sys.exit(0 if shifted == one and len(zero) == 3 else 1)
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
  # Hand-edited model files: tether-predict and tether-export refuse each
  # (exit 1) naming the file and what is wrong, and write nothing.
  refused_edit() {  # refused_edit MESSAGE EDIT ARGS... (tests/integration/edit_model.py)
    local msg=$1 rc
    shift
    python3 tests/integration/edit_model.py "$tmp/m.safetensors" "$tmp/e.safetensors" "$@"
    rc=0
    timeout -k 5 60 "$bin/tether-predict" --model="$tmp/e.safetensors" --input=data/bibtex/Bibtex_data.txt.gz \
      --format=xmc --index_base=0 --output="$tmp/e.tsv" 2> "$tmp/e.log" || rc=$?
    [ "$rc" = 1 ] && grep -qF "$tmp/e.safetensors: " <<< "$(grep -F "$msg" "$tmp/e.log")" ||
      fail "predict on a model edited ($*): exit $rc, not refused with '$msg'"
    rc=0
    timeout -k 5 60 "$bin/tether-export" --model="$tmp/e.safetensors" --out="$tmp/e.npz" 2> "$tmp/e.log" || rc=$?
    [ "$rc" = 1 ] && grep -qF "$tmp/e.safetensors: " <<< "$(grep -F "$msg" "$tmp/e.log")" ||
      fail "export of a model edited ($*): exit $rc, not refused with '$msg'"
    test ! -e "$tmp/e.tsv" && test ! -e "$tmp/e.npz" || fail "a refused model file ($*) left output"
    echo "edited ($*): refused by tether-predict and tether-export"
  }
  refused_edit "tensor 'w2.keys': key 159 at position 158 is outside the table's keys [0, 159)" key w2.keys 159
  refused_edit "tensor 'w1.keys': key 1000000000000 at position" key w1.keys 1000000000000
  refused_edit "metadata 'num_labels' is '158' but the job_config's data.num_labels is 159" meta num_labels 158
  refused_edit "metadata 'feature_scale' is 'nan': not a finite number" meta feature_scale nan
  refused_edit "tensor 'label_counts': label 3's count 1000000000000000 is above metadata 'label_counts_rows'" \
    count 3 1000000000000000
  refused_edit "table 'w2', field num_keys: the file's tables has 160, its job_config has 159" spec w2 num_keys 160
  ;;
numpy)
  predict 1 p
  timeout -k 5 60 "$bin/tether-export" --model="$tmp/m.safetensors" --out="$tmp/m.npz" --format=npz
  timeout -k 5 120 /usr/bin/python3 tests/integration/npz_forward.py --npz "$tmp/m.npz" \
    --data data/bibtex/Bibtex_data.txt.gz --split data/bibtex/bibtex_tstSplit.txt --index_base 0 \
    --predict_metrics "$tmp/p.json" --tolerance 1e-4
  # numpy's own writer, deflated: tether-predict reads it back exactly.
  timeout -k 5 60 /usr/bin/python3 -c 'import sys, numpy as np
z = np.load(sys.argv[1]); np.savez_compressed(sys.argv[2], **{k: z[k] for k in z.files})' "$tmp/m.npz" "$tmp/numpy.npz"
  predict 1 n "$tmp/numpy.npz"
  same_predictions p n
  ;;
npz)
  ck_final=$(ls -d "$tmp"/ck/ckpt-*-final)
  [ -f "$ck_final/MANIFEST" ] || fail "no final checkpoint in $tmp/ck"
  # --model_out's clock is the one the final checkpoint records.
  python3 - "$tmp/m.safetensors" "$ck_final" <<'PY' || fail "--model_out's clock is not the final checkpoint's"
import json, re, struct, sys
raw = open(sys.argv[1], "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
want = int(re.search(r"ckpt-(\d+)-final", sys.argv[2]).group(1))
assert int(meta["clock"]) == want, (meta["clock"], want)
print(f"--model_out clock {meta['clock']}, the final checkpoint's")
PY
  for out in ck.npz ck.safetensors; do
    timeout -k 5 120 "$bin/tether-export" --checkpoint="$tmp/ck" --out="$tmp/$out" ||
      fail "tether-export --checkpoint=$tmp/ck --out=$tmp/$out"
  done
  [ "$(head -c 4 "$tmp/ck.npz")" = "$(printf 'PK\003\004')" ] || fail "$tmp/ck.npz is not a zip archive"
  predict 2 s "$tmp/ck.safetensors"
  predict 2 z "$tmp/ck.npz"
  same_predictions s z
  # numpy.savez_compressed's form (members deflated), written by Python's zipfile.
  python3 - "$tmp/ck.npz" "$tmp/deflated.npz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as dst:
    for name in src.namelist():
        dst.writestr(name, src.read(name))
PY
  predict 2 d "$tmp/deflated.npz"
  same_predictions s d
  # npz → safetensors: the same bytes as the checkpoint's own export.
  timeout -k 5 60 "$bin/tether-export" --model="$tmp/ck.npz" --out="$tmp/converted.safetensors" ||
    fail "tether-export --model=$tmp/ck.npz --out=$tmp/converted.safetensors"
  cmp "$tmp/ck.safetensors" "$tmp/converted.safetensors" || fail "the npz converted to safetensors differs"
  echo "npz -> safetensors: byte-identical to the checkpoint's safetensors export"
  # A damaged npz: b1's data cut short, its NPY header still saying 256 floats.
  python3 - "$tmp/ck.npz" "$tmp/cut.npz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w") as dst:
    for name in src.namelist():
        data = src.read(name)
        dst.writestr(name, data[:-4] if name == "b1.npy" else data)
PY
  rc=0
  timeout -k 5 60 "$bin/tether-predict" --model="$tmp/cut.npz" --input=data/bibtex/Bibtex_data.txt.gz \
    --format=xmc --index_base=0 --output="$tmp/cut.tsv" 2> "$tmp/cut.log" || rc=$?
  grep -q "$tmp/cut.npz: member 'b1.npy': NPY: 1020 bytes of data, but dtype '<f4' x shape is 1024 bytes" \
    "$tmp/cut.log" && [ "$rc" = 1 ] || fail "a damaged npz: exit $rc, not refused naming the member"
  test ! -e "$tmp/cut.tsv" || fail "a refused predict left $tmp/cut.tsv"
  echo "a damaged npz: exit 1, naming $tmp/cut.npz and member 'b1.npy'"
  ;;
tfidf)
  grep -q '"tf_idf":"true"' "$tmp/m.safetensors" || fail "$tmp/m.safetensors does not say tf_idf"
  grep -q '"feature_idf":{"dtype":"F32","shape":\[1836\]' "$tmp/m.safetensors" ||
    fail "$tmp/m.safetensors holds no feature_idf tensor of 1836 floats"
  predict 2 p
  as_training p || fail "tether-predict with TF-IDF weights differs from training's evaluation"
  timeout -k 5 120 "$bin/tether-export" --checkpoint="$tmp/ck" --out="$tmp/ck.safetensors" ||
    fail "tether-export --checkpoint=$tmp/ck --out=$tmp/ck.safetensors"
  predict 2 c "$tmp/ck.safetensors"
  same_predictions p c
  ;;
*)
  echo "unknown mode $mode" >&2
  exit 2
  ;;
esac
