#!/usr/bin/env bash
# Output paths never destroy what the job did not write (core/output_target.h):
#   launch   tether-launch with --metrics_out naming the job's own test file
#            (a copy, by its name and by a hard link) or config (by its name
#            and by a symbolic link): exit 2 naming both flags, both files
#            unchanged; an existing file that is no metrics JSON and a
#            directory: exit 2, kept; a link to an earlier metrics JSON: the
#            job writes the link's target and the link stays; a character
#            device (mknod here, skipped where not permitted): written
#            through, still a device.
#   predict  tether-predict --output to a FIFO made here (read by a bounded
#            reader: every prediction line arrives, the FIFO stays one), to a
#            link (its target written, the link kept), to a character
#            device, to /dev/stdout on a pipe (every line through it) and on a
#            redirected file (the file holds them); --output naming its own
#            --input: exit 2, input unchanged.
#   metrics_dir  train.metrics_dir holding a FIFO as worker-0.jsonl, and a
#            link to the job's config as worker-1.jsonl: tether-worker exits
#            2 naming the field and the path, before any connection; a FIFO
#            as server-0.jsonl: tether-server exits 2 before it listens.
#            The FIFOs stay FIFOs, the link a link, the config unchanged.
#   run_inputs  every file a run reads is refused as an output (exit 2,
#            naming the output flag and the input), and so are two outputs
#            that are one file, before anything is written: a file inside the
#            checkpoint of tether-export --checkpoint, tether-launch and
#            tether-worker --resume_from; the training data and split that
#            tether-export reads for label counts; tether-data convert --out
#            naming --in, by its name or by a link; tether-predict --output
#            and --metrics_out naming one file. tether-worker --metrics_out
#            naming a file that is no metrics JSON is refused as by
#            tether-launch. Every checkpoint, data and user file keeps its
#            md5sum.
# Usage: output_paths_test.sh launch|predict|metrics_dir|run_inputs BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"

# refused RC TEXT COMMAND...: COMMAND (bounded: 60 s) exits RC and its
# output holds TEXT.
n=0
refused() {
  local want=$1 text=$2; shift 2
  n=$((n + 1))
  local log="$tmp/refused$n.log" rc=0
  timeout -k 5 60 "$@" >"$log" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, expected $want"
  grep -qF -- "$text" "$log" || fail "$* did not say: $text (said: $(grep -v '^I' "$log" | tail -n 3))"
  echo "exit $rc: $text"
}
# unchanged FILE SUM: FILE is still a regular file with the md5sum SUM.
unchanged() {
  [ -f "$1" ] && [ ! -L "$1" ] || fail "$1 is gone or no longer a regular file"
  [ "$(md5sum < "$1")" = "$2" ] || fail "$1 was changed"
}
# device NAME: a character device like the null device, made in $tmp; false
# (with a visible SKIP line) where mknod is not permitted.
device() {
  mknod "$tmp/$1" c 1 3 2>"$tmp/mknod.err" && return 0
  echo "SKIP: mknod of a character device not permitted here ($(cat "$tmp/mknod.err")); the device case is left out"
  return 1
}

case "$mode" in
launch)
  cp data/a9a/a9a.t.gz "$tmp/test.gz"
  sed "s#\"../data/#\"$PWD/data/#" examples/a9a.pbtxt > "$tmp/job.pbtxt"
  ln "$tmp/test.gz" "$tmp/hard.gz"
  ln -s "$tmp/job.pbtxt" "$tmp/link.pbtxt"
  test_sum=$(md5sum < "$tmp/test.gz")
  job_sum=$(md5sum < "$tmp/job.pbtxt")
  launch=("$bin/tether-launch" --config="$tmp/job.pbtxt" --test_file="$tmp/test.gz" --epochs=1 --transport=inproc)
  refused 2 "flag --metrics_out=$tmp/test.gz is the same file as data.test_file=$tmp/test.gz" \
    "${launch[@]}" --metrics_out="$tmp/test.gz"
  refused 2 "flag --metrics_out=$tmp/hard.gz is the same file as data.test_file=$tmp/test.gz" \
    "${launch[@]}" --metrics_out="$tmp/hard.gz"
  refused 2 "flag --metrics_out=$tmp/job.pbtxt is the same file as flag --config=$tmp/job.pbtxt" \
    "${launch[@]}" --metrics_out="$tmp/job.pbtxt"
  refused 2 "flag --metrics_out=$tmp/link.pbtxt is the same file as flag --config=$tmp/job.pbtxt" \
    "${launch[@]}" --metrics_out="$tmp/link.pbtxt"
  unchanged "$tmp/test.gz" "$test_sum"
  unchanged "$tmp/job.pbtxt" "$job_sum"
  [ -L "$tmp/link.pbtxt" ] || fail "the link to the config was replaced"
  echo "the test file and the config are unchanged"

  echo "notes" > "$tmp/notes.txt"
  refused 2 "flag --metrics_out=$tmp/notes.txt: holds a file that is not a Tether metrics JSON" \
    "${launch[@]}" --metrics_out="$tmp/notes.txt"
  [ "$(cat "$tmp/notes.txt")" = notes ] || fail "$tmp/notes.txt was changed"
  mkdir "$tmp/folder"
  refused 2 "flag --metrics_out=$tmp/folder: is a directory; give a file name" \
    "${launch[@]}" --metrics_out="$tmp/folder"
  [ -d "$tmp/folder" ] || fail "the folder given as --metrics_out is gone"

  # A link to an earlier run's metrics: its target is written, the link stays.
  timeout -k 5 120 "${launch[@]}" --metrics_out="$tmp/old.json" >"$tmp/first.log" 2>&1 || fail "a9a job failed"
  ln -s old.json "$tmp/m.json"
  timeout -k 5 120 "${launch[@]}" --metrics_out="$tmp/m.json" >"$tmp/linked.log" 2>&1 || fail "a9a job through a link failed"
  [ -L "$tmp/m.json" ] || fail "the link given as --metrics_out was replaced"
  grep -q "removed the earlier run's metrics file $tmp/old.json" "$tmp/linked.log" ||
    fail "the earlier metrics behind the link were not named as removed"
  [ "$(metric "$tmp/m.json" test_rows)" = 16281 ] || fail "the link's target holds no new metrics"
  echo "a link as --metrics_out: its target rewritten, the link kept"

  if device null; then
    timeout -k 5 120 "${launch[@]}" --metrics_out="$tmp/null" >"$tmp/device.log" 2>&1 || fail "a9a job into a device failed"
    [ -c "$tmp/null" ] || fail "the character device given as --metrics_out was replaced"
    grep -q "metrics written through to $tmp/null" "$tmp/device.log" || fail "no line on the metrics written through"
    echo "a character device as --metrics_out: written through, still a device"
  fi
  ;;
predict)
  timeout -k 5 120 "$bin/tether-worker" --config=examples/a9a.pbtxt --in_process --num_workers=1 --epochs=1 \
    --model_out="$tmp/m.safetensors" >"$tmp/train.log" 2>&1 || fail "training the a9a model failed"
  cp data/a9a/a9a.t.gz "$tmp/test.gz"
  test_sum=$(md5sum < "$tmp/test.gz")
  predict=("$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/test.gz" --format=libsvm --index_base=1)
  refused 2 "flag --output=$tmp/test.gz is the same file as flag --input=$tmp/test.gz" \
    "${predict[@]}" --output="$tmp/test.gz"
  unchanged "$tmp/test.gz" "$test_sum"

  # A FIFO: a bounded reader takes every line; the FIFO stays one.
  mkfifo "$tmp/pipe"
  start_fifo_reader "$tmp/pipe" "$tmp/from_pipe.tsv"
  timeout -k 5 60 "${predict[@]}" --output="$tmp/pipe" >"$tmp/pipe.log" 2>&1 || fail "predicting into a FIFO failed"
  wait_code "$reader"
  [ "$rc" = 0 ] || fail "the FIFO's reader exited $rc"
  pids=()
  [ -p "$tmp/pipe" ] || fail "the FIFO given as --output was replaced"
  [ "$(wc -l < "$tmp/from_pipe.tsv")" = 16281 ] || fail "the FIFO's reader got $(wc -l < "$tmp/from_pipe.tsv") lines"
  echo "a FIFO as --output: 16281 lines read through it, still a FIFO"

  echo old > "$tmp/real.tsv"
  ln -s real.tsv "$tmp/p.tsv"
  timeout -k 5 60 "${predict[@]}" --output="$tmp/p.tsv" >"$tmp/link.log" 2>&1 || fail "predicting through a link failed"
  [ -L "$tmp/p.tsv" ] || fail "the link given as --output was replaced"
  cmp -s "$tmp/real.tsv" "$tmp/from_pipe.tsv" || fail "the link's target does not hold the predictions"
  echo "a link as --output: its target holds the predictions, the link kept"

  # /dev/stdout on a pipe is written through it; on a regular file (a
  # redirection), that file is written.
  # (The scores it prints follow the predictions on stdout.)
  timeout -k 5 60 "${predict[@]}" --output=/dev/stdout 2>"$tmp/stdout.log" | cat >"$tmp/piped.tsv" ||
    fail "predicting into /dev/stdout on a pipe failed: $(tail -n 3 "$tmp/stdout.log")"
  head -n 16281 "$tmp/piped.tsv" >"$tmp/piped_predictions.tsv"
  cmp -s "$tmp/piped_predictions.tsv" "$tmp/from_pipe.tsv" || fail "/dev/stdout on a pipe did not carry the predictions"
  timeout -k 5 60 "${predict[@]}" --output=/dev/stdout >"$tmp/redirected.tsv" 2>"$tmp/stdout.log" ||
    fail "predicting into /dev/stdout on a regular file failed: $(tail -n 3 "$tmp/stdout.log")"
  cmp -s "$tmp/redirected.tsv" "$tmp/from_pipe.tsv" || fail "/dev/stdout on a regular file does not hold the predictions"
  echo "/dev/stdout as --output: 16281 lines through a pipe, and into a redirected file"

  if device null; then
    timeout -k 5 60 "${predict[@]}" --output="$tmp/null" --metrics_out="$tmp/null" >"$tmp/device.log" 2>&1 ||
      fail "predicting into a device failed"
    [ -c "$tmp/null" ] || fail "the character device given as --output was replaced"
    echo "a character device as --output and --metrics_out: written through, still a device"
  fi
  ;;
metrics_dir)
  mkdir "$tmp/mdir"
  mkfifo "$tmp/mdir/worker-0.jsonl" "$tmp/mdir/server-0.jsonl"
  ln -s "$PWD/tests/data/bibtex_fixed.pbtxt" "$tmp/mdir/worker-1.jsonl"
  config_sum=$(md5sum < tests/data/bibtex_fixed.pbtxt)
  job=(--config=tests/data/bibtex_fixed.pbtxt --num_workers=2 --metrics_dir="$tmp/mdir")
  # No server listens there: a refusal must come before any connection.
  worker=("$bin/tether-worker" "${job[@]}" --server_addresses=tcp://127.0.0.1:9)
  refused 2 "train.metrics_dir (--metrics_dir)=$tmp/mdir/worker-0.jsonl: is a character device or FIFO, not a regular file" \
    "${worker[@]}" --rank=0
  refused 2 "train.metrics_dir (--metrics_dir)=$tmp/mdir/worker-1.jsonl is the same file as flag --config=tests/data/bibtex_fixed.pbtxt" \
    "${worker[@]}" --rank=1
  refused 2 "train.metrics_dir (--metrics_dir)=$tmp/mdir/server-0.jsonl: is a character device or FIFO, not a regular file" \
    "$bin/tether-server" "${job[@]}" --shard=0 --listen=tcp://127.0.0.1:0 --port_file="$tmp/s0.port"
  [ ! -e "$tmp/s0.port" ] || fail "the refused server listened"
  [ -p "$tmp/mdir/worker-0.jsonl" ] && [ -p "$tmp/mdir/server-0.jsonl" ] || fail "a FIFO in the metrics folder was replaced"
  [ -L "$tmp/mdir/worker-1.jsonl" ] || fail "the link in the metrics folder was replaced"
  unchanged tests/data/bibtex_fixed.pbtxt "$config_sum"
  [ "$(ls "$tmp/mdir" | wc -l)" = 3 ] || fail "the metrics folder holds more: $(ls "$tmp/mdir")"
  ;;
run_inputs)
  # A copy of the Bibtex data, so that a failure destroys nothing of the repository's.
  mkdir "$tmp/data"
  cp data/bibtex/Bibtex_data.txt.gz data/bibtex/bibtex_trSplit.txt data/bibtex/bibtex_tstSplit.txt "$tmp/data/"
  sed "s#\"../../data/bibtex/#\"$tmp/data/#" tests/data/bibtex_fixed.pbtxt > "$tmp/job.pbtxt"
  ck=$tmp/ck
  worker=("$bin/tether-worker" --config="$tmp/job.pbtxt" --in_process --num_workers=1 --epochs=1)
  timeout -k 5 120 "${worker[@]}" --checkpoint_dir="$ck" --checkpoint_every_clocks=20 \
    --model_out="$tmp/m.safetensors" >"$tmp/train.log" 2>&1 || fail "training the Bibtex model failed"
  final=$(ls -d "$ck"/ckpt-*-final | tail -n 1)
  [ -f "$final/MANIFEST" ] && [ -f "$final/shard-0.tables" ] || fail "no final checkpoint under $ck"
  sums() { (cd "$tmp" && find ck data -type f | sort | xargs md5sum); }
  sums >"$tmp/before.md5"
  under() { echo "flag --$1=$2 is the same file as $2, under flag --$3=$ck: writing it would destroy an input of this run"; }

  refused 2 "$(under out "$final/shard-0.tables" checkpoint)" \
    "$bin/tether-export" --checkpoint="$ck" --out="$final/shard-0.tables"
  for f in Bibtex_data.txt.gz:train_file bibtex_trSplit.txt:train_split; do
    refused 2 "flag --out=$tmp/data/${f%%:*} is the same file as data.${f#*:}=$tmp/data/${f%%:*}" \
      "$bin/tether-export" --checkpoint="$ck" --out="$tmp/data/${f%%:*}"
  done
  refused 2 "$(under model_out "$final/MANIFEST" resume_from)" \
    "$bin/tether-launch" --config="$tmp/job.pbtxt" --transport=inproc --resume_from="$ck" --checkpoint_dir="$ck" \
    --model_out="$final/MANIFEST"
  refused 2 "$(under metrics_out "$final/shard-0.tables" resume_from)" \
    "${worker[@]}" --resume_from="$ck" --checkpoint_dir="$ck" --epochs=18 --metrics_out="$final/shard-0.tables"
  sums | diff "$tmp/before.md5" - >"$tmp/sums.diff" || fail "a checkpoint or data file changed: $(cat "$tmp/sums.diff")"
  echo "the checkpoint and the training data are unchanged"

  printf '2 3 2\n0 0:1 1:2\n1 2:1\n' >"$tmp/conv.txt"
  ln -s conv.txt "$tmp/conv-link.txt"
  conv_sum=$(md5sum <"$tmp/conv.txt")
  convert=("$bin/tether-data" convert --in="$tmp/conv.txt" --to=libsvm --format=xmc --index_base=0)
  refused 2 "flag --out=$tmp/conv.txt is the same file as flag --in=$tmp/conv.txt" "${convert[@]}" --out="$tmp/conv.txt"
  refused 2 "flag --out=$tmp/conv-link.txt is the same file as flag --in=$tmp/conv.txt" \
    "${convert[@]}" --out="$tmp/conv-link.txt"
  unchanged "$tmp/conv.txt" "$conv_sum"
  [ -L "$tmp/conv-link.txt" ] || fail "the link to the input was replaced"
  timeout -k 5 60 "${convert[@]}" --out="$tmp/conv.libsvm" >"$tmp/convert.log" 2>&1 || fail "converting to a new file failed"
  [ "$(cat "$tmp/conv.libsvm")" = "$(printf '0 1:1 2:2\n1 3:1')" ] || fail "conv.libsvm holds $(cat "$tmp/conv.libsvm")"
  echo "tether-data convert: --out naming --in refused, a new file written"

  echo "earlier predictions" >"$tmp/same.out"
  same_sum=$(md5sum <"$tmp/same.out")
  refused 2 "flag --output=$tmp/same.out and flag --metrics_out=$tmp/same.out are the same file" \
    "$bin/tether-predict" --model="$tmp/m.safetensors" --input="$tmp/data/Bibtex_data.txt.gz" --format=xmc \
    --index_base=0 --output="$tmp/same.out" --metrics_out="$tmp/same.out"
  unchanged "$tmp/same.out" "$same_sum"

  echo "notes" >"$tmp/notes.txt"
  notes_sum=$(md5sum <"$tmp/notes.txt")
  refused 2 "flag --metrics_out=$tmp/notes.txt: holds a file that is not a Tether metrics JSON" \
    "${worker[@]}" --metrics_out="$tmp/notes.txt"
  unchanged "$tmp/notes.txt" "$notes_sum"
  ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
