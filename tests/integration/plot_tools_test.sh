#!/usr/bin/env bash
# The plot tools right after the quick start (scripts/setup.sh installs
# python3-matplotlib). Usage: plot_tools_test.sh BIN_DIR
#  - tools/plot_spread.py redraws the studies' figures from docs/sweeps/;
#  - tools/plot_metrics.py draws a PNG from a job's --metrics_dir, run as
#    `python3 tools/plot_metrics.py` (whatever python3 is first on PATH: one
#    without matplotlib hands over to Debian's /usr/bin/python3);
#  - without matplotlib anywhere (simulated: /usr/bin/python3 -S, no
#    dist-packages), each tool exits 1 with one line naming the Debian
#    package, no traceback, and the sweep says so before training anything.
# Skips (exit 77) when Debian's python3-matplotlib is not installed.
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: Debian's python3-matplotlib is not installed (scripts/setup.sh installs it)"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
tether_test_init plot "$1"

timeout -k 5 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --epochs=2 --eval_every_epochs=1 \
  --metrics_dir="$tmp/run" >/dev/null 2>"$tmp/launch.err" || { tail -5 "$tmp/launch.err"; exit 1; }
timeout 120 python3 tools/plot_metrics.py -o "$tmp/bibtex.png" "bibtex=$tmp/run"
grep -q "89 50 4e 47 0d 0a 1a 0a" <<< "$(head -c 8 "$tmp/bibtex.png" | od -An -tx1)" || { echo "FAIL: no PNG written"; exit 1; }
echo "plot_metrics.py wrote a PNG of $(stat -c %s "$tmp/bibtex.png") bytes"

# The studies' figures redraw from the files committed under docs/sweeps/.
for kind in sweep straggler; do
  if [ "$kind" = sweep ]; then in=docs/sweeps/bibtex/sweep.json; else in=docs/sweeps/straggler/runs.csv; fi
  timeout 120 python3 tools/plot_spread.py "$kind" "$in" -o "$tmp/$kind.png"
  grep -q "89 50 4e 47 0d 0a 1a 0a" <<< "$(head -c 8 "$tmp/$kind.png" | od -An -tx1)" ||
    { echo "FAIL: plot_spread.py $kind wrote no PNG"; exit 1; }
done

check_missing() {  # check_missing NAME COMMAND...
  local name=$1; shift
  rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  lines=$(wc -l <"$tmp/err")
  echo "$name without matplotlib: exit $rc, stderr: $(cat "$tmp/err")"
  [ "$rc" = 1 ] || { echo "FAIL: $name exited $rc"; exit 1; }
  [ "$lines" = 1 ] && grep -q "python3-matplotlib" "$tmp/err" && ! grep -q Traceback "$tmp/err" ||
    { echo "FAIL: $name did not say in one line which package is missing"; exit 1; }
}
check_missing plot_metrics.py timeout 60 /usr/bin/python3 -S tools/plot_metrics.py -o "$tmp/x.png" "$tmp/run"
check_missing plot_spread.py timeout 60 /usr/bin/python3 -S tools/plot_spread.py sweep \
  docs/sweeps/bibtex/sweep.json -o "$tmp/x.png"
check_missing staleness_sweep.py timeout 60 /usr/bin/python3 -S tools/staleness_sweep.py \
  --config tests/data/bibtex_fixed.pbtxt --bin "$bin" --out "$tmp/sweep"
[ ! -e "$tmp/sweep" ] || { echo "FAIL: the sweep started training without matplotlib"; exit 1; }
echo PASS
