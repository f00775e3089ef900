#!/usr/bin/env bash
# scripts/bench_xmc_scale.sh keeps each run's files apart: two runs against
# a stand-in build folder (a tether-launch that writes a metrics JSON named
# by its run, and data files already generated) leave two run folders, each
# with its own metrics.json, job.log and peak_rss_kb.txt, and each run's
# table reports its own figures.
# Usage: bench_scale_script_test.sh BIN_DIR (unused: no real binary runs)
source "$(dirname "$0")/lib.sh"
tether_test_init run "$1"
build="$tmp/build"
mkdir -p "$build/bin" "$build/synthetic"
echo "1 1 1" > "$build/synthetic/amazon670k.train.txt"
echo "1 1 1" > "$build/synthetic/amazon670k.test.txt"
cat > "$build/bin/tether-launch" <<'LAUNCH'
#!/usr/bin/env bash
# Writes a metrics JSON whose samples count is given by --epochs=N.
out= epochs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --metrics_out) out=$2; shift 2 ;;
    --epochs=*) epochs=${1#--epochs=}; shift ;;
    *) shift ;;
  esac
done
cat > "$out" <<JSON
{"num_workers": 2, "num_servers": 2, "total_samples": $((epochs * 1000)), "train_seconds": 2.0,
 "samples_per_second": 500.0, "precision_at_1": 0.5, "precision_at_3": 0.4, "precision_at_5": 0.3,
 "test_rows": 10, "workers": []}
JSON
echo "launched with $epochs epoch(s)"
LAUNCH
chmod +x "$build/bin/tether-launch"
scripts/bench_xmc_scale.sh --build "$build" -- --epochs=1 > "$tmp/one.md" 2> "$tmp/one.err" || fail "run 1 exited $?"
scripts/bench_xmc_scale.sh --build "$build" -- --epochs=2 > "$tmp/two.md" 2> "$tmp/two.err" || fail "run 2 exited $?"
mapfile -t runs < <(ls -d "$build"/bench-scale-amazon670k/run-*)
[ "${#runs[@]}" = 2 ] || fail "expected 2 run folders, found ${#runs[@]}: ${runs[*]}"
for r in "${runs[@]}"; do
  for f in metrics.json job.log peak_rss_kb.txt; do [ -f "$r/$f" ] || fail "no $f in $r"; done
  grep -q "this run's files are in $r" "$tmp/one.err" "$tmp/two.err" || fail "no run names $r"
done
samples=$(cat "${runs[@]/%//metrics.json}" | grep -o '"total_samples": [0-9]*' | sort | tr '\n' ' ')
[ "$samples" = '"total_samples": 1000 "total_samples": 2000 ' ] || fail "the runs' metrics: $samples"
grep -q '| 2 | 2 |  | 1000 | 2.0 | 500 | 0.5000 |' "$tmp/one.md" || { cat "$tmp/one.md"; fail "run 1's table"; }
grep -q '| 2 | 2 |  | 2000 | 2.0 | 500 | 0.5000 |' "$tmp/two.md" || { cat "$tmp/two.md"; fail "run 2's table"; }
echo "PASS: two runs, two folders: ${runs[*]##*/}"
