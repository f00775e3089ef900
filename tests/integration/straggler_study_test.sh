#!/usr/bin/env bash
# tools/straggler_study.py with the real binaries, in --quick mode (1 run, 2
# epochs) on a tiny synthetic XMC set (tether-gen-xmc: 1,000 training rows,
# 300 test rows, 400 features, 20 labels), one mode (fixed split, s = 2),
# worker 1 slowed 2x, 2 servers + 2 workers. Checks study.csv: its columns,
# one row with exact counts (the static split gives each worker 500 rows per
# epoch, 10 minibatches of 50: 1000 rows and 20 clocks each) and sane values
# (positive times, P@1 in [0, 1], waiting shares in [0, 1]); the target was
# reached; no process of the study outlives it. Usage:
# straggler_study_test.sh BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init study "$1"
cleanup() {
  # Nothing should be left; if something is, it is ours (its command line
  # names $tmp): kill it by pid.
  local left
  left=$(pgrep -f -- "$tmp/" || true)
  if [ -n "$left" ]; then kill -9 $left 2>/dev/null || true; fi
  tether_test_cleanup
}
trap cleanup EXIT

timeout 60 "$bin/tether-gen-xmc" --out_prefix="$tmp/xmc" --train_rows=1000 --test_rows=300 --num_features=400 \
  --num_labels=20 --features_per_row=20 --labels_per_row=1 --features_per_label=10 --signal_fraction=0.8 \
  --seed=3 >/dev/null
cat >"$tmp/tiny.pbtxt" <<EOF
name: "tiny"
cluster { num_servers: 2 num_workers: 2 }
data { format: XMC index_base: 0 num_features: 400 num_labels: 20
       train_file: "xmc.train.txt" test_file: "xmc.test.txt" }
model { type: XMC_MLP hidden: 32 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.01 }
consistency { staleness: 2 }
train { epochs: 7 minibatch_size: 50 seed: 1 }
EOF

rc=0
timeout -k 10 170 python3 tools/straggler_study.py --quick --datasets "tiny=$tmp/tiny.pbtxt" --target tiny=0.3 \
  --slowdowns 2 --modes fixed_s2 --build "$bin" --out "$tmp/out" --timeout_s 120 --no_plot >"$tmp/study.log" 2>&1 ||
  rc=$?
cat "$tmp/study.log"
[ "$rc" = 0 ] || { echo "FAIL: the study exited $rc"; exit 1; }
left=$(pgrep -f -- "$tmp/" || true)
[ -z "$left" ] || { echo "FAIL: processes outlived the study: $(ps -o pid,args -p ${left//$'\n'/,})"; exit 1; }

python3 - "$tmp/out/study.csv" <<'EOF'
import csv, sys
sys.path.insert(0, "tools")
import straggler_study
with open(sys.argv[1]) as f:
    reader = csv.DictReader(f)
    assert reader.fieldnames == straggler_study.CSV_COLUMNS, reader.fieldnames
    rows = list(reader)
assert len(rows) == 1, rows
r = rows[0]
print("study.csv:", r)
exact = {"dataset": "tiny", "slowdown": "2", "mode": "fixed_s2", "metric": "precision_at_1", "target": "0.3",
         "runs": "1", "failed": "0", "target_reached_runs": "1", "rows_per_worker": "1000/1000",
         "updates_per_worker": "20/20"}
bad = {k: (r[k], v) for k, v in exact.items() if r[k] != v}
assert not bad, f"(got, expected): {bad}"
epoch_s, final, ttt = float(r["epoch_s"]), float(r["final"]), float(r["time_to_target_s"])
assert 0 < epoch_s < 60, epoch_s
assert 0.3 <= final <= 1, final
assert 0 < ttt <= 2 * epoch_s * 1.05 + 0.1, (ttt, epoch_s)  # rank 0 is not the slowest
waits = [float(x) for x in r["wait_per_worker"].split("/")]
assert len(waits) == 2 and all(0 <= w <= 1 for w in waits), waits
assert 0 <= float(r["wait_share"]) <= 1 and 0 <= float(r["bound_wait_share"]) <= 1, r
print(f"PASS: {epoch_s:.3f} s/epoch, final P@1 {final:.4f}, P@1 >= 0.3 after {ttt:.3f} s, waiting {waits}")
EOF
grep -q "^Criterion (bibtex.*NOT MEASURED (bibtex not in --datasets)" "$tmp/out/study.md" ||
  { echo "FAIL: no criterion line in study.md"; exit 1; }
