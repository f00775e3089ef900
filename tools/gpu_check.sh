#!/usr/bin/env bash
# The prepared GPU check: on a machine with one CUDA GPU,
# within a time budget (default 540 s, so the whole script fits in a
# 10-minute device slot),
#   1. builds Tether with the CUDA backend (only the targets used below);
#   2. runs the backend tests on the GPU: backend_ops_test (every op, and the
#      device-buffer API: resident operands, uploads, mixed host/buffer
#      operands, against the CPU backend), cuda_backend_test, and
#      residency_test (exact transfers per minibatch on the counting
#      backend); a SKIPPED GPU case on a GPU machine counts as a failure;
#   3. times device-resident cuSPARSE SpMM against the memory bandwidth
#      (tether-spmm-bench: peak = 2 × memory clock × bus width from
#      cudaDeviceGetAttribute, and a measured device-to-device copy);
#   4. trains the XMC MLP on Bibtex with --device=cpu and --device=cuda,
#      alternated (cpu, cuda, cpu, cuda while the budget allows), samples/s;
#   5. if the budget still allows, a larger synthetic XMC problem
#      (tether-gen-xmc) with the CPU backend (1 and 8 OpenBLAS threads) and
#      the CUDA backend;
#   6. the shipped a9a, pendigits and MNIST examples (2 servers, 2 workers,
#      seed 1) with --device=cpu and --device=cuda: samples/s and accuracy;
#   7. tether-predict on Bibtex's test split with --device=cpu and
#      --device=cuda, one model (trained on the GPU, exported from its
#      final checkpoint): P@1/3/5 of each, the rows whose top 5 labels come
#      out the same and in the same order, the largest score difference; a
#      P@k that differs by more than 0.001 fails the step.
# Everything lands in OUT_DIR: logs, metrics JSON, summary.md (all figures)
# and performance_section.md, the text of docs/SCALE_AND_GPU.md's GPU figures
# (between its "gpu_check:begin/end" markers). Apply it afterwards with
#   tools/gpu_check.sh --apply OUT_DIR/performance_section.md
#
# Usage: tools/gpu_check.sh [OUT_DIR]     (default: $OUT, else ./gpu_check_out; relative paths here and in
#        TETHER_GPU_BIN are taken from the current folder)
#        tools/gpu_check.sh --apply FILE  (splices FILE into docs/SCALE_AND_GPU.md)
# Env:   TETHER_GPU_ARCH           CUDA architecture (default: native)
#        TETHER_GPU_BIN            a folder of binaries already built with CUDA
#                                  for this GPU's architecture (the ten
#                                  targets of step 1): step 1 is skipped, for
#                                  a GPU machine without Tether's build
#                                  dependencies (their shared libraries must
#                                  then be on LD_LIBRARY_PATH)
#        TETHER_GPU_CHECK_BUDGET_S whole-run budget in seconds (default 540)
# Exit:  0 every step passed; 77 no CUDA device or toolkit (nothing built or
#        measured; the message says which); else the number of failed steps.
set -uo pipefail
caller=$PWD
# A path given relative: relative to the folder the script was started from.
from_caller() { case "$1" in /*) echo "$1" ;; "") echo "" ;; *) echo "$caller/$1" ;; esac; }
cd "$(dirname "$0")/.."
perf=docs/SCALE_AND_GPU.md

if [ "${1:-}" = "--apply" ]; then
  section=$(from_caller "${2:-}")
  [ -f "$section" ] || { echo "gpu_check --apply: no such file '${2:-}'" >&2; exit 2; }
  python3 - "$section" "$perf" <<'EOF' || exit 1
import sys
section, doc = open(sys.argv[1]).read().rstrip("\n"), sys.argv[2]
text = open(doc).read()
b, e = "<!-- gpu_check:begin -->", "<!-- gpu_check:end -->"
if b not in text or e not in text:
    sys.exit(f"gpu_check --apply: {doc} lacks the {b} / {e} markers")
head, rest = text.split(b, 1)
_, tail = rest.split(e, 1)
open(doc, "w").write(head + b + "\n" + section + "\n" + e + tail)
print(f"gpu_check --apply: {doc} updated")
EOF
  exit 0
fi

# ---- 0. a device and a toolkit, or a clear SKIP (exit 77)
if ! command -v nvidia-smi > /dev/null 2>&1; then
  echo "gpu_check: SKIP: no CUDA device found (nvidia-smi is not installed); nothing built or measured" >&2
  exit 77
fi
if ! grep -q '^GPU ' <<< "$(nvidia-smi -L 2> /dev/null)"; then
  echo "gpu_check: SKIP: no CUDA device found (nvidia-smi -L lists no GPU: $(nvidia-smi -L 2>&1 | head -1));" \
       "nothing built or measured" >&2
  exit 77
fi
# The toolkit builds step 1; binaries built elsewhere (TETHER_GPU_BIN) need
# only the driver and their shared libraries.
if [ -z "${TETHER_GPU_BIN:-}" ] && ! command -v nvcc > /dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gpu_check: SKIP: a GPU is present but no CUDA toolkit (nvcc) was found; install it or put it on PATH," \
       "or give binaries built elsewhere with TETHER_GPU_BIN" >&2
  exit 77
fi
command -v nvcc > /dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH

out=$(from_caller "${1:-${OUT:-gpu_check_out}}")
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=build-gpu
jobs=$(nproc 2> /dev/null || echo 8)
arch=${TETHER_GPU_ARCH:-native}
budget=${TETHER_GPU_CHECK_BUDGET_S:-540}
t0=$SECONDS
failed=0
summary="$out/summary.md"
log() { echo "[gpu_check +$((SECONDS - t0))s] $*" | tee -a "$out/progress.log"; }
fail() { log "FAILED: $*"; failed=$((failed + 1)); }
left() { echo $((budget - (SECONDS - t0))); }
# cap WANT: a step's timeout, never past the budget (10 s kept for the summary).
cap() { local l=$(($(left) - 10)); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 1 ? l : 1)); }
metric() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])).get(sys.argv[2]); print("n/a" if v is None else (f"{v:.4f}" if isinstance(v, float) else v))' "$1" "$2" 2> /dev/null || echo n/a; }
launcher=()
command -v ccache > /dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)

gpu=$(nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader 2>&1 | head -1)
{
  echo "# Tether GPU check, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2> /dev/null || echo '?')"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv 2>&1 || echo "nvidia-smi failed"
  echo "nvcc: $(nvcc --version 2> /dev/null | tail -1 || true)"
  echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo '```'
} > "$summary"

# ---- 1. build (or binaries built elsewhere)
targets=(tether-server tether-worker tether-launch tether-export tether-predict tether-gen-xmc tether-spmm-bench
         backend_ops_test cuda_backend_test residency_test)
if [ -n "${TETHER_GPU_BIN:-}" ]; then
  bin=$(cd "$(from_caller "$TETHER_GPU_BIN")" 2> /dev/null && pwd) || { fail "TETHER_GPU_BIN '$TETHER_GPU_BIN' is not a folder"; exit "$failed"; }
  for t in "${targets[@]}"; do
    [ -x "$bin/$t" ] || { fail "TETHER_GPU_BIN: $bin/$t is missing or not executable"; exit "$failed"; }
  done
  missing=$(ldd "${targets[@]/#/$bin/}" 2> /dev/null | grep 'not found' | sort -u)
  [ -z "$missing" ] || { fail "TETHER_GPU_BIN: shared libraries not found: $(echo $missing)"; exit "$failed"; }
  log "binaries built elsewhere: $bin (step 1 skipped)"
  echo "binaries: built elsewhere ($bin)" >> "$summary"
else
  log "configure (CUDA on, arch $arch) and build with -j$jobs; budget $budget s"
  if ! timeout "$(cap 120)" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTETHER_WITH_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$arch" "${launcher[@]}" > "$out/cmake.log" 2>&1; then
    fail "cmake (see $out/cmake.log)"; tail -20 "$out/cmake.log"; exit "$failed"
  fi
  if ! timeout "$(cap 330)" cmake --build "$build" -j"$jobs" --target "${targets[@]}" > "$out/build.log" 2>&1; then
    fail "build (see $out/build.log)"; tail -30 "$out/build.log"; exit "$failed"
  fi
  bin=$build/bin
  log "built in $((SECONDS - t0)) s"
fi

# ---- 2. backend tests on the GPU
echo -e "\n## Backend tests (GPU against CPU)\n" >> "$summary"
for t in backend_ops_test cuda_backend_test residency_test; do
  timeout "$(cap 120)" "$bin/$t" > "$out/$t.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$out/$t.log")
  skipped=$(grep -c '^\[  SKIPPED \] .*(' "$out/$t.log")
  failures=$(grep -c '^\[  FAILED  \] .*(' "$out/$t.log")
  echo "- $t: exit $rc, $passed passed, $skipped skipped, $failures failed" >> "$summary"
  # None of these has a legitimately skipped case on a GPU machine.
  if [ $rc -ne 0 ] || [ "$skipped" -ne 0 ]; then fail "$t (exit $rc, $skipped skipped; see $out/$t.log)"; fi
done
log "backend tests done"

# ---- 3. SpMM against memory bandwidth
echo -e "\n## cuSPARSE SpMM (device-resident) against memory bandwidth\n" >> "$summary"
if timeout "$(cap 120)" "$bin/tether-spmm-bench" --quick > "$out/spmm_bench.txt" 2>&1; then
  { echo '```'; grep -v '^JSON' "$out/spmm_bench.txt"; echo '```'; } >> "$summary"
else
  fail "tether-spmm-bench (see $out/spmm_bench.txt)"
fi
log "SpMM bench done"

# ---- 4/5. XMC training, CPU against GPU
echo -e "\n## XMC MLP training, CPU against GPU (2 servers, 1 worker, tcp loopback)\n" >> "$summary"
echo "| problem | device | train s | samples/s | P@1 | P@5 |" >> "$summary"
echo "|---|---|---|---|---|---|" >> "$summary"
train() {  # train NAME CONFIG DEVICE THREADS RUN
  local name=$1 config=$2 dev=$3 threads=$4 run=$5
  local tag="${name}_${dev}_t${threads}_r${run}"
  local limit; limit=$(cap 150)
  if timeout "$limit" "$bin/tether-launch" --config "$config" --servers 2 --workers 1 --device="$dev" \
      --threads="$threads" --timeout_s "$((limit > 10 ? limit - 5 : limit))" --metrics_out "$out/$tag.json" \
      > "$out/$tag.log" 2>&1; then
    echo "| $name | $dev (threads $threads), run $run | $(metric "$out/$tag.json" train_seconds) |" \
         "$(metric "$out/$tag.json" samples_per_second) | $(metric "$out/$tag.json" precision_at_1) |" \
         "$(metric "$out/$tag.json" precision_at_5) |" >> "$summary"
  else
    fail "$tag (see $out/$tag.log)"
    echo "| $name | $dev (threads $threads), run $run | failed | | | |" >> "$summary"
  fi
  grep -h "compute backend" "$out/$tag.log" | head -1 >> "$out/backends_used.txt"
  log "$tag done"
}
for run in 1 2; do
  # A Bibtex run takes well under a minute on either device; keep 60 s spare.
  if [ "$(left)" -lt 150 ]; then log "budget: Bibtex run $run skipped"; break; fi
  train bibtex examples/bibtex.pbtxt cpu 1 "$run"
  train bibtex examples/bibtex.pbtxt cuda 1 "$run"
done

# A larger synthetic problem where compute dominates: F = 20,000 features,
# L = 8,000 labels, H = 512, minibatch 512 (about 12 GFLOP per minibatch).
if [ "$(left)" -ge 200 ]; then
  synth=$out/synth  # absolute: a config's relative paths are taken against its own folder
  if timeout "$(cap 90)" "$bin/tether-gen-xmc" --out_prefix="$synth" --train_rows=20000 --test_rows=2000 \
      --num_features=20000 --num_labels=8000 --features_per_row=60 --labels_per_row=5 --seed=1 \
      > "$out/gen_xmc.log" 2>&1; then
    cat > "$out/synth.pbtxt" << EOF
name: "synthetic_xmc_gpu_check"
cluster { num_servers: 2 num_workers: 1 }
data { format: XMC train_file: "$synth.train.txt" test_file: "$synth.test.txt"
       index_base: 0 num_features: 20000 num_labels: 8000 }
model { type: XMC_MLP hidden: 512 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { staleness: 2 }
train { epochs: 1 minibatch_size: 512 eval_minibatch_size: 512 }
EOF
    train synthetic "$out/synth.pbtxt" cuda 1 1
    [ "$(left)" -ge 90 ] && train synthetic "$out/synth.pbtxt" cpu 8 1
    [ "$(left)" -ge 90 ] && train synthetic "$out/synth.pbtxt" cpu 1 1
  else
    fail "tether-gen-xmc (see $out/gen_xmc.log)"
  fi
  rm -f "$out"/synth.train.txt "$out"/synth.test.txt  # large; regenerated on demand
else
  log "budget: synthetic problem skipped ($(left) s left)"
fi

# ---- 6. the shipped examples, CPU against GPU
echo -e "\n## Shipped examples, CPU against GPU (as shipped: 2 servers, 2 workers, tcp; seed 1)\n" >> "$summary"
echo "| example | device | train s | samples/s | accuracy |" >> "$summary"
echo "|---|---|---|---|---|" >> "$summary"
example() {  # example NAME DEVICE
  local tag="example_$1_$2" limit; limit=$(cap 120)
  if timeout "$limit" "$bin/tether-launch" --config "examples/$1.pbtxt" --seed=1 --device="$2" \
      --timeout_s "$((limit > 10 ? limit - 5 : limit))" --metrics_out "$out/$tag.json" > "$out/$tag.log" 2>&1; then
    echo "| $1 | $2 | $(metric "$out/$tag.json" train_seconds) | $(metric "$out/$tag.json" samples_per_second) |" \
         "$(metric "$out/$tag.json" accuracy) |" >> "$summary"
  else
    fail "$tag (see $out/$tag.log)"
    echo "| $1 | $2 | failed | | |" >> "$summary"
  fi
  log "$tag done"
}
for ex in a9a pendigits mnist; do
  for dev in cpu cuda; do
    if [ "$(left)" -lt 60 ]; then log "budget: $ex on $dev skipped"; continue; fi
    example "$ex" "$dev"
  done
done

# ---- 7. tether-predict, CPU against GPU, on one model
predict_compare() {
  local ck="$out/predict_ck" model="$out/predict_model.safetensors" dev
  timeout "$(cap 120)" "$bin/tether-launch" --config examples/bibtex.pbtxt --seed=1 --device=cuda --checkpoint_dir="$ck" \
    > "$out/predict_train.log" 2>&1 || { fail "predict: training (see $out/predict_train.log)"; return; }
  timeout "$(cap 60)" "$bin/tether-export" --checkpoint="$ck" --out="$model" > "$out/predict_export.log" 2>&1 ||
    { fail "predict: tether-export (see $out/predict_export.log)"; return; }
  for dev in cpu cuda; do
    timeout "$(cap 60)" "$bin/tether-predict" --model="$model" --input=data/bibtex/Bibtex_data.txt.gz \
      --split=data/bibtex/bibtex_tstSplit.txt --format=xmc --index_base=0 --top_k=5 --device="$dev" \
      --output="$out/predict_$dev.tsv" --metrics_out="$out/predict_$dev.json" > "$out/predict_$dev.log" 2>&1 ||
      { fail "predict on $dev (see $out/predict_$dev.log)"; return; }
  done
  python3 - "$out" >> "$summary" << 'EOF' || fail "predict: CPU and GPU disagree (see $out/summary.md)"
import json, sys
out = sys.argv[1]
def rows(dev):
    return [[(k, float(v)) for k, v in (f.split(":") for f in line.rstrip("\n").split("\t") if ":" in f)]
            for line in open(f"{out}/predict_{dev}.tsv")]
cpu, gpu = rows("cpu"), rows("cuda")
same = sum([k for k, _ in a] == [k for k, _ in b] for a, b in zip(cpu, gpu))
diff = max((abs(x - y) for a, b in zip(cpu, gpu) for (k1, x), (k2, y) in zip(a, b) if k1 == k2), default=0.0)
m = {d: json.load(open(f"{out}/predict_{d}.json")) for d in ("cpu", "cuda")}
keys = ("precision_at_1", "precision_at_3", "precision_at_5")
result = {"rows": len(cpu), "same_top5": same, "max_score_diff": diff,
          **{f"{d}_{k}": m[d][k] for d in m for k in keys}}
json.dump(result, open(f"{out}/predict_compare.json", "w"))
print("\n## tether-predict, CPU against GPU (one model, Bibtex test split)\n")
print(f"- rows with the same top 5 labels in the same order: {same} of {len(cpu)}; largest score difference {diff:.2g}")
for d in m:
    print(f"- {d}: " + ", ".join(f"{k} {m[d][k]:.4f}" for k in keys))
sys.exit(0 if len(cpu) == len(gpu) and all(abs(m["cpu"][k] - m["cuda"][k]) <= 0.001 for k in keys) else 1)
EOF
  rm -rf "$ck" "$out"/predict_*.tsv "$model"  # large; regenerated on demand
  log "predict comparison done"
}
if [ "$(left)" -ge 60 ]; then predict_compare; else log "budget: predict comparison skipped"; fi

# ---- the section for docs/SCALE_AND_GPU.md
python3 - "$out" "$gpu" > "$out/performance_section.md" << 'EOF' || fail "performance_section.md"
import glob, json, os, statistics, sys
out, gpu = sys.argv[1], sys.argv[2]
rows = {}
bench = os.path.join(out, "spmm_bench.txt")
lines = open(bench, errors="replace").read().splitlines() if os.path.exists(bench) else []
for line in lines:
    if line.startswith("JSON "):
        j = json.loads(line[5:])
        rows[(j["shape"], j["op"])] = j
def sps(pattern):
    v = []
    for f in sorted(glob.glob(os.path.join(out, pattern))):
        try:
            v.append(json.load(open(f))["samples_per_second"])
        except Exception:
            pass
    return v
def fmt(v):
    return f"{statistics.median(v):,.0f} (median of {len(v)})" if v else "—"
any_row = next(iter(rows.values()), None)
print(f"Measured by `tools/gpu_check.sh` on {gpu} (commit and logs: its summary.md).")
print()
print("| measurement | value |")
print("|---|---|")
if any_row:
    print(f"| memory bandwidth: peak (2 × clock × bus) / measured D2D copy | {any_row['peak_gbps']:.0f} / {any_row['copy_gbps']:.0f} GB/s |")
for shape, label in [("bibtex_minibatch", "Bibtex minibatch"), ("xmc_large_minibatch", "large XMC minibatch"),
                     ("sparse_layer_large", "large sparse layer")]:
    for op, name in [("spmm", "A·B"), ("spmm_transposed", "Aᵀ·D")]:
        r = rows.get((shape, op))
        if r:
            print(f"| SpMM {name}, {label}: GB/s, % of peak, GFLOP/s | {r['gbps']:.0f}, {100 * r['gbps'] / r['peak_gbps']:.0f}%, {r['gflops']:.0f} |")
cpu, gpu_s = sps("bibtex_cpu_t1_r*.json"), sps("bibtex_cuda_t1_r*.json")
ratio = f", GPU/CPU {statistics.median(gpu_s) / statistics.median(cpu):.2f}×" if cpu and gpu_s else ""
print(f"| Bibtex samples/s, CPU (1 thread) / GPU | {fmt(cpu)} / {fmt(gpu_s)}{ratio} |")
s1, s8, sg = sps("synthetic_cpu_t1_r*.json"), sps("synthetic_cpu_t8_r*.json"), sps("synthetic_cuda_t1_r*.json")
print(f"| synthetic XMC samples/s, CPU 1 thread / CPU 8 threads / GPU | {fmt(s1)} / {fmt(s8)} / {fmt(sg)} |")
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception:
        return None
for ex in ("a9a", "pendigits", "mnist"):
    c, g = load(f"example_{ex}_cpu.json"), load(f"example_{ex}_cuda.json")
    if c and g:
        print(f"| {ex} as shipped (seed 1): samples/s CPU / GPU, accuracy CPU / GPU | "
              f"{c['samples_per_second']:,.0f} / {g['samples_per_second']:,.0f}, {c['accuracy']:.4f} / {g['accuracy']:.4f} |")
p = load("predict_compare.json")
if p:
    print(f"| tether-predict, Bibtex test split, P@1 CPU / GPU, rows with the same top 5, largest score difference | "
          f"{p['cpu_precision_at_1']:.4f} / {p['cuda_precision_at_1']:.4f}, {p['same_top5']:,} of {p['rows']:,}, {p['max_score_diff']:.2g} |")
EOF

{
  echo -e "\n## For docs/SCALE_AND_GPU.md (tools/gpu_check.sh --apply $out/performance_section.md)\n"
  cat "$out/performance_section.md"
  echo -e "\nTotal: $((SECONDS - t0)) s of a $budget s budget, $failed failed step(s)."
} >> "$summary"
log "finished: $failed failed step(s); summary in $summary"
cat "$summary"
exit "$failed"
