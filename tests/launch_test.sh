#!/usr/bin/env bash
# Process hygiene of tether-launch with the real tether-server/tether-worker:
#   (a) a failing child (an empty train file) makes the launcher exit non-zero
#       quickly, naming the child, and leaves no child behind;
#   (b) SIGINT and SIGTERM to the launcher during a run: exit 130 / 143, every
#       child reaped by the launcher itself (not only by PDEATHSIG when it
#       exits), temp dir removed;
#   (c) SIGKILL to the launcher still kills every child within a few seconds
#       (PR_SET_PDEATHSIG).
# Children are identified by the pids and process group the launcher logs
# ("started worker 1 (pid P) in process group G"); a zombie waiting for init
# to reap it counts as gone.
#
# Usage: tests/launch_test.sh BIN_DIR   (BIN_DIR holds tether-launch/-server/-worker)
# Every command runs under `timeout`; the whole test stays within 55 s even
# when the launcher misbehaves (a passing run takes a few seconds).
set -u -o pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BIN_DIR" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd) || exit 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LAUNCH=$BIN/tether-launch
for b in tether-launch tether-server tether-worker; do
  [[ -x $BIN/$b ]] || { echo "FAIL: $BIN/$b not found or not executable" >&2; exit 1; }
done
[[ -r $ROOT/tests/data/bibtex_fixed.pbtxt ]] || { echo "FAIL: $ROOT/tests/data/bibtex_fixed.pbtxt missing" >&2; exit 1; }

TEST_DEADLINE=$((SECONDS + 55))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tether-launch-test.XXXXXX")
CONFIG=$WORK/job.pbtxt
# A config's relative data paths are taken against its own folder: the copy
# names the bundled files by absolute path.
sed "s#\"\.\./\.\./data/#\"$ROOT/data/#" "$ROOT/tests/data/bibtex_fixed.pbtxt" > "$CONFIG"
# --train_file below is relative to the current directory, the repository root.
cd "$ROOT" || exit 2

FAILED=0

fail() {
  echo "FAIL: $*" >&2
  FAILED=1
}

# Seconds left of the test's budget, capped at $1.
budget() {
  local left=$((TEST_DEADLINE - SECONDS))
  ((left < $1)) && echo "$left" || echo "$1"
}

# True when pid $1 exists and is not a zombie.
alive() {
  [[ -r /proc/$1/status ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# Child pids the launcher logged in $1.
child_pids() {
  sed -n 's/.*\[launch\] started \(server\|worker\) [0-9]* (pid \([0-9]*\)).*/\2/p' "$1"
}

# Process group the launcher logged in $1.
child_group() {
  sed -n 's/.*\[launch\] started .* in process group \([0-9]*\):.*/\1/p' "$1" | head -1
}

# The launcher's own temp dir, from its log.
launcher_tmp() {
  sed -n 's/.*port files in \([^ ]*\/tether-launch\.[A-Za-z0-9]*\).*/\1/p' "$1" | head -1
}

# Live (non-zombie) children of the run logged in $1: logged pids and members
# of the logged process group.
survivors() {
  local left="" p group
  group=$(child_group "$1")
  for p in $(child_pids "$1"); do alive "$p" && left+=" $p"; done
  if [[ -n $group ]]; then
    for p in $(pgrep -g "$group" 2>/dev/null); do
      alive "$p" && [[ " $left " != *" $p "* ]] && left+=" $p"
    done
  fi
  echo "$left"
}

# Waits up to $2 s until no child of the run logged in $1 is alive.
expect_all_gone() {
  local log=$1 deadline=$((SECONDS + $(budget "$2"))) left
  while true; do
    left=$(survivors "$log")
    [[ -z $left ]] && return 0
    if ((SECONDS >= deadline)); then
      fail "$(basename "$log"): still running after $2 s:$left"
      ps -o pid,ppid,pgid,stat,etime,args -p "$(echo $left | tr ' ' ',')" >&2 2>/dev/null
      return 1
    fi
    sleep 0.1
  done
}

# Waits up to $3 s until $1 logs $2 started workers, each past start-up
# (data loaded, connected to the servers: training under way), and they are
# all alive.
wait_for_workers() {
  local log=$1 want=$2 deadline=$((SECONDS + $(budget "$3"))) n p
  while ((SECONDS < deadline)); do
    n=$(grep -c '\] connected to [0-9]* server' "$log")
    if ((n >= want)); then
      for p in $(child_pids "$log"); do
        alive "$p" || { fail "$(basename "$log"): child $p died before the signal was sent"; return 1; }
      done
      return 0
    fi
    grep -qE 'job (finished|failed)' "$log" && { fail "$(basename "$log"): job ended before the signal was sent"; return 1; }
    sleep 0.1
  done
  fail "$(basename "$log"): $want workers did not start within $3 s"
  return 1
}

# Waits up to $2 s for background pid $1 to end; sets RC. On expiry kills it
# (and the launcher under it) and fails.
wait_bounded() {
  local pid=$1 deadline=$((SECONDS + $(budget "$2")))
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "launcher still running $2 s after the signal"
    pkill -KILL -P "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  fi
  { wait "$pid"; RC=$?; } 2>/dev/null  # keep bash's "Killed" job notice out of the output
}

cleanup() {
  local log p d
  for log in "$WORK"/*.log; do
    [[ -e $log ]] || continue
    for p in $(survivors "$log"); do kill -KILL "$p" 2>/dev/null; done
    d=$(launcher_tmp "$log")
    [[ -n $d && -d $d ]] && rm -rf "$d"
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# A long run: enough epochs that training is still going when we signal.
LONG_RUN=(--config="$CONFIG" --servers=2 --workers=2 --epochs=100000 --timeout_s=30)

# ------------------------------------------------ (a) a failing child
# (A missing file is now refused by the launcher itself before any child
# starts: robustness_test.sh startup_refusals. An empty one fails in the
# workers, after the servers started.)
echo "== (a) workers fail on an empty train file"
log=$WORK/a.log
start=$SECONDS
timeout "$(budget 15)" "$LAUNCH" --config="$CONFIG" --servers=2 --workers=2 \
  --train_file=tests/data/cases/C11_empty_file.txt --timeout_s=14 >"$log" 2>&1
rc=$?
took=$((SECONDS - start))
if ((rc == 0)); then
  fail "(a) launcher exited 0 although the workers cannot read their data"
elif ((rc == 124)); then
  fail "(a) launcher did not exit within 15 s"
fi
((took <= 8)) || fail "(a) launcher took ${took} s to notice the failure and clean up"
grep -qE '\[launch\] (worker|server) [0-9]+ \(pid [0-9]+\) (exited with code [1-9]|was killed)' "$log" ||
  fail "(a) log does not name the failed child"
grep -q 'giving up on it' "$log" && fail "(a) launcher could not reap every child"
expect_all_gone "$log" 3
d=$(launcher_tmp "$log")
[[ -n $d && -e $d ]] && fail "(a) temp dir $d left behind"
echo "   exit $rc after ${took} s"

# ------------------------------------------------ (b) SIGINT / SIGTERM
for sig in INT TERM; do
  echo "== (b) SIG$sig to the launcher during training"
  log=$WORK/b_$sig.log
  if (($(budget 99) < 10)); then
    fail "(b) SIG$sig: out of time"
    continue
  fi
  timeout "$(budget 35)" "$LAUNCH" "${LONG_RUN[@]}" >"$log" 2>&1 &
  tpid=$!
  if wait_for_workers "$log" 2 10; then
    lpid=$(pgrep -P "$tpid" -x tether-launch)
    [[ -n $lpid ]] || lpid=$tpid  # timeout forwards INT/TERM to its child
    start=$SECONDS
    kill -"$sig" "$lpid"
    wait_bounded "$tpid" 12
    took=$((SECONDS - start))
    want=$([[ $sig == INT ]] && echo 130 || echo 143)
    ((RC == want)) || fail "(b) SIG$sig: launcher exited $RC, want $want"
    # Teardown means the launcher reaped them: SIGTERM, at worst SIGKILL after 5 s.
    ((took <= 7)) || fail "(b) SIG$sig: teardown took ${took} s"
    grep -q 'interrupted by' "$log" || fail "(b) SIG$sig: log does not report the interruption"
    grep -q 'giving up on it' "$log" && fail "(b) SIG$sig: launcher could not reap every child"
    expect_all_gone "$log" 1
    d=$(launcher_tmp "$log")
    [[ -n $d && -e $d ]] && fail "(b) SIG$sig: temp dir $d left behind"
    echo "   exit $RC after ${took} s"
  else
    pkill -KILL -P "$tpid" 2>/dev/null
    { wait "$tpid"; } 2>/dev/null
  fi
done

# ------------------------------------------------ (c) SIGKILL
echo "== (c) SIGKILL to the launcher during training"
log=$WORK/c.log
if (($(budget 99) < 8)); then
  fail "(c) out of time"
else
  timeout "$(budget 35)" "$LAUNCH" "${LONG_RUN[@]}" >"$log" 2>&1 &
  tpid=$!
  if wait_for_workers "$log" 2 10; then
    lpid=$(pgrep -P "$tpid" -x tether-launch)
    if [[ -z $lpid ]]; then
      fail "(c) cannot find the launcher under timeout (pid $tpid)"
    else
      kill -KILL "$lpid"
      wait_bounded "$tpid" 3
      expect_all_gone "$log" 5 && echo "   children gone after SIGKILL"
    fi
  else
    pkill -KILL -P "$tpid" 2>/dev/null
    { wait "$tpid"; } 2>/dev/null
  fi
fi

if ((FAILED)); then
  for log in "$WORK"/*.log; do
    echo "---- $log (last 30 lines)" >&2
    tail -n 30 "$log" >&2
  done
  echo "launch_test: FAILED" >&2
  exit 1
fi
echo "launch_test: PASSED"
