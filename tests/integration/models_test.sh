#!/usr/bin/env bash
# End-to-end accuracy gates for the non-XMC workloads and the --device choice,
# on the bundled data. Usage: models_test.sh MODE BIN_DIR
#   a9a        sparse logistic regression, 2 servers + 2 workers: accuracy >= 0.845
#   a9a_ftrl   the same with FTRL-Proximal and L1 (examples/a9a_ftrl.pbtxt):
#              accuracy >= 0.845, AUC >= 0.895, and L1's exact zeros: at least
#              40 of the 123 exported weights are 0.0 exactly (71 here)
#   pendigits  dense MLP, 2 servers + 2 workers: accuracy >= 0.96 on pendigits.t
#   mnist      dense MLP, 2 servers + 2 workers: accuracy >= 0.95 on the 2,000 hold-out images
#   device     --device=cuda without a GPU exits non-zero saying so; --device=auto
#              runs on the CPU and logs that choice (where a GPU is visible:
#              both run on it instead)
# Every process runs under `timeout` (tether-launch reaps its children).
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"

check() {  # check FILE NAME KEY>=MIN|KEY==VALUE ...: one python3 for every gate of a run
  python3 - "$@" <<'PY'
import json, sys
path, name, conds = sys.argv[1], sys.argv[2], sys.argv[3:]
m = json.load(open(path))
ok = True
for c in conds:
    key, op, want = (c.partition(">=") if ">=" in c else c.partition("=="))
    v = m.get(key)
    good = v is not None and (float(v) >= float(want) if op == ">=" else float(v) == float(want))
    print(f"{name}: {key} = {v} (gate {op} {want}){'' if good else '  FAIL'}")
    ok = ok and good
sys.exit(0 if ok else 1)
PY
}
run_job() {  # run_job CONFIG [flags...]: trains, leaves $tmp/m.json, prints seconds
  local config=$1; shift
  local start=$SECONDS
  timeout -k 5 120 "$bin/tether-launch" --config "$config" --metrics_out "$tmp/m.json" --timeout_s 110 "$@"
  echo "$config: $((SECONDS - start)) s wall"
}

case "$mode" in
a9a)
  run_job examples/a9a.pbtxt
  check "$tmp/m.json" "a9a, sparse LR, 2 servers, 2 workers" "accuracy>=0.845" "auc>=0.89" "test_rows==16281"
  ;;
a9a_ftrl)
  run_job examples/a9a_ftrl.pbtxt --checkpoint_dir "$tmp/ck"
  check "$tmp/m.json" "a9a, sparse LR, FTRL + L1, 2 servers, 2 workers" "accuracy>=0.845" "auc>=0.895" \
    "test_rows==16281"
  timeout -k 5 60 "$bin/tether-export" --checkpoint="$tmp/ck" --out="$tmp/model.safetensors" > "$tmp/export.log" 2>&1 \
    || { cat "$tmp/export.log"; echo "FAIL: tether-export"; exit 1; }
  python3 - "$tmp/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
s, e = header["w"]["data_offsets"]
w = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
zeros = sum(1 for x in w if x == 0.0)
print(f"FTRL + L1: {zeros} of {len(w)} weights exactly 0 (gate >= 40)")
sys.exit(0 if len(w) == 123 and zeros >= 40 else 1)
PY
  ;;
pendigits)
  run_job examples/pendigits.pbtxt
  check "$tmp/m.json" "pendigits.t, dense MLP, 2 servers, 2 workers" "accuracy>=0.96" "test_rows==3498"
  ;;
mnist)
  run_job examples/mnist.pbtxt
  check "$tmp/m.json" "MNIST hold-out, dense MLP, 2 servers, 2 workers" "accuracy>=0.95" "test_rows==2000"
  ;;
device)
  # --device=auto: the worker's log says which backend it chose.
  timeout -k 5 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 1 --workers 1 --epochs 1 \
    --device=auto --metrics_out "$tmp/auto.json" --timeout_s 110 > "$tmp/auto.log" 2>&1 \
    || { cat "$tmp/auto.log"; echo "FAIL: --device=auto did not run"; exit 1; }
  if grep -q -- "--device=auto: using the CUDA backend" "$tmp/auto.log"; then
    echo "a CUDA device is visible: --device=auto chose it; checking --device=cuda runs too"
    timeout -k 5 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 1 --workers 1 --epochs 1 \
      --device=cuda --timeout_s 110 > "$tmp/cuda.log" 2>&1 || { cat "$tmp/cuda.log"; exit 1; }
    grep -q "compute backend cuda:0" "$tmp/cuda.log" || { echo "FAIL: --device=cuda not on cuda:0"; exit 1; }
    exit 0
  fi
  grep -q -- "--device=auto: using the CPU backend" "$tmp/auto.log" \
    || { cat "$tmp/auto.log"; echo "FAIL: --device=auto did not log its CPU choice"; exit 1; }
  grep -q "compute backend cpu (--device=auto)" "$tmp/auto.log" || { echo "FAIL: worker not on the CPU"; exit 1; }
  [ -s "$tmp/auto.json" ] || { echo "FAIL: no metrics from the --device=auto run"; exit 1; }
  echo "--device=auto ran on the CPU and said so:"
  grep -- "--device=auto: using the CPU backend" "$tmp/auto.log" | head -1
  # --device=cuda: non-zero exit and a message naming the missing device.
  if timeout -k 5 60 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 1 --workers 1 --epochs 1 \
      --device=cuda --timeout_s 50 > "$tmp/cuda.log" 2>&1; then
    cat "$tmp/cuda.log"; echo "FAIL: --device=cuda succeeded without a CUDA device"; exit 1
  fi
  grep -q -- "--device=cuda: .*\(no CUDA device\|no usable CUDA device\|no CUDA backend\)" "$tmp/cuda.log" \
    || { cat "$tmp/cuda.log"; echo "FAIL: the error does not say that there is no CUDA device"; exit 1; }
  echo "--device=cuda refused as expected:"
  grep -- "\] --device=cuda:" "$tmp/cuda.log" | head -1
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
