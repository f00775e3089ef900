#!/usr/bin/env bash
# Paths that name a FIFO or a character device never block a process and
# never make it read without end (core/regular_file.h, core/file_util.h):
# each command below exits within 10 s with its documented code and message.
#   - --config of tether-launch: /dev/zero, /dev/urandom (opened read-only,
#     never read), a FIFO with no writer: exit 2;
#   - --flagfile of tether-worker: /dev/zero, a FIFO: exit 1 (flags);
#   - tether-predict --input and --split: /dev/zero, a FIFO: exit 1;
#   - a model file (tether-predict and tether-export --model): /dev/zero, a
#     FIFO: exit 2; a checkpoint whose MANIFEST or shard file is /dev/zero
#     or a FIFO (tether-export --checkpoint): exit 1;
#   - tether-data check FILE: /dev/zero, a FIFO: exit 1;
#   - a file: rendezvous entry that is a FIFO: tether-worker exits 1 naming
#     it, not waiting out --startup_timeout_ms;
#   - tether-worker --metrics_out naming a FIFO with no reader: exit 1
#     naming it; the same FIFO with a reader gets the metrics JSON.
# Usage: special_inputs_test.sh BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init special_inputs "$@"

# refused RC TEXT COMMAND...: COMMAND (bounded: 30 s) exits RC within 10 s
# and its output holds TEXT.
n=0
refused() {
  local want=$1 text=$2; shift 2
  n=$((n + 1))
  local log="$tmp/refused$n.log" rc=0 start
  start=$(now_ms)
  timeout -k 5 30 "$@" >"$log" 2>&1 || rc=$?
  local took=$(($(now_ms) - start))
  [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want (said: $(grep -v '^I' "$log" | tail -n 3))"
  [ "$took" -lt 10000 ] || fail "$* took $took ms"
  grep -qF -- "$text" "$log" || fail "$* did not say: $text (said: $(grep -v '^I' "$log" | tail -n 3))"
  echo "exit $rc in $took ms: $text"
}

mkfifo "$tmp/fifo"
fifo=$tmp/fifo

for dev in /dev/zero /dev/urandom "$fifo"; do
  kind="a character device"; [ "$dev" = "$fifo" ] && kind="a FIFO (named pipe)"
  refused 2 "config file $dev: is $kind, not a regular file" "$bin/tether-launch" --config "$dev"
done

for dev in /dev/zero "$fifo"; do
  kind="a character device"; [ "$dev" = "$fifo" ] && kind="a FIFO (named pipe)"
  refused 1 "error: flag --flagfile: flagfile $dev: is $kind, not a regular file" \
    "$bin/tether-worker" --flagfile="$dev"
  refused 1 "tether-data: $dev: is $kind, not a regular file" \
    "$bin/tether-data" check --format=libsvm --index_base=1 "$dev"
done

# A model for tether-predict and a checkpoint: one epoch of Bibtex in one process.
timeout -k 5 120 "$bin/tether-worker" --config=examples/bibtex.pbtxt --in_process --epochs=1 \
  --model_out="$tmp/m.safetensors" --checkpoint_dir="$tmp/ck" >"$tmp/train.log" 2>&1 \
  || fail "training the Bibtex model failed"
ckpt=$(ls -d "$tmp"/ck/ckpt-*-final)
[ -f "$ckpt/MANIFEST" ] && [ -f "$ckpt/shard-0.tables" ] || fail "no final checkpoint in $tmp/ck"
for dev in /dev/zero "$fifo"; do
  kind="a character device"; [ "$dev" = "$fifo" ] && kind="a FIFO (named pipe)"
  refused 2 "--model=$dev: $dev: is $kind, not a regular file" \
    "$bin/tether-predict" --model="$dev" --input="$tmp/m.safetensors" --output="$tmp/p.tsv"
  refused 2 "--model=$dev: $dev: is $kind, not a regular file" \
    "$bin/tether-export" --model="$dev" --out="$tmp/e.npz"
  # A checkpoint's files are read through a descriptor checked first: a
  # FIFO or a device put in their place is named, never waited on or read.
  for name in MANIFEST shard-0.tables; do
    rm -rf "$tmp/bad"
    cp -r "$ckpt" "$tmp/bad"
    rm "$tmp/bad/$name"
    if [ "$dev" = "$fifo" ]; then mkfifo "$tmp/bad/$name"; else ln -s "$dev" "$tmp/bad/$name"; fi
    refused 1 "$tmp/bad/$name: is $kind, not a regular file" \
      "$bin/tether-export" --checkpoint="$tmp/bad" --out="$tmp/e.npz" --label_counts=false
  done
done
[ ! -e "$tmp/e.npz" ] || fail "a refused tether-export wrote its --out"
cp data/bibtex/Bibtex_data.txt.gz "$tmp/input.gz"
for dev in /dev/zero "$fifo"; do
  kind="a character device"; [ "$dev" = "$fifo" ] && kind="a FIFO (named pipe)"
  refused 1 "[predict] $dev: is $kind, not a regular file" \
    "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$dev" --output="$tmp/p.tsv"
  refused 1 "[predict] $dev: is $kind, not a regular file" \
    "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/input.gz" --split="$dev" --output="$tmp/p.tsv"
done
[ ! -e "$tmp/p.tsv" ] || fail "a refused tether-predict wrote its --output"

# A rendezvous entry that is a FIFO: refused at once, not waited on.
mkdir -p "$tmp/rdzv/run9/0"
mkfifo "$tmp/rdzv/run9/0/server-0"
refused 1 "rendezvous file:$tmp/rdzv: entry $tmp/rdzv/run9/0/server-0: is a FIFO (named pipe), not a regular file: not written by Tether" \
  "$bin/tether-worker" --config=examples/bibtex.pbtxt --job_id=run9 --rank=0 --rendezvous="file:$tmp/rdzv" \
  --startup_timeout_ms=10000

# --metrics_out naming a FIFO that no process reads: refused, not waited on.
refused 1 "$fifo: is a FIFO with no reader (opened with O_NONBLOCK, so as not to wait for one): start the reader first" \
  "$bin/tether-worker" --config=examples/bibtex.pbtxt --in_process --epochs=1 --metrics_out="$fifo"

# The same FIFO with a reader: the metrics JSON goes through it.
start_fifo_reader "$fifo" "$tmp/through.json"
timeout -k 5 60 "$bin/tether-worker" --config=examples/bibtex.pbtxt --in_process --epochs=1 \
  --metrics_out="$fifo" >"$tmp/through.log" 2>&1 || fail "the worker writing its metrics into a read FIFO failed"
wait_code "$reader"
[ "$rc" = 0 ] || fail "the FIFO's reader exited $rc"
pids=()
[ "$(metric "$tmp/through.json" epochs)" = 1 ] || fail "the metrics JSON read through the FIFO has no epochs: 1"
[ -p "$fifo" ] || fail "the FIFO given as --metrics_out was replaced"
echo "a FIFO with a reader as --metrics_out: the metrics JSON read through it, still a FIFO"
echo PASS
