#!/usr/bin/env bash
# Training benchmark: the XMC MLP on Bibtex with Tether against PyTorch on
# CPU with the same model, hyperparameters (tests/data/bibtex_fixed.pbtxt), thread
# count and data order, all in the same run, alternating so that drift on a
# shared machine hits every contender alike. Prints a Markdown table of
# medians over the repeats.
#
# Contenders: Tether with 1 worker + 1 server in one process (--transport
# inproc) and as two processes over loopback TCP; Tether with 2 workers + 2
# servers in one process; PyTorch with Adam and with SparseAdam on W1 at
# --threads compute threads. With --torch_2x, also PyTorch Adam at twice
# that many threads (Tether's server shard is a thread of its own besides
# the worker's compute thread); on a 2-core machine with anything else
# running, PyTorch's OpenMP threads then spin against each other and a run
# can take 20x longer, so it is not in the default set.
#
#   scripts/bench_train.sh [--build DIR] [--out DIR] [--repeats N] [--threads T] [--torch_2x]
#
# Needs a build (scripts/build.sh) and Debian's python3-torch
# (scripts/setup_bench.sh). Every run evaluates on the test split after each
# epoch; evaluation time is left out of the training seconds on both sides.
# Per-run JSON-lines metrics land in OUT/<run>/ for tools/plot_metrics.py.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
out=""
repeats=3
threads=1
torch_2x=0
while [ $# -gt 0 ]; do
  case "$1" in
    --torch_2x) torch_2x=1; shift ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "scripts/bench_train.sh: unknown argument $1 (--build, --out, --repeats, --threads, --torch_2x)" >&2; exit 2 ;;
  esac
done
out="${out:-$build/bench-train}"
config=tests/data/bibtex_fixed.pbtxt
for bin in tether-launch tether-bench; do
  [ -x "$build/bin/$bin" ] || { echo "scripts/bench_train.sh: $build/bin/$bin missing: build first" >&2; exit 1; }
done
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "scripts/bench_train.sh: Debian's python3-torch is missing: run scripts/setup_bench.sh" >&2; exit 1; }

epochs=$(sed -n 's/^ *epochs: *\([0-9]*\).*/\1/p' "$config" | head -1)
seed=$(sed -n 's/^ *seed: *\([0-9]*\).*/\1/p' "$config" | head -1)
train_rows=$(grep -c . data/bibtex/bibtex_trSplit.txt)
rm -rf "$out"
mkdir -p "$out"

run_tether() {  # name workers servers transport
  local dir="$out/$1-r$r"
  "$build/bin/tether-launch" --config "$config" --workers "$2" --servers "$3" --threads "$threads" --transport "$4" \
    --eval_every_epochs=1 --metrics_dir="$dir" --progress_every_s=0 --metrics_out "$dir.json" \
    > "$dir.log" 2>&1 || { echo "scripts/bench_train.sh: $1 failed, see $dir.log" >&2; exit 1; }
}
run_torch() {  # name w1_optimizer threads
  local dir="$out/$1-r$r"
  mkdir -p "$dir"
  /usr/bin/python3 scripts/torch_xmc.py --train_file data/bibtex/Bibtex_data.txt.gz \
    --train_split data/bibtex/bibtex_trSplit.txt --test_split data/bibtex/bibtex_tstSplit.txt --index_base 0 \
    --hidden 256 --epochs "$epochs" --minibatch_size 64 --lr 0.001 --threads "$3" --seed "$seed" \
    --w1_optimizer "$2" --eval_every_epochs 1 --metrics_jsonl "$dir/worker-0.jsonl" --metrics_out "$dir.json" \
    --order_cmd "$build/bin/tether-bench order --order_rows=$train_rows --seed=$seed --rank=0 --epochs=$epochs" \
    > "$dir.log" 2>&1 || { echo "scripts/bench_train.sh: $1 failed, see $dir.log" >&2; exit 1; }
}

for r in $(seq 1 "$repeats"); do
  echo "scripts/bench_train.sh: repeat $r/$repeats" >&2
  run_tether tether-1w 1 1 inproc
  run_torch torch-sparse-adam sparse_adam "$threads"
  run_tether tether-1w-tcp 1 1 tcp
  run_torch torch-adam adam "$threads"
  run_tether tether-2w 2 2 inproc
  if [ "$torch_2x" = 1 ]; then run_torch torch-adam-2x adam $((2 * threads)); fi
done

python3 - "$out" "$repeats" "$threads" "$torch_2x" <<'EOF'
import json, statistics, sys
out, repeats, threads, torch_2x = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
runs = [("tether-1w", "Tether, 1 worker + 1 server, one process (inproc)", 1),
        ("tether-1w-tcp", "Tether, 1 worker + 1 server, two processes (tcp)", 1),
        ("tether-2w", "Tether, 2 workers + 2 servers, one process (inproc)", 2),
        ("torch-sparse-adam", f"PyTorch, SparseAdam on W1, {threads} thread(s)", 1),
        ("torch-adam", f"PyTorch, Adam on W1, {threads} thread(s)", 1)]
if torch_2x:
    runs.append(("torch-adam-2x", f"PyTorch, Adam on W1, {2 * threads} threads", 1))

def first_reach(evals, th):
    for e in evals:
        if e["precision_at_1"] >= th:
            return e["train_s"]
    return None

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

rows = {}
for key, label, workers in runs:
    sps, secs, t55, t60, p1, p3, p5 = [], [], [], [], [], [], []
    for r in range(1, repeats + 1):
        m = json.load(open(f"{out}/{key}-r{r}.json"))
        evals = [json.loads(l) for l in open(f"{out}/{key}-r{r}/worker-0.jsonl") if '"eval"' in l]
        evals = [e for e in evals if e.get("kind") == "eval"]
        sps.append(m["samples_per_second"]); secs.append(m["train_seconds"])
        t55.append(first_reach(evals, 0.55)); t60.append(first_reach(evals, 0.60))
        p1.append(m["precision_at_1"]); p3.append(m["precision_at_3"]); p5.append(m["precision_at_5"])
    rows[key] = dict(label=label, workers=workers, sps=med(sps), secs=med(secs), t55=med(t55), t60=med(t60),
                     p1=med(p1), p3=med(p3), p5=med(p5), reached60=sum(t is not None for t in t60))

fmt = lambda v, f="%.2f": "not reached" if v is None else f % v
print(f"## Training: XMC MLP on Bibtex, Tether vs PyTorch (CPU, {threads} compute thread(s)), "
      f"median of {repeats} run(s)\n")
print("| run | samples/s | train s | s to P@1 0.55 | s to P@1 0.60 (runs reaching it) | P@1 | P@3 | P@5 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for key, _, _ in runs:
    x = rows[key]
    print(f"| {x['label']} | {x['sps']:.0f} | {x['secs']:.2f} | {fmt(x['t55'])} | {fmt(x['t60'])} "
          f"({x['reached60']}/{repeats}) | {x['p1']:.4f} | {x['p3']:.4f} | {x['p5']:.4f} |")
best = max((rows[k] for k in ("torch-sparse-adam", "torch-adam")), key=lambda x: x["sps"])
fast60 = min((rows[k]["t60"] for k in ("torch-sparse-adam", "torch-adam") if rows[k]["t60"] is not None), default=None)
t1 = rows["tether-1w"]
print()
print(f"Tether 1 worker (inproc) ÷ faster PyTorch at the same thread count ({best['label']}): "
      f"samples/s ×{t1['sps'] / best['sps']:.2f}")
if torch_2x:
    print(f"Tether 1 worker (inproc) ÷ {rows['torch-adam-2x']['label']}: samples/s "
          f"×{t1['sps'] / rows['torch-adam-2x']['sps']:.2f}")
print(f"Tether 1 worker: inproc ÷ tcp samples/s ×{t1['sps'] / rows['tether-1w-tcp']['sps']:.2f}")
if t1["t60"] is not None and fast60 is not None:
    print(f"Time to P@1 0.60: Tether 1 worker {t1['t60']:.2f} s, faster PyTorch {fast60:.2f} s "
          f"(ratio {t1['t60'] / fast60:.2f}; below 1 means Tether is faster)")
EOF
