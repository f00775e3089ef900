#!/usr/bin/env bash
# The prepared GPU check (issue 4): on a machine with one CUDA GPU, in under
# 10 minutes,
#   1. builds Tether with the CUDA backend (only the targets used below);
#   2. runs the backend tests on the GPU: backend_ops_test (every op against
#      the CPU backend, several shapes) and cuda_backend_test; a SKIPPED GPU
#      case on a GPU machine counts as a failure here;
#   3. times device-resident cuSPARSE SpMM against the memory bandwidth
#      (tether-spmm-bench);
#   4. trains the XMC MLP on Bibtex with --device=cpu and --device=cuda;
#   5. generates a larger synthetic XMC problem (tether-gen-xmc) and trains
#      it with --device=cpu (1 and 8 OpenBLAS threads) and --device=cuda.
# Everything lands in OUT_DIR: logs, metrics JSON, and summary.md with the
# figures for docs/PERFORMANCE.md.
#
# Usage: tools/gpu_check.sh [OUT_DIR]     (default: $OUT, else ./gpu_check_out)
# Env:   TETHER_GPU_ARCH  CUDA architecture to compile for (default: native)
# Exit status: 0 when every step passed, else the number of failed steps.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-gpu_check_out}}
mkdir -p "$out"
build=build-gpu
jobs=$(nproc 2>/dev/null || echo 8)
arch=${TETHER_GPU_ARCH:-native}
t0=$SECONDS
failed=0
summary="$out/summary.md"
log() { echo "[gpu_check +$((SECONDS - t0))s] $*" | tee -a "$out/progress.log"; }
fail() { log "FAILED: $*"; failed=$((failed + 1)); }
metric() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("n/a" if v is None else (f"{v:.4f}" if isinstance(v, float) else v))' "$1" "$2" 2>/dev/null || echo n/a; }

{
  echo "# Tether GPU check, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv 2>&1 || echo "nvidia-smi failed"
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo '```'
} > "$summary"

# ---- 1. build
log "configure (CUDA on, arch $arch) and build"
if ! timeout 120 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTETHER_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" > "$out/cmake.log" 2>&1; then
  fail "cmake (see $out/cmake.log)"; tail -20 "$out/cmake.log"; exit 1
fi
if ! timeout 420 cmake --build "$build" -j"$jobs" --target tether-server tether-worker tether-launch \
    tether-gen-xmc tether-spmm-bench backend_ops_test cuda_backend_test > "$out/build.log" 2>&1; then
  fail "build (see $out/build.log)"; tail -30 "$out/build.log"; exit 1
fi
bin=$build/bin
log "built in $((SECONDS - t0)) s"

# ---- 2. backend tests on the GPU
echo -e "\n## Backend tests (GPU against CPU)\n" >> "$summary"
for t in backend_ops_test cuda_backend_test; do
  timeout 180 "$bin/$t" > "$out/$t.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$out/$t.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$out/$t.log")
  failures=$(grep -c '^\[  FAILED  \]' "$out/$t.log")
  echo "- $t: exit $rc, $passed passed, $skipped skipped, $failures failed lines" >> "$summary"
  # backend_ops_test has no legitimately skipped case on a GPU machine.
  if [ $rc -ne 0 ] || [ "$skipped" -ne 0 ]; then fail "$t (exit $rc, $skipped skipped; see $out/$t.log)"; fi
done
log "backend tests done"

# ---- 3. SpMM against memory bandwidth
echo -e "\n## cuSPARSE SpMM (device-resident) against memory bandwidth\n" >> "$summary"
if timeout 180 "$bin/tether-spmm-bench" > "$out/spmm_bench.txt" 2>&1; then
  { echo '```'; grep -v '^JSON' "$out/spmm_bench.txt"; echo '```'; } >> "$summary"
else
  fail "tether-spmm-bench (see $out/spmm_bench.txt)"
fi
log "SpMM bench done"

# ---- 4/5. XMC training, CPU against GPU
echo -e "\n## XMC MLP training, CPU against GPU (2 servers, 1 worker, loopback)\n" >> "$summary"
echo "| problem | device | train s | samples/s | P@1 | P@5 |" >> "$summary"
echo "|---|---|---|---|---|---|" >> "$summary"
train() {  # train NAME CONFIG DEVICE THREADS [flags...]
  local name=$1 config=$2 dev=$3 threads=$4; shift 4
  local tag="${name}_${dev}_t${threads}"
  if timeout 200 "$bin/tether-launch" --config "$config" --servers 2 --workers 1 --device="$dev" \
      --threads="$threads" --timeout_s 190 --metrics_out "$out/$tag.json" "$@" > "$out/$tag.log" 2>&1; then
    echo "| $name | $dev (threads $threads) | $(metric "$out/$tag.json" train_seconds) |" \
         "$(metric "$out/$tag.json" samples_per_second) | $(metric "$out/$tag.json" precision_at_1) |" \
         "$(metric "$out/$tag.json" precision_at_5) |" >> "$summary"
  else
    fail "$tag (see $out/$tag.log)"
    echo "| $name | $dev (threads $threads) | failed | | | |" >> "$summary"
  fi
  grep -h "compute backend" "$out/$tag.log" | head -1 >> "$out/backends_used.txt"
  log "$tag done"
}
train bibtex examples/bibtex.pbtxt cpu 1
train bibtex examples/bibtex.pbtxt cuda 1

# A larger synthetic problem where compute dominates: F = 20,000 features,
# L = 8,000 labels, H = 512, minibatch 512 (about 12 GFLOP per minibatch).
synth=$(cd "$out" && pwd)/synth  # absolute: a config's relative paths are taken against its own folder
if timeout 120 "$bin/tether-gen-xmc" --out_prefix="$synth" --train_rows=20000 --test_rows=2000 \
    --num_features=20000 --num_labels=8000 --features_per_row=60 --labels_per_row=5 --seed=1 \
    > "$out/gen_xmc.log" 2>&1; then
  cat > "$out/synth.pbtxt" <<EOF
name: "synthetic_xmc_gpu_check"
cluster { num_servers: 2 num_workers: 1 }
data { format: XMC train_file: "$synth.train.txt" test_file: "$synth.test.txt"
       index_base: 0 num_features: 20000 num_labels: 8000 }
model { type: XMC_MLP hidden: 512 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { staleness: 2 }
train { epochs: 1 minibatch_size: 512 eval_minibatch_size: 512 }
EOF
  train synthetic "$out/synth.pbtxt" cpu 1
  train synthetic "$out/synth.pbtxt" cpu 8
  train synthetic "$out/synth.pbtxt" cuda 1
else
  fail "tether-gen-xmc (see $out/gen_xmc.log)"
fi
rm -f "$synth".train.txt "$synth".test.txt  # large; regenerated on demand

echo -e "\nTotal: $((SECONDS - t0)) s, $failed failed step(s)." >> "$summary"
log "finished: $failed failed step(s); summary in $summary"
cat "$summary"
exit $failed
