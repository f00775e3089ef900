#!/usr/bin/env bash
# The command line a new user types: boolean override flags given alone,
# and every start-up mistake refused at once with the value and the fix,
# before a process trains or waits.
#   flags  tether-launch and tether-worker/-server by hand: --data_on_demand
#          alone means true and --nopipeline false (the config in force says
#          so); refused with exit 2 and their message: --server_addresses
#          without a scheme, an unresolvable host, one endpoint twice (and
#          a WARNING for --metrics_out on a worker of rank 1), --transport=ipc under a
#          TMPDIR too long for a socket path, a config with a UTF-8 BOM,
#          --workers=0, --sampled_labels above the label count, a negative
#          --progress_every_s, --idle_timeout_ms not above the heartbeat
#          interval; exit 1 for "--data_on_demand false", and for a server
#          no worker reaches within --idle_timeout_ms=1500 (after 1.5 s);
#          tether-launch --check_config: exit 0 starting nothing for a good
#          job, exit 2 naming the field for a bad value or a missing file,
#          and for what only the launch checked (--metrics_sd_dir without
#          --metrics_port), as the launcher and as a task of srun alike (a
#          metrics file's missing folder, too few tasks), making no output
#          folder it checks; flags the job would ignore, exit 2: --learning_rate
#          with FTRL, --psp_a with SPARSE_LR, --checkpoint_keep_last without a
#          folder, --max_replacements without replicas,
#          --liveness_timeout_ms and CURVE key flags in one process.
#   tools  tether-gen-xmc sizes ≤ 0 (exit 2), an XMC header with 0 features
#          (tether-data and a job), tether-data --format=XMC, a split file's
#          row past the data (named as SPLIT:LINE), and tether-data
#          check|stats|convert of a file with hashed 64-bit feature ids.
#   paths  output paths checked before training (exit 2): --model_out and
#          --checkpoint_dir under /proc, --metrics_out in a missing folder
#          (launcher and worker by hand), tether-export --out and
#          tether-predict --output and --metrics_out in a missing folder or
#          on a directory (before the model is read), and its --psp_a=nan,
#          --psp_b=-1, --device=gpu and a --model list with an empty entry;
#          --metrics_dir makes its parents,
#          and a second run into the same folder is refused, never appended;
#          by hand, each process moves an earlier run's file aside.
# Usage: command_line_test.sh flags|tools|paths BIN_DIR   (from the repository root)
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

bibtex=(--config=tests/data/bibtex_fixed.pbtxt)
case "$mode" in
flags)
  # Boolean overrides: the values in force name them (then the job is
  # stopped by --epochs=1 on two workers, one server: a short run).
  timeout -k 5 120 "$bin/tether-launch" "${bibtex[@]}" --servers=1 --epochs=1 --data_on_demand --nopipeline \
    --timeout_s=110 >"$tmp/bool.log" 2>&1 || fail "a job with --data_on_demand --nopipeline failed"
  grep -q "config in force (.*--data_on_demand=true --pipeline=false" "$tmp/bool.log" ||
    fail "--data_on_demand alone did not mean true, or --nopipeline false"
  echo "--data_on_demand --nopipeline: data_on_demand=true pipeline=false in force"
  refused 1 "unexpected argument 'false' (a boolean flag takes its value after '=', as --NAME=false" \
    "$bin/tether-launch" "${bibtex[@]}" --data_on_demand false
  refused 2 "flag --server_addresses: endpoint '127.0.0.1:5550': no transport scheme: write tcp://127.0.0.1:5550" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=0 --server_addresses=127.0.0.1:5550,127.0.0.1:5551
  refused 2 "endpoint 'tcp://no-such-host.invalid:5550': host 'no-such-host.invalid' does not resolve" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=0 --server_addresses=tcp://no-such-host.invalid:5550,tcp://127.0.0.1:5551
  refused 2 "flag --server_addresses: names tcp://127.0.0.1:5550 twice (entries 1 and 2 of 'tcp://127.0.0.1:5550,tcp://127.0.0.1:05550'): each server shard needs an endpoint of its own" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=0 --server_addresses=tcp://127.0.0.1:5550,tcp://127.0.0.1:05550
  # A worker of rank > 0 given --metrics_out is told that the evaluator
  # writes it (then refused for the repeated endpoint).
  refused 2 "[worker 1] flag --metrics_out=$tmp/m.json: worker 1 writes it only if it evaluates at the end; the evaluator is rank 0" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=1 --server_addresses=tcp://127.0.0.1:5550,tcp://127.0.0.1:5550 \
    --metrics_out="$tmp/m.json"
  # With data on demand rank 0 may leave and the job goes on: the flag is
  # right on every worker (tether-launch gives it to each): no warning.
  refused 2 "names tcp://127.0.0.1:5550 twice" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=1 --data_on_demand --server_addresses=tcp://127.0.0.1:5550,tcp://127.0.0.1:5550 \
    --metrics_out="$tmp/m.json"
  if grep -qF "writes it only if it evaluates" "$tmp/refused$n.log"; then
    fail "worker 1 of a data-on-demand job was warned of its --metrics_out"; fi
  refused 2 "flag --listen: endpoint 'tcp://127.0.0.1': expected tcp://HOST:PORT" \
    "$bin/tether-server" "${bibtex[@]}" --shard=0 --listen=tcp://127.0.0.1
  long="$tmp/$(printf 'd%.0s' $(seq 1 110))"
  mkdir -p "$long"
  TMPDIR=$long refused 2 "over the 107 a Unix socket address holds: use a shorter directory (for tether-launch --transport=ipc, set TMPDIR" \
    "$bin/tether-launch" "${bibtex[@]}" --transport=ipc
  printf '\xef\xbb\xbf' >"$tmp/bom.pbtxt"
  sed 's#"\.\./\.\./data/#"'"$PWD"'/data/#' tests/data/bibtex_fixed.pbtxt >>"$tmp/bom.pbtxt"
  refused 2 "bom.pbtxt:1: the file starts with a UTF-8 byte-order mark (bytes EF BB BF)" \
    "$bin/tether-launch" --config="$tmp/bom.pbtxt"
  refused 2 "--workers=0: a job needs at least one worker; give a count ≥ 1, or leave the flag out" \
    "$bin/tether-launch" "${bibtex[@]}" --workers=0
  refused 2 "config field model.sampled_labels: 500 is above data.num_labels (159)" \
    "$bin/tether-launch" "${bibtex[@]}" --sampled_labels=500
  refused 2 "config field train.progress_every_s: must be ≥ 0 seconds (0: no progress lines), got -1 (set by flag --progress_every_s=-1)" \
    "$bin/tether-launch" "${bibtex[@]}" --progress_every_s=-1
  # --idle_timeout_ms: a server no worker reaches exits 1 once that long
  # passed without a message (the default waits 300 s).
  t0=$(now_ms)
  refused 1 "no message for cluster.idle_timeout_ms=1500; workers gone?" \
    "$bin/tether-server" "${bibtex[@]}" --shard=0 --idle_timeout_ms=1500
  took=$(($(now_ms) - t0))
  ((took >= 1500 && took < 30000)) || fail "tether-server --idle_timeout_ms=1500 exited after $took ms"
  refused 2 "config field cluster.idle_timeout_ms: must exceed cluster.heartbeat_interval_ms (1000) (set by flag --idle_timeout_ms=1000)" \
    "$bin/tether-server" "${bibtex[@]}" --shard=0 --idle_timeout_ms=1000
  # --check_config: the launch's checks, then exit; no server or worker.
  timeout -k 5 60 "$bin/tether-launch" "${bibtex[@]}" --check_config --epochs=3 >"$tmp/check.log" 2>&1 ||
    fail "--check_config on a good job exited $?"
  grep -q "config in force (tests/data/bibtex_fixed.pbtxt, flags --epochs=3)" "$tmp/check.log" ||
    fail "--check_config did not log the config in force"
  grep -q "is a job that would start (2 server(s), 2 worker(s)); nothing started" "$tmp/check.log" ||
    fail "--check_config did not say the job would start"
  ! grep -q "\[server\|\[worker" "$tmp/check.log" || fail "--check_config started a process"
  echo "--check_config: exit 0, the config in force, nothing started"
  refused 2 "config field optimizer.learning_rate: must be a finite number > 0 (set by flag --learning_rate=-1)" \
    "$bin/tether-launch" "${bibtex[@]}" --check_config --learning_rate=-1
  sed 's#"\.\./\.\./data/bibtex/bibtex_trSplit.txt#"'"$tmp"'/none.txt#; s#"\.\./\.\./data/#"'"$PWD"'/data/#' \
    tests/data/bibtex_fixed.pbtxt >"$tmp/no_split.pbtxt"
  refused 2 "config field data.train_split: '$tmp/none.txt' does not exist" \
    "$bin/tether-launch" --config="$tmp/no_split.pbtxt" --check_config
  # --check_config refuses what the launch refuses, and flags the job would
  # ignore are refused with or without it.
  refused 2 "--metrics_sd_dir needs --metrics_port" \
    "$bin/tether-launch" "${bibtex[@]}" --metrics_sd_dir="$tmp/sd" --check_config
  [ ! -e "$tmp/sd" ] || fail "--check_config made the --metrics_sd_dir folder"
  # As a task of srun (engine mode) --check_config runs the same checks (it
  # returned before them), and its place in the job besides.
  slurm=(env SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_PROCID=1 SLURM_NTASKS=4)
  refused 2 "[launch] --metrics_sd_dir needs --metrics_port (0: a free port per process)" \
    "${slurm[@]}" "$bin/tether-launch" "${bibtex[@]}" --metrics_sd_dir="$tmp/sd" --check_config
  for task in "" "${slurm[*]}"; do
    # shellcheck disable=SC2086  # the task's variables, word by word
    refused 2 "[launch] flag --metrics_out=$tmp/none/m.json: its folder $tmp/none does not exist" \
      $task "$bin/tether-launch" "${bibtex[@]}" --metrics_out="$tmp/none/m.json" --check_config
  done
  refused 2 "[launch] SLURM task 1 of 2 (SLURM_PROCID): 2 task(s) and --num_servers=2 leave no worker" \
    env SLURM_STEP_ID=0 SLURM_JOB_ID=7 SLURM_PROCID=1 SLURM_NTASKS=2 "$bin/tether-launch" "${bibtex[@]}" --check_config
  # A check makes nothing: every output folder it found creatable is still
  # missing after it, the launcher's and a task's alike.
  outs=(--checkpoint_dir="$tmp/new/ck" --metrics_dir="$tmp/new/md" --metrics_port=0 --metrics_sd_dir="$tmp/new/sd")
  for task in "" "${slurm[*]}"; do
    # shellcheck disable=SC2086
    timeout -k 5 60 $task "$bin/tether-launch" "${bibtex[@]}" "${outs[@]}" --check_config >"$tmp/made.log" 2>&1 ||
      fail "--check_config ${task:+as a task }with new output folders exited $?: $(tail -n 1 "$tmp/made.log")"
    grep -q "is a job that would start" "$tmp/made.log" || fail "--check_config ${task:+as a task }did not pass"
    [ ! -e "$tmp/new" ] || fail "--check_config ${task:+as a task }made $(find "$tmp/new" | tr '\n' ' ')"
  done
  echo "--check_config (launcher and task): the same refusals, no output folder made"
  refused 2 "flag --learning_rate=50 is only read with an optimizer that steps by it" \
    "$bin/tether-launch" --config=examples/a9a_ftrl.pbtxt --transport=inproc --learning_rate=50 --check_config
  refused 2 "config field train.psp_a: weighs the PSP@k metrics of multi-label models (XMC_MLP) only, not SPARSE_LR" \
    "$bin/tether-launch" --config=examples/a9a.pbtxt --psp_a=0.6 --check_config
  refused 2 "config field checkpoint.keep_last: is set but checkpoint.dir is empty" \
    "$bin/tether-launch" "${bibtex[@]}" --checkpoint_keep_last=2 --check_config
  refused 2 "--max_replacements=3 bounds the replacement servers of shards with replicas" \
    "$bin/tether-launch" "${bibtex[@]}" --max_replacements=3 --check_config
  refused 2 "flag --liveness_timeout_ms=2000 is not read with --transport=inproc" \
    "$bin/tether-launch" "${bibtex[@]}" --transport=inproc --liveness_timeout_ms=2000 --check_config
  refused 2 "flag --authorized_keys=$tmp is not read by an in-process job: a one-process job's traffic never" \
    "$bin/tether-worker" "${bibtex[@]}" --in_process --authorized_keys="$tmp"
  ;;
tools)
  for flag in --num_features=0 --num_labels=-5 --train_rows=0 --test_rows=-1; do
    refused 2 "tether-gen-xmc: flag ${flag}: must be > 0" "$bin/tether-gen-xmc" --out_prefix="$tmp/g" "$flag"
  done
  [ ! -e "$tmp/g.train.txt" ] || fail "tether-gen-xmc wrote a file after refusing its sizes"
  printf '2 0 3\n0 1:1\n1 2:1\n' >"$tmp/zero.txt"
  refused 1 "zero.txt:1: the XMC header '2 0 3' declares 0 features, but the file has rows" \
    "$bin/tether-data" check --format=xmc --index_base=0 "$tmp/zero.txt"
  # A job whose config takes the widths from the header (num_features 0).
  grep -v "num_features\|num_labels\|_split\|train_file\|test_file" tests/data/bibtex_fixed.pbtxt >"$tmp/zero.pbtxt"
  refused 2 "zero.txt:1: the XMC header '2 0 3' declares 0 features" \
    "$bin/tether-launch" --config="$tmp/zero.pbtxt" --train_file="$tmp/zero.txt" --test_file="$tmp/zero.txt"
  timeout 60 "$bin/tether-data" check --format=XMC --index_base=0 data/bibtex/Bibtex_data.txt.gz >"$tmp/upper.log" 2>&1 ||
    fail "tether-data --format=XMC was refused: $(tail -n 2 "$tmp/upper.log")"
  grep -qx "rows: 7395" "$tmp/upper.log" || fail "tether-data --format=XMC did not read 7395 rows"
  echo "tether-data --format=XMC: rows: 7395"
  printf '1\n2\n9000\n' >"$tmp/split.txt"
  refused 1 "split.txt:3: row 9000 is past the end of data/bibtex/Bibtex_data.txt.gz, which has 7395 data rows" \
    "$bin/tether-data" check --format=xmc --index_base=0 --split="$tmp/split.txt" data/bibtex/Bibtex_data.txt.gz
  # The same split in a job: the worker names the split file's line, and
  # the job exits 6 (bad input, which no restart cures).
  sed -e 's#"\.\./\.\./data/#"'"$PWD"'/data/#' -e 's#[^"]*bibtex_trSplit.txt#'"$tmp"'/split.txt#' \
    tests/data/bibtex_fixed.pbtxt >"$tmp/split.pbtxt"
  refused 6 "split.txt:3: row 9000 is past the end of $PWD/data/bibtex/Bibtex_data.txt.gz, which has 7395 data rows" \
    "$bin/tether-launch" --config="$tmp/split.pbtxt" --epochs=1
  # Hashed 64-bit ids: 3 rows, ids above 2^63; read, counted and converted.
  printf '3 0 2\n0 18446744073709551615:1 9223372036854775808:0.5\n1 7:2\n0,1 18446744073709551615:3\n' >"$tmp/hashed.txt"
  for cmd in check stats; do
    timeout 60 "$bin/tether-data" "$cmd" --format=xmc --index_base=0 --hashed_features "$tmp/hashed.txt" \
      >"$tmp/hashed-$cmd.log" 2>&1 || fail "tether-data $cmd --hashed_features failed: $(tail -n 2 "$tmp/hashed-$cmd.log")"
    grep -q "^features: 3" "$tmp/hashed-$cmd.log" || fail "tether-data $cmd --hashed_features: not 3 distinct ids"
    grep -qx "nnz: 4" "$tmp/hashed-$cmd.log" || fail "tether-data $cmd --hashed_features: nnz is not 4"
  done
  timeout 60 "$bin/tether-data" convert --format=xmc --index_base=0 --hashed_features --in="$tmp/hashed.txt" \
    --out="$tmp/hashed.svm" --to=LIBSVM --out_index_base=0 >"$tmp/convert.log" 2>&1 ||
    fail "tether-data convert --hashed_features failed: $(tail -n 2 "$tmp/convert.log")"
  grep -qx "0 9223372036854775808:0.5 18446744073709551615:1" "$tmp/hashed.svm" ||
    fail "the converted file lost the 64-bit ids: $(head -n 1 "$tmp/hashed.svm")"
  echo "tether-data check|stats|convert --hashed_features: 3 distinct ids, nnz 4, ids written back"
  # Model files: the format follows the name; a contradiction is refused,
  # and an npz that holds no Tether model is refused naming what it lacks.
  refused 2 "--format=safetensors contradicts the file name '$tmp/x.npz'" \
    "$bin/tether-export" --checkpoint="$tmp" --out="$tmp/x.npz" --format=safetensors
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1], "w").writestr("w1.npy", b"")' "$tmp/m.npz"
  refused 1 "$tmp/m.npz: no member '__metadata__.npy': an npz without a Tether model's metadata (not a Tether model file)" \
    "$bin/tether-export" --model="$tmp/m.npz" --out="$tmp/y.safetensors"
  ! grep -q "tether-export --" "$tmp/refused$n.log" || fail "the refusal of $tmp/m.npz suggests a tether-export command"
  ;;
paths)
  # Every output path is checked before training: nothing trains, exit 2.
  refused 2 "flag --model_out=/proc/m.safetensors: /proc is on /proc (procfs), which holds no files of ours" \
    "$bin/tether-launch" "${bibtex[@]}" --transport=inproc --model_out=/proc/m.safetensors
  ! grep -q "epoch 1/" "$tmp/refused$n.log" || fail "a bad --model_out was found after training"
  refused 2 "checkpoint.dir (--checkpoint_dir)=/proc/ck: /proc is on /proc (procfs)" \
    "$bin/tether-launch" "${bibtex[@]}" --checkpoint_dir=/proc/ck --checkpoint_every_clocks=50
  refused 2 "flag --metrics_out=$tmp/none/m.json: its folder $tmp/none does not exist" \
    "$bin/tether-launch" "${bibtex[@]}" --metrics_out="$tmp/none/m.json"
  refused 2 "flag --metrics_out=$tmp/none/m.json: its folder $tmp/none does not exist" \
    "$bin/tether-worker" "${bibtex[@]}" --rank=0 --server_addresses=tcp://127.0.0.1:5550,tcp://127.0.0.1:5551 \
    --metrics_out="$tmp/none/m.json"
  # tether-export and tether-predict: their outputs before any model is read.
  refused 2 "flag --out=$tmp/none/m.safetensors: its folder $tmp/none does not exist" \
    "$bin/tether-export" --checkpoint="$tmp/no-checkpoint" --out="$tmp/none/m.safetensors"
  refused 2 "flag --out=$tmp: is a directory; give a file name" \
    "$bin/tether-export" --model="$tmp/no-model.safetensors" --out="$tmp"
  predict=("$bin/tether-predict" --model="$tmp/no-model.safetensors" --input=data/bibtex/Bibtex_data.txt.gz
    --format=xmc --index_base=0 --top_k=5)
  refused 2 "flag --output=$tmp/none/p.tsv: its folder $tmp/none does not exist" \
    "${predict[@]}" --output="$tmp/none/p.tsv"
  refused 2 "flag --metrics_out=$tmp/none/m.json: its folder $tmp/none does not exist" \
    "${predict[@]}" --output="$tmp/p.tsv" --metrics_out="$tmp/none/m.json"
  # tether-predict's other flags, before any model is read: the trainer's
  # rule for the propensity constants, the devices, no empty model entry.
  refused 2 "flag --psp_a: must be a finite number > 0, got nan" "${predict[@]}" --output="$tmp/p.tsv" --psp_a=nan
  refused 2 "flag --psp_b: must be a finite number > 0, got -1" "${predict[@]}" --output="$tmp/p.tsv" --psp_b=-1
  refused 2 "--device must be auto, cpu or cuda, got 'gpu'" "${predict[@]}" --output="$tmp/p.tsv" --device=gpu
  refused 2 "flag --model: entry 2 of '$tmp/no-model.safetensors,' is empty" \
    "${predict[@]}" --model="$tmp/no-model.safetensors," --output="$tmp/p.tsv"
  [ ! -e "$tmp/p.tsv" ] || fail "a refused prediction wrote $tmp/p.tsv"
  # --metrics_dir makes its parents; a second run into the same folder is
  # refused, never appended (the plot would join the two).
  timeout -k 5 120 "$bin/tether-launch" "${bibtex[@]}" --servers=1 --epochs=1 --metrics_dir="$tmp/out/bibtex" \
    --timeout_s=110 >"$tmp/first.log" 2>&1 || fail "a run with --metrics_dir=$tmp/out/bibtex failed"
  [ -s "$tmp/out/bibtex/worker-0.jsonl" ] || fail "no worker-0.jsonl under the new folder"
  lines=$(wc -l <"$tmp/out/bibtex/worker-0.jsonl")
  refused 2 "train.metrics_dir (--metrics_dir)=$tmp/out/bibtex: already holds a run (server-0.jsonl, worker-0.jsonl, worker-1.jsonl)" \
    "$bin/tether-launch" "${bibtex[@]}" --servers=1 --epochs=1 --metrics_dir="$tmp/out/bibtex"
  [ "$(wc -l <"$tmp/out/bibtex/worker-0.jsonl")" = "$lines" ] || fail "the refused run appended to the folder"
  # By hand: the same job twice into one folder. Each process moves its
  # earlier file aside (the first free NAME.N.jsonl) and says so; each file
  # then holds one run, its clocks counting from 1.
  for run in 1 2; do
    start_job hand$run 1 1 "${bibtex[@]}" --epochs=1 --metrics_dir="$tmp/hand"
    wait_job "the by-hand run $run into $tmp/hand"
  done
  for role in server worker; do
    grep -qF "metrics file $tmp/hand/$role-0.jsonl held an earlier run: moved to $tmp/hand/$role-0.1.jsonl" \
      "$tmp/hand2-${role}0.log" || fail "the second $role did not say it moved the earlier run's file aside"
  done
  python3 - "$tmp/hand" <<'PY' || fail "a by-hand metrics file holds more or less than one run"
import json, os, sys
for name in ("worker-0.1.jsonl", "worker-0.jsonl"):
    clocks = [r["clock"] for r in map(json.loads, open(os.path.join(sys.argv[1], name))) if r.get("kind") == "clock"]
    assert clocks and clocks[0] == 1 and clocks == sorted(clocks) and len(set(clocks)) == len(clocks), (name, clocks[:5])
    print(f"{name}: one run, clocks {clocks[0]}..{clocks[-1]}")
PY
  ;;
*) echo "usage: $0 flags|tools|paths BIN_DIR"; exit 2 ;;
esac
echo PASS
