#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan, TETHER_FUZZ=ON) in
# their own build directory and runs each for SECONDS (default 60), starting
# from its seed corpus in tests/fuzz/corpus/<target>/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 60
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs,
# default nproc). New inputs go to $FUZZ_BUILD_DIR/corpus/<target>/, crash
# inputs to $FUZZ_BUILD_DIR/artifacts/<target>/ (emptied at the start of each
# run). Exits non-zero if any target
# reports a finding (crash, sanitizer report, timeout, out of memory).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(message_fuzz xmc_reader_fuzz libsvm_reader_fuzz model_file_fuzz manifest_fuzz http_request_fuzz)
build=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 2; }

cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTETHER_FUZZ=ON -DTETHER_WITH_CUDA=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target "${targets[@]}"

status=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  rm -rf "$artifacts"  # findings of earlier runs are not this run's
  mkdir -p "$corpus" "$artifacts"
  log="$build/fuzz_$t.log"
  echo "== $t: ${seconds}s"
  rc=0
  "$build/bin/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  execs=$(grep -E '^stat::number_of_executed_units:' "$log" | awk '{print $2}' || true)
  findings=$(find "$artifacts" -type f | wc -l)
  summary+=("$t: rc=$rc executions=${execs:-?} findings=$findings ${done_line}")
  if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
    status=1
    echo "FINDING in $t (exit $rc); see $log and $artifacts/" >&2
    grep -E 'ERROR|SUMMARY|runtime error|deadly signal' "$log" | head -20 >&2 || true
  fi
done
echo "== fuzz summary (${seconds}s per target)"
printf '%s\n' "${summary[@]}"
exit $status
