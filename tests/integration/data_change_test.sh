#!/usr/bin/env bash
# Data files that change under a job, or between a checkpoint and its
# resume, are named and never trained on (worker/train/data_watch.h). Bibtex,
# its data file copied (uncompressed) into the test's folder first; every
# process bounded by `timeout` and reaped; logs polled with a bound.
#   appended        2 servers, 2 workers by hand, 1000 epochs: once epoch 1
#                   is logged, a row is appended to the data file; a worker
#                   fails at its next epoch's end naming the file and its new
#                   size (exit 6: bad input), the others end as on any worker failure,
#                   and no process exits 0.
#   launched        the same append under tether-launch with --max_restarts:
#                   the servers end on the failing worker's ABORT (exit 1)
#                   before it exits 6, yet the job exits 6 naming the
#                   worker (log and metrics JSON), never restarted.
#   resume_changed  tether-launch, 2 epochs, checkpoints every 30 clocks;
#                   then one digit of the file's last row changed in place,
#                   its size and modification time kept (the digest tells);
#                   the resume is refused before training, naming the file,
#                   what changed and the checkpoint: tether-launch exits 6
#                   (not restarted, whatever --max_restarts).
#   resume_copied   the same checkpointed job; the file copied to another
#                   folder (a new modification time) and the resume given
#                   that path: accepted as the same file, trains to the end,
#                   exit 0.
# Usage: data_change_test.sh appended|launched|resume_changed|resume_copied BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=150
fail_lines=12

data=$tmp/bibtex.txt
zcat data/bibtex/Bibtex_data.txt.gz > "$data"
bytes=$(stat -c %s "$data")

# checkpointed_job: a 2-epoch job on $data with periodic checkpoints in
# $ck, which must exit 0; sets $ckpt to its first periodic checkpoint.
ck=$tmp/ck
checkpointed_job() {
  local rc=0
  timeout -k 5 "$limit_s" "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --train_file="$data" \
    --test_file="$data" --epochs=2 --checkpoint_dir="$ck" --checkpoint_every_clocks=30 \
    --checkpoint_keep_last=50 > "$tmp/first.log" 2>&1 || rc=$?
  [ "$rc" = 0 ] || fail "the checkpointed job exited $rc"
  ckpt=$(find "$ck" -maxdepth 1 -name 'ckpt-*' ! -name '*-final*' | sort | head -1)
  [ -n "$ckpt" ] && [ -f "$ckpt/MANIFEST" ] || fail "no periodic checkpoint in $ck"
  grep -q "path: \"$data\"" "$ckpt/MANIFEST" || fail "$ckpt/MANIFEST records no stamp of $data"
  grep -q 'field: "data.train_file"' "$ckpt/MANIFEST" || fail "$ckpt/MANIFEST names no data.train_file"
}

case "$mode" in
  appended)
    flags=(--config=tests/data/bibtex_fixed.pbtxt --train_file="$data" --test_file="$data" --epochs=1000 --staleness=2)
    start_job grow 2 2 "${flags[@]}"
    wait_log "$tmp/grow-worker0.log" "epoch 1/1000" 1800
    printf '3 7:1\n' >> "$data"
    for p in "${worker_pids[@]}" "${server_pids[@]}"; do
      exits_within "$p" 60000 || fail "process $p still runs 60 s after the data file was appended to"
    done
    wait_codes "${worker_pids[@]}" "${server_pids[@]}"
    pids=()
    echo "exit codes (workers 0 1, servers 0 1): $codes"
    for c in $codes; do [ "$c" != 0 ] || fail "a process exited 0 after its data file changed: $codes"; done
    want="data file $data changed: size $bytes → $((bytes + 6)) bytes, modified "
    named=
    for r in 0 1; do
      if grep -qF -- "$want" "$tmp/grow-worker$r.log"; then
        named=$r
        code=$(echo "$codes" | cut -d' ' -f$((r + 1)))
        [ "$code" = 6 ] || fail "worker $r named the change but exited $code (want 6)"
        grep -qE "\(while the job ran: checked at the end of epoch [0-9]+\)" "$tmp/grow-worker$r.log" ||
          fail "worker $r did not say when it found the change"
      fi
    done
    [ -n "$named" ] || fail "no worker named the change ('$want')"
    echo "ok   worker $named named $data (appended to) and exited 6; no process exited 0"
    ;;
  launched)
    rc=0
    timeout -k 5 "$limit_s" "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --train_file="$data" \
      --test_file="$data" --epochs=1000 --checkpoint_dir="$ck" --checkpoint_every_clocks=50 --max_restarts=2 \
      --metrics_out="$tmp/m.json" > "$tmp/launch.log" 2>&1 &
    launcher=$!
    wait_log "$tmp/launch.log" "epoch 1/1000" 1800
    printf '3 7:1\n' >> "$data"
    wait "$launcher" || rc=$?
    [ "$rc" = 6 ] || fail "the job whose data file changed exited $rc (want 6)"
    grep -qE "\[launch\] worker [01] \(pid [0-9]+\) refused its input data \(exit 6" "$tmp/launch.log" ||
      fail "the launcher did not say a worker refused its input data (exit 6)"
    grep -qE "job failed after [0-9:]+ \(exit code 6\): worker [01] \(pid [0-9]+\) failed" "$tmp/launch.log" ||
      fail "the launcher's last line does not name the worker"
    if grep -q "restart 1 of 2" "$tmp/launch.log"; then fail "the job whose data file changed was restarted"; fi
    python3 - "$tmp/m.json" <<'PY' || fail "$tmp/m.json does not record the worker's exit 6"
import json, re, sys
j = json.load(open(sys.argv[1]))
assert j["exit_code"] == 6, j
assert re.fullmatch(r"worker [01] \(pid \d+\) exited with code 6", j["failure"]), j
PY
    echo "ok   the job exited 6 naming the worker, not restarted, the metrics JSON says so"
    ;;
  resume_changed)
    checkpointed_job
    # One digit of the last row ("... 1826:1") changed in place: the same
    # size and modification time, a row that still reads.
    touch -r "$data" "$tmp/mtime"
    [ "$(tail -c 2 "$data")" = "1" ] || fail "the last row of $data does not end in ':1'"
    printf '2' | dd of="$data" bs=1 seek=$((bytes - 2)) conv=notrunc status=none
    touch -r "$tmp/mtime" "$data"
    [ "$(stat -c %s "$data")" = "$bytes" ] || fail "the edit changed the size of $data"
    rc=0
    out=$(timeout -k 5 60 "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --train_file="$data" \
      --test_file="$data" --epochs=2 --checkpoint_dir="$ck" --resume_from="$ckpt" --max_restarts=2 2>&1) || rc=$?
    echo "$out" > "$tmp/resume.log"
    [ "$rc" = 6 ] || fail "the resume on a changed data file exited $rc (want 6)"
    grep -qF "cannot resume from $ckpt: data file $data changed: content digest " <<< "$out" ||
      fail "the refusal does not name the checkpoint $ckpt, the file $data and its digest"
    if grep -qE "epoch [0-9]+/2 clock" <<< "$out"; then fail "the resume trained on the changed file"; fi
    # train_file and test_file are the same file: named once per message.
    if grep -qE "data file .* changed: .*data file .* changed: " <<< "$out"; then
      fail "a message names $data twice"; fi
    grep -qF "[worker 0] cannot resume from $ckpt: data file $data changed: content digest " <<< "$out" ||
      fail "worker 0 did not refuse the resume itself"
    grep -qE "\[launch\] worker [01] \(pid [0-9]+\) refused its input data \(exit 6" <<< "$out" ||
      fail "the launcher did not say a worker refused its input data (exit 6)"
    if grep -q "restart 1 of 2" <<< "$out"; then fail "the resume on a changed data file was restarted"; fi
    echo "ok   resume refused (exit 6, not restarted) naming $ckpt and $data (the same size and time, another digest)"
    ;;
  resume_copied)
    checkpointed_job
    mkdir "$tmp/moved"
    cp "$data" "$tmp/moved/bibtex.txt"
    touch -d '2001-01-01' "$tmp/moved/bibtex.txt"  # a copy's own modification time
    rc=0
    timeout -k 5 "$limit_s" "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --train_file="$tmp/moved/bibtex.txt" \
      --test_file="$tmp/moved/bibtex.txt" --epochs=2 --checkpoint_dir="$ck" --resume_from="$ckpt" \
      > "$tmp/resume.log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || fail "the resume on a copy of the same file exited $rc (want 0)"
    grep -qF "data.train_file: $tmp/moved/bibtex.txt has the size and content digest of $data, which the checkpoint's job read: accepted as the same file" \
      "$tmp/resume.log" || fail "the resume did not say it took the copy as the same file"
    echo "ok   resume from $ckpt on a copy at another path accepted (exit 0)"
    ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
