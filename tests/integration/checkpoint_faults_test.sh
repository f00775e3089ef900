#!/usr/bin/env bash
# Checkpoint faults a user's trial found, with processes started by hand
# (tcp on 127.0.0.1); Bibtex, 2 servers unless said.
#   killed   2 workers, SSP 2, 5 epochs, a checkpoint every 20 clocks,
#            cluster.worker_timeout_ms 3 s: worker 1 is SIGKILLed in epoch
#            3. Worker 0 trains to the end and exits 1 naming worker 1; the
#            end checkpoint keeps worker 1's place (LEFT, from its last
#            checkpoint). The resume starts worker 0 finished and worker 1
#            trailing: the periodic checkpoints past worker 0's end are cut
#            by worker 1 alone, which writes their manifests. Every process
#            of the resume exits 0, a final checkpoint with every worker
#            FINISHED is complete, the two runs train exactly 5 x 4880
#            rows, and worker 0, which trains nothing, reports the
#            final_loss of its first run (from the checkpoint).
#   live_folder  a second job that would write to or resume from the
#            checkpoint folder of a live job is refused at once, naming the
#            folder and the live job's worker 0; a lock whose holder was
#            SIGKILLed blocks nothing (see the mode's comment below).
#   changed_config  a resume with another table shape (--hidden=128 where
#            the checkpoint at clock 20 has 256) is refused once, naming
#            the checkpoint and the field, before any process starts:
#            tether-launch --max_restarts=2 exits 2 with one line and no
#            "job failed after" (it ran the refused resume again per restart,
#            each failing the same way), --check_config the same, and a
#            worker by hand exits 2 before it connects. A one-process job
#            (tether-worker --in_process) whose worker 0 fails (a new job
#            into that folder) reports the failure once, exit 1.
#   resume_epochs  a one-process job (tether-worker --in_process) trains 2
#            epochs to its final checkpoint. A resume with --epochs=1 (the
#            checkpoint has begun epoch 2) or --epochs=3 (its finished
#            worker keeps no place to train on from) is refused naming both
#            numbers, exit 2, before any process starts: tether-launch
#            --max_restarts=2, a worker by hand (before it reads its data)
#            and a one-process job alike. With --epochs=2 the resume
#            reports epochs 2 beside the 2 x 4880 rows trained.
# Usage: checkpoint_faults_test.sh killed BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
fail_lines=12
limit_s=60

# first_run_to_clock_20: a 2-server, 2-worker, 1-epoch job with a checkpoint
# every 20 clocks, run to its end (every process exits 0); sets $c to the
# complete checkpoint at clock 20 and $f to its server-1 shard file.
first_run_to_clock_20() {
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --epochs=1 --seed=5
         --checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=20 --checkpoint_keep_last=100)
  start_servers 2
  start_worker 0 "$tmp/w0.log"; w0=$started
  start_worker 1 "$tmp/w1.log"; w1=$started
  wait_codes "$w0" "$w1" "${server_pids[@]}"
  [ "$codes" = "0 0 0 0" ] || fail "the first run exited $codes"
  c=$tmp/ck/ckpt-000000000020
  f=$c/shard-1.tables
  [ -f "$c/MANIFEST" ] || fail "no complete checkpoint at clock 20"
}

case "$mode" in
  killed)
    flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --staleness=2 --epochs=5 --seed=3
           --checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=20 --worker_timeout_ms=3000)
    start_servers 2
    start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/first.json"; w0=$started
    start_worker 1 "$tmp/w1.log" --progress_file="$tmp/w1.progress"; w1=$started
    in_epoch() { [ -s "$tmp/w1.progress" ] && [ "$(cut -d' ' -f1 "$tmp/w1.progress")" -ge "$1" ]; }
    poll 1200 in_epoch 3 || fail "worker 1 never reached epoch 3"
    kill -9 "$(worker_pid "$w1")"
    wait_codes "$w0" "$w1" "${server_pids[@]}"
    echo "first run, worker 1 SIGKILLed at epoch/clock $(cat "$tmp/w1.progress"): exit codes (w0 w1 s0 s1) $codes"
    read -r c0 c1 _ _ <<< "$codes"
    [ "$c0" = 1 ] && [ "$c1" = 137 ] || fail "first run: worker 0 exited $c0 (expected 1), worker 1 $c1 (expected 137)"
    grep -q "the job did not finish: worker(s) 1 left before the end of training" "$tmp/w0.log" \
      || fail "worker 0 did not name worker 1"
    end=$(ls -d "$tmp"/ck/ckpt-* | tail -1)
    grep -q "kind: LEFT" "$end/MANIFEST" || fail "the end checkpoint $end has no LEFT entry"
    first=$(metric "$tmp/first.json" total_samples)

    pids=()
    rm -f "$tmp"/s*.port
    start_servers 2
    start_worker 0 "$tmp/r0.log" --metrics_out="$tmp/resumed.json" --resume_from="$tmp/ck"; w0=$started
    start_worker 1 "$tmp/r1.log" --resume_from="$tmp/ck"; w1=$started
    wait_codes "$w0" "$w1" "${server_pids[@]}"
    echo "resumed run: exit codes (w0 w1 s0 s1) $codes"
    [ "$codes" = "0 0 0 0" ] || fail "the resumed run exited $codes"
    grep -q "resuming from .*: nothing left to train" "$tmp/r0.log" || fail "worker 0 did not resume finished"
    # Worker 0 trained nothing: it reports the loss it finished the first
    # run with (its entry in the checkpoint), not 0.0.
    [ "$(metric "$tmp/resumed.json" final_loss_from)" = checkpoint ] || fail "resumed final_loss_from"
    [ "$(metric "$tmp/resumed.json" final_loss)" = "$(metric "$tmp/first.json" final_loss)" ] \
      || fail "resumed final_loss $(metric "$tmp/resumed.json" final_loss), first run's $(metric "$tmp/first.json" final_loss)"
    # Worker 1 cut and wrote at least one periodic checkpoint alone.
    alone=$(grep -c "checkpoint at clock [0-9]* written: " "$tmp/r1.log" || true)
    [ "$alone" -ge 1 ] || fail "worker 1 wrote no checkpoint's manifest after worker 0 finished"
    grep -h "checkpoint at clock [0-9]* written: " "$tmp/r1.log" | sed 's/^.*\] //'
    final=$(ls -d "$tmp"/ck/ckpt-*-final | tail -1)
    [ -f "$final/MANIFEST" ] || fail "no complete final checkpoint"
    grep -q "^final: true" "$final/MANIFEST" || fail "$final/MANIFEST is not a final one"
    [ "$(grep -c "kind: FINISHED" "$final/MANIFEST")" = 2 ] || fail "$final/MANIFEST: not every worker FINISHED"
    total=$(metric "$tmp/resumed.json" total_samples)
    echo "first run trained $first rows in all, the resumed job $total; final checkpoint $(basename "$final")"
    [ "$total" = 24400 ] || fail "expected 5 x 4880 = 24400 rows over the job, got $total"
    echo "PASS"
    ;;
  bad_paths)
    # Each refused with exit 2 before any training (a worker before it
    # connects: no server runs; tether-launch before it starts a process);
    # a checkpoint's file given for its directory (tether-export, every
    # --resume_from) and a checkpoint given for a model file (tether-predict)
    # are refused naming what to give instead.
    echo x > "$tmp/afile"
    mkdir -p "$tmp/ro"
    chmod 555 "$tmp/ro"
    chmod 755 "$tmp"
    as_other=()  # root may write a mode-555 directory: the check runs as nobody
    [ "$(id -u)" = 0 ] && as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    job=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1)
    refused() {  # refused LOG EXPECTED COMMAND...: exit 2 with EXPECTED in LOG
      local log=$1 want=$2 rc=0
      shift 2
      timeout -k 5 30 "$@" > "$log" 2>&1 || rc=$?
      [ "$rc" = 2 ] || fail "$* exited $rc, expected 2"
      grep -qF -- "$want" "$log" || fail "$log lacks: $want"
      grep -h -- "$want" "$log" | head -1 | sed 's/^.*\] //'
    }
    w=("$bin/tether-worker" "${job[@]}" --rank=0 --server_addresses=tcp://127.0.0.1:9)
    refused "$tmp/file.log" "$tmp/afile: is a file, not a directory" "${w[@]}" --checkpoint_dir="$tmp/afile"
    refused "$tmp/under.log" "$tmp/afile/ck: $tmp/afile is a file, not a directory, so it cannot be created" \
      "${w[@]}" --checkpoint_dir="$tmp/afile/ck"
    # As nobody, a parent of $tmp may be closed too (ctest's TMPDIR): then the
    # refusal says it cannot check the path, also with "Permission denied".
    refused "$tmp/ro.log" "checkpoint.dir (--checkpoint_dir) $tmp/ro: " \
      "${as_other[@]}" "${w[@]}" --checkpoint_dir="$tmp/ro"
    grep -qE "$tmp/ro: (cannot write there|cannot check .*): Permission denied" "$tmp/ro.log" || fail "ro: no reason"
    refused "$tmp/ro2.log" "checkpoint.dir (--checkpoint_dir) $tmp/ro/ck: " \
      "${as_other[@]}" "${w[@]}" --checkpoint_dir="$tmp/ro/ck"
    grep -qE "$tmp/ro/ck: (cannot be created in $tmp/ro|cannot check .*): Permission denied" "$tmp/ro2.log" \
      || fail "ro/ck: no reason"
    refused "$tmp/resume.log" "--resume_from=$tmp/nonexist: $tmp/nonexist: no such checkpoint directory" \
      "${w[@]}" --checkpoint_dir="$tmp/ck" --resume_from="$tmp/nonexist"
    refused "$tmp/server.log" "--resume_from=$tmp/nonexist: $tmp/nonexist: no such checkpoint directory" \
      "$bin/tether-server" "${job[@]}" --shard=0 --listen=tcp://127.0.0.1:0 --resume_from="$tmp/nonexist"
    refused "$tmp/launch1.log" "$tmp/afile: is a file, not a directory" \
      "$bin/tether-launch" "${job[@]}" --checkpoint_dir="$tmp/afile"
    refused "$tmp/launch2.log" "--resume_from=$tmp/nonexist: $tmp/nonexist: no such checkpoint directory" \
      "$bin/tether-launch" "${job[@]}" --checkpoint_dir="$tmp/ck" --resume_from="$tmp/nonexist"
    # A file of a checkpoint where its directory goes, and a checkpoint where
    # a model file goes: refused by the path's kind alone (before a byte of
    # a table is read), so the checkpoint is the files' first bytes only.
    c=$tmp/old/ckpt-000000000010-final
    mkdir -p "$c"
    echo "# Tether checkpoint manifest (server/checkpoint.h); the last line checks the rest." > "$c/MANIFEST"
    printf 'TTHRCKPT' > "$c/shard-0.tables"
    give="is a file, not a checkpoint directory; give the checkpoint directory that holds it: $c"
    refused "$tmp/export1.log" "--checkpoint=$c/shard-0.tables: $c/shard-0.tables: $give" \
      "$bin/tether-export" --checkpoint="$c/shard-0.tables" --out="$tmp/m.safetensors"
    refused "$tmp/export2.log" "--checkpoint=$c/MANIFEST: $c/MANIFEST: $give" \
      "$bin/tether-export" --checkpoint="$c/MANIFEST" --out="$tmp/m.safetensors"
    refused "$tmp/resume2.log" "--resume_from=$c/shard-0.tables: $c/shard-0.tables: $give" \
      "${w[@]}" --resume_from="$c/shard-0.tables"
    refused "$tmp/server2.log" "--resume_from=$c/MANIFEST: $c/MANIFEST: $give" \
      "$bin/tether-server" "${job[@]}" --shard=0 --listen=tcp://127.0.0.1:0 --resume_from="$c/MANIFEST"
    refused "$tmp/launch3.log" "--resume_from=$c/MANIFEST: $c/MANIFEST: $give" \
      "$bin/tether-launch" "${job[@]}" --resume_from="$c/MANIFEST"
    export_it="write its model file with tether-export --checkpoint=$c --out=model.safetensors"
    predict=("$bin/tether-predict" --input="$tmp/afile" --format=xmc --index_base=0 --output="$tmp/p.tsv")
    refused "$tmp/predict1.log" "--model=$c: $c: is a directory, not a model file; it is a checkpoint; $export_it" \
      "${predict[@]}" --model="$c"
    refused "$tmp/predict2.log" "--model=$c/shard-0.tables: $c/shard-0.tables: is a checkpoint's shard file, not \
a model file; write the checkpoint's model file with tether-export --checkpoint=$c --out=model.safetensors" \
      "${predict[@]}" --model="$c/shard-0.tables"
    refused "$tmp/predict3.log" "--model=$tmp/old: $tmp/old: is a directory, not a model file; it holds \
checkpoints: write the latest one's model file with tether-export --checkpoint=$tmp/old --out=model.safetensors" \
      "${predict[@]}" --model="$tmp/old"
    [ ! -e "$tmp/m.safetensors" ] && [ ! -e "$tmp/p.tsv" ] || fail "a refused export or prediction wrote a file"
    ! grep -q "started server" "$tmp"/launch*.log || fail "tether-launch started a process before refusing"
    [ ! -e "$tmp/ck" ] && [ ! -e "$tmp/ro/ck" ] || fail "a refused run created a checkpoint directory"
    echo "PASS"
    ;;
  final_twice)
    # 1 server, 1 worker, BSP, 1 epoch, a checkpoint every 20 clocks, all
    # kept. (a) A resume from the finished job's final checkpoint (on 2
    # servers) trains nothing and leaves that checkpoint untouched. (b) A
    # resume from the checkpoint at clock 20 reaches clocks whose complete
    # checkpoints the first run wrote: the new ones go to "-r1" beside them,
    # and every old file stays byte for byte.
    flags=(--config=tests/data/bibtex_fixed.pbtxt --num_workers=1 --staleness=0 --epochs=1 --seed=4
           --checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=20 --checkpoint_keep_last=100)
    run_job() {  # run_job NAME NUM_SERVERS [WORKER FLAGS...]: exit codes in $codes
      local name=$1 ns=$2
      shift 2
      flags+=(--num_servers="$ns")
      start_servers "$ns"
      start_worker 0 "$tmp/$name.w0.log" --metrics_out="$tmp/$name.json" "$@"
      wait_codes "$started" "${server_pids[@]}"
      pids=()
      rm -f "$tmp"/s*.port
      unset 'flags[-1]'
    }
    run_job first 1
    [ "$codes" = "0 0" ] || fail "the first run exited $codes"
    final=$(ls -d "$tmp"/ck/ckpt-*-final)
    # LOCK names the job that holds the folder (docs/CHECKPOINTS.md): not part of a checkpoint.
    (cd "$tmp/ck" && find . -type f ! -name LOCK | sort | xargs sha256sum) > "$tmp/before.sum"
    run_job again 2 --resume_from="$tmp/ck"
    [ "$codes" = "0 0 0" ] || fail "the resume from the final checkpoint exited $codes"
    grep -q "trained nothing since: it stays the final checkpoint" "$tmp/again.w0.log" \
      || fail "the worker did not keep the final checkpoint"
    (cd "$tmp/ck" && find . -type f ! -name LOCK | sort | xargs sha256sum) > "$tmp/after.sum"
    diff "$tmp/before.sum" "$tmp/after.sum" || fail "a resume that trained nothing changed the checkpoints"
    echo "(a) resumed from $(basename "$final"): nothing trained, $(wc -l < "$tmp/after.sum") files unchanged"
    # It reports the loss of the model as resumed, the one the first run
    # ended with (the final checkpoint records it), not a made-up 0.0.
    loss1=$(metric "$tmp/first.json" final_loss)
    loss2=$(metric "$tmp/again.json" final_loss)
    echo "final_loss: first run $loss1 ($(metric "$tmp/first.json" final_loss_from)), resume $loss2" \
         "($(metric "$tmp/again.json" final_loss_from))"
    [ "$(metric "$tmp/first.json" final_loss_from)" = training ] || fail "the first run's final_loss is not its own"
    [ "$(metric "$tmp/again.json" final_loss_from)" = checkpoint ] || fail "the resume's final_loss_from"
    [ "$loss2" = "$loss1" ] || fail "the resume that trained nothing reports final_loss $loss2, not $loss1"
    run_job older 1 --resume_from="$tmp/ck/ckpt-000000000020"
    [ "$codes" = "0 0" ] || fail "the resume from clock 20 exited $codes"
    (cd "$tmp/ck" && sha256sum -c --quiet "$tmp/before.sum") || fail "a complete checkpoint was written over"
    [ -f "$final-r1/MANIFEST" ] || fail "no complete $(basename "$final")-r1"
    [ -f "$tmp/ck/ckpt-000000000040-r1/MANIFEST" ] || fail "no complete ckpt-000000000040-r1"
    grep -q "already holds a complete checkpoint .*: the final checkpoint goes to $final-r1" "$tmp/older.w0.log" \
      || fail "the worker did not say why the final checkpoint went to -r1"
    [ "$(metric "$tmp/older.json" total_samples)" = "$(metric "$tmp/first.json" total_samples)" ] \
      || fail "the resume from clock 20 trained another number of rows"
    echo "(b) resumed from clock 20: $(cd "$tmp/ck" && ls -d *-r1 | tr '\n' ' ')written beside the old ones"
    echo "PASS"
    ;;
  relative)
    # A relative --checkpoint_dir, servers and workers in different working
    # directories (as on hosts without a shared file system): the workers
    # resolve it against their own and send it absolute, so every file of
    # every checkpoint lands in the workers' ck/, none in the servers'.
    mkdir -p "$tmp/srv" "$tmp/wrk"
    flags=(--config="$PWD/tests/data/bibtex_fixed.pbtxt" --num_servers=2 --num_workers=2 --epochs=1
           --checkpoint_dir=ck --checkpoint_every_clocks=10)
    cd "$tmp/srv"
    start_servers 2
    cd "$tmp/wrk"
    start_worker 0 "$tmp/w0.log"; w0=$started
    start_worker 1 "$tmp/w1.log"; w1=$started
    wait_codes "$w0" "$w1" "${server_pids[@]}"
    pids=()
    cd /
    [ "$codes" = "0 0 0 0" ] || fail "the job exited $codes"
    grep -q "checkpoint.dir ck is relative: $tmp/wrk/ck" "$tmp/w0.log" || fail "worker 0 did not resolve ck"
    [ ! -e "$tmp/srv/ck" ] || fail "a server wrote under its own working directory: $(find "$tmp/srv/ck" | head -3)"
    final=$(ls -d "$tmp"/wrk/ck/ckpt-*-final)
    for f in MANIFEST shard-0.tables shard-1.tables; do [ -f "$final/$f" ] || fail "$final lacks $f"; done
    echo "every checkpoint in the workers' directory: $(ls "$tmp/wrk/ck" | tr '\n' ' ')"
    echo "PASS"
    ;;
  bad_shard)
    # 2 servers, 2 workers, 1 epoch, a checkpoint every 20 clocks. The
    # resume from the one at clock 20 finds server 1's shard file (a) with
    # a flipped byte, (b) truncated by 100 bytes. Server 1 refuses every
    # worker naming itself and the file; the workers ABORT server 0 with
    # that reason, so it names server 1 and the file too, never a worker
    # gone silent. Every process exits 1, within seconds.
    first_run_to_clock_20
    cp "$f" "$tmp/shard-1.good"
    full=$(stat -c %s "$f")
    resume_bad() {  # resume_bad NAME WHAT: resumes from $c; WHAT is the file's fault as the logs name it
      local name=$1 what=$2 log
      pids=()
      rm -f "$tmp"/s*.port
      start_servers 2
      local s1=$(cat "$tmp/s1.port")
      start_worker 0 "$tmp/$name.w0.log" --resume_from="$c"; w0=$started
      start_worker 1 "$tmp/$name.w1.log" --resume_from="$c"; w1=$started
      wait_codes "$w0" "$w1" "${server_pids[@]}"
      for s in 0 1; do cp "$tmp/server$s.log" "$tmp/$name.server$s.log"; done
      echo "($name) exit codes (w0 w1 s0 s1) $codes"
      [ "$codes" = "1 1 1 1" ] || fail "($name) the resume exited $codes, expected 1 1 1 1"
      local why="cannot resume: server 1 failed to load its part of $c: $f: $what"
      grep -qF -- "[server 1] $why" "$tmp/$name.server1.log" || fail "($name) server 1 does not say: $why"
      grep -qF -- "[server 1] told 2 of 2 worker(s) that this server could not load its checkpoint" \
        "$tmp/$name.server1.log" || fail "($name) server 1 did not tell both workers"
      for log in "$tmp/$name.w0.log" "$tmp/$name.w1.log"; do
        grep -qF -- "server $s1 (listed as shard 1) refused to pair: [server 1] $why" "$log" \
          || fail "($name) $(basename "$log") does not name server 1 and its file"
      done
      grep -qE -- "\[server 0\] job aborted: worker [01] could not join: " "$tmp/$name.server0.log" \
        || fail "($name) server 0 was not told why"
      grep -qF -- "could not join: server $s1 (listed as shard 1) refused to pair: [server 1] $why" \
        "$tmp/$name.server0.log" || fail "($name) server 0 does not name server 1 and its file"
      ! grep -q "silent for" "$tmp/$name.server0.log" || fail "($name) server 0 blamed a silent worker"
      grep -h "job aborted" "$tmp/$name.server0.log" | head -1 | sed 's/^.*\] //'
    }
    python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-9]^=0x10; open(p,"wb").write(b)' "$f"
    resume_bad flipped "checksum mismatch: XXH3-64 "
    cp "$tmp/shard-1.good" "$f"
    truncate -s $((full - 100)) "$f"
    resume_bad truncated "$((full - 100)) bytes on disk, but the manifest says $full (a truncated or replaced file)"
    echo "PASS"
    ;;
  bad_shard_alone)
    # 2 servers, 2 workers, 1 epoch, a checkpoint every 20 clocks; server 1's
    # shard file of the one at clock 20 gets a flipped byte. The resume
    # starts worker 0 only (worker 1 never comes), with
    # cluster.worker_timeout_ms 60 s: server 1 refuses worker 0 naming the
    # file, and exits 1 within 5 s of its failure, saying why and that it
    # does not wait for worker 1 (it used to wait worker_timeout_ms). Worker 0
    # exits 1 naming server 1 and the file; server 0, told by its ABORT,
    # exits 1 too.
    first_run_to_clock_20
    python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[-9]^=0x10; open(p,"wb").write(b)' "$f"
    pids=()
    rm -f "$tmp"/s*.port
    for s in 0 1; do mv "$tmp/server$s.log" "$tmp/first.server$s.log"; done
    flags+=(--worker_timeout_ms=60000)
    start_servers 2
    s1=$(cat "$tmp/s1.port")
    start_worker 0 "$tmp/r0.log" --resume_from="$c"; w0=$started
    why="cannot resume: server 1 failed to load its part of $c: $f: checksum mismatch: XXH3-64 "
    poll 600 grep -qF -- "[server 1] refusing worker 0: $why" "$tmp/server1.log" \
      || fail "server 1 did not refuse worker 0 within 30 s naming its file"
    failed_at=$(date +%s%3N)
    # Server 1 exits within 5 s of its failure, worker 1 or not.
    exited() { ! kill -0 "${server_pids[1]}" 2>/dev/null; }
    poll 100 exited || fail "server 1 still runs 5 s after it failed to load its checkpoint (worker 1 never came)"
    took=$(($(date +%s%3N) - failed_at))
    wait_codes "$w0" "${server_pids[@]}"
    echo "resume with worker 0 alone: exit codes (w0 s0 s1) $codes; server 1 exited ${took} ms after its failure"
    [ "$codes" = "1 1 1" ] || fail "the resume exited $codes, expected 1 1 1"
    grep -qF -- "[server 1] told 1 of 2 worker(s) that this server could not load its checkpoint; not waiting for \
the others (3000 ms since it failed)" "$tmp/server1.log" || fail "server 1 did not say it stops waiting"
    grep -qE -- "\[server 1\] cannot resume: server 1 failed to load its part of .*: checksum mismatch" \
      "$tmp/server1.log" || fail "server 1's last word is not why it failed"
    grep -qF -- "$why" <<< "$(tail -n 1 "$tmp/server1.log")" || fail "server 1's exit line does not say why"
    grep -qF -- "server $s1 (listed as shard 1) refused to pair: [server 1] $why" "$tmp/r0.log" \
      || fail "worker 0 does not name server 1 and its file"
    grep -qF -- "[server 0] job aborted: worker 0 could not join: server $s1 (listed as shard 1) refused to pair: \
[server 1] $why" "$tmp/server0.log" || fail "server 0 does not name server 1 and its file"
    tail -n 1 "$tmp/server1.log" | sed -E 's/^[IWE][0-9]+ [0-9:.]+ //'
    echo "PASS"
    ;;
  live_folder)
    # Job A (tether-launch, 1 server, 1 worker, a checkpoint every 20
    # clocks) holds its folder. While it runs, each of these is refused at
    # once naming the folder and A's worker 0 (pid and host, from the LOCK
    # file): tether-launch resuming from it into it (exit 2), resuming from
    # it into another folder (exit 2), --check_config of either (exit 2), a
    # worker started by hand (--in_process) resuming from it (exit 1); none
    # writes a checkpoint. Worker 0 SIGKILLed, its lock is gone with it and
    # the same --check_config passes.
    job=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1 --staleness=0 --seed=5
         --checkpoint_every_clocks=20)
    timeout -k 5 100 "$bin/tether-launch" "${job[@]}" --epochs=50 --checkpoint_dir="$tmp/ck" > "$tmp/a.log" 2>&1 &
    a=$!
    pids+=("$a")
    complete() { compgen -G "$tmp/ck/ckpt-*/MANIFEST" > /dev/null; }
    wait_until 60 "complete checkpoint of job A" complete || exit 1
    [ -s "$tmp/ck/LOCK" ] || fail "job A holds no lock on $tmp/ck (no $tmp/ck/LOCK naming it)"
    holder=$(cat "$tmp/ck/LOCK")
    w0=${holder#pid }
    w0=${w0%% *}
    [ "$(ps -o args= -p "$w0" | grep -c tether-worker)" = 1 ] || fail "LOCK names pid $w0, not A's worker: $holder"
    in_use="checkpoint folder $tmp/ck is in use by a live job ($holder, holding $tmp/ck/LOCK)"
    refused_live() {  # refused_live LOG RC EXPECTED COMMAND...
      local log=$1 want_rc=$2 want=$3 rc=0
      shift 3
      timeout -k 5 30 "$@" > "$log" 2>&1 || rc=$?
      [ "$rc" = "$want_rc" ] || fail "$* exited $rc while job A held $tmp/ck, expected $want_rc"
      grep -qF -- "$want" "$log" || fail "$log lacks: $want"
      grep -h -- "in use by a live job" "$log" | head -1 | sed 's/^.*\] //'
    }
    # Job A's epochs: a resume asking for fewer than its checkpoint began
    # would be refused for them first.
    launch=("$bin/tether-launch" "${job[@]}" --epochs=50)
    refused_live "$tmp/b1.log" 2 "checkpoint.dir: $in_use" "${launch[@]}" --checkpoint_dir="$tmp/ck" \
      --resume_from="$tmp/ck"
    refused_live "$tmp/b2.log" 2 "--resume_from=$tmp/ck: $in_use" "${launch[@]}" --checkpoint_dir="$tmp/ck2" \
      --resume_from="$tmp/ck"
    refused_live "$tmp/b3.log" 2 "checkpoint.dir: $in_use" "${launch[@]}" --checkpoint_dir="$tmp/ck" \
      --resume_from="$tmp/ck" --check_config
    refused_live "$tmp/b4.log" 1 "[worker 0] --resume_from=$tmp/ck: $in_use" "$bin/tether-worker" "${job[@]}" \
      --epochs=50 --in_process --checkpoint_dir="$tmp/ck4" --resume_from="$tmp/ck"
    kill -0 "$a" 2> /dev/null || fail "job A ended before the checks were done: they prove nothing"
    [ ! -e "$tmp/ck2" ] || ! compgen -G "$tmp/ck2/ckpt-*" > /dev/null || fail "a refused job wrote a checkpoint"
    ! compgen -G "$tmp/ck4/ckpt-*" > /dev/null || fail "a refused worker wrote a checkpoint"
    kill -9 "$w0"
    rc=0
    wait "$a" || rc=$?
    [ "$rc" = 1 ] || fail "job A exited $rc after its worker 0 was SIGKILLed, expected 1"
    [ "$(cat "$tmp/ck/LOCK")" = "$holder" ] || fail "the LOCK file changed"
    timeout -k 5 30 "${launch[@]}" --checkpoint_dir="$tmp/ck" --resume_from="$tmp/ck" --check_config \
      > "$tmp/c.log" 2>&1 || fail "--check_config after job A's worker 0 died: $(tail -1 "$tmp/c.log")"
    echo "job A's worker 0 SIGKILLed: its LOCK file ($holder) blocks nothing"
    echo "PASS"
    ;;
  changed_config)
    first_run_to_clock_20
    why="cannot resume from $c: table 'w1', field dim: the checkpoint has 256, the job has 128 (a table's shape and optimizer type cannot change on resume)"
    launch=("$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --servers=2 --workers=2 --epochs=2
            --hidden=128 --resume_from="$c" --checkpoint_dir="$tmp/ck2" --checkpoint_every_clocks=20)
    for extra in --max_restarts=2 --check_config; do
      rc=0
      timeout -k 5 60 "${launch[@]}" "$extra" > "$tmp/l.log" 2>&1 || rc=$?
      [ "$rc" = 2 ] || fail "tether-launch $extra resuming with --hidden=128 exited $rc, expected 2"
      [ "$(grep -c "^E.*\[launch\] $why\$" "$tmp/l.log" || true)" = 1 ] ||
        fail "tether-launch $extra did not refuse the resume once: $(grep '^E' "$tmp/l.log")"
      [ "$(grep -c "job failed after\|\[launch\] started\|\[launch\] restart" "$tmp/l.log" || true)" = 0 ] ||
        fail "tether-launch $extra started the job: $(grep "failed after\|started\|restart" "$tmp/l.log")"
      echo "tether-launch $extra: exit 2, once: ${why:0:80}..."
    done
    [ ! -e "$tmp/ck2" ] || fail "the refused launch made $tmp/ck2"
    rc=0
    timeout -k 5 60 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --rank=0 --num_servers=2 \
      --num_workers=2 --hidden=128 --resume_from="$tmp/ck" --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 \
      > "$tmp/w.log" 2>&1 || rc=$?
    [ "$rc" = 2 ] || fail "a worker by hand resuming with --hidden=128 exited $rc, expected 2"
    grep -qF "[worker 0] ${why/ckpt-000000000020/ckpt-000000000039-final}" "$tmp/w.log" ||
      fail "the worker did not name the checkpoint and the field: $(grep '^E' "$tmp/w.log")"
    ! grep -q "training rows" "$tmp/w.log" || fail "the worker read its data before it refused the resume"
    echo "tether-worker: exit 2 before it read its data"
    rc=0
    timeout -k 5 60 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --in_process --num_servers=1 \
      --num_workers=1 --checkpoint_dir="$tmp/ck" > "$tmp/ip.log" 2>&1 || rc=$?
    [ "$rc" = 1 ] || fail "a one-process job into a folder that holds checkpoints exited $rc, expected 1"
    [ "$(grep -c "checkpoint.dir $tmp/ck already holds checkpoints" "$tmp/ip.log")" = 1 ] ||
      fail "the one-process job did not report its failure once: $(grep '^E' "$tmp/ip.log")"
    echo "tether-worker --in_process: exit 1, the failure reported once"
    echo "PASS"
    ;;
  resume_epochs)
    one=("$bin/tether-worker" --in_process --config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1
         --seed=5)
    timeout -k 5 60 "${one[@]}" --epochs=2 --checkpoint_dir="$tmp/ck" > "$tmp/first.log" 2>&1 ||
      fail "the 2-epoch job failed: $(grep '^E' "$tmp/first.log")"
    c=$(ls -d "$tmp"/ck/ckpt-*-final)
    fewer="cannot resume from $c: the checkpoint has begun epoch 2 (worker 0), but train.epochs (--epochs) is 1: a \
resume trains on to train.epochs and never undoes an epoch, so its figures would be of 2 epochs; resume with \
--epochs=2 or more, or export the checkpoint's model (tether-export)"
    more="cannot resume from $c: worker 0 had finished the checkpoint's 2 epoch(s) (train.epochs of the checkpoint), \
but train.epochs (--epochs) is 3: a finished worker keeps no place to train on from, so it would train none of the \
epochs past 2; resume with --epochs=2"
    for e in 1 3; do
      why=$fewer
      [ "$e" = 3 ] && why=$more
      rc=0
      timeout -k 5 60 "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --servers=1 --workers=1 --epochs="$e" \
        --resume_from="$tmp/ck" --checkpoint_dir="$tmp/ck2" --max_restarts=2 > "$tmp/l$e.log" 2>&1 || rc=$?
      [ "$rc" = 2 ] || fail "tether-launch --epochs=$e exited $rc, expected 2"
      [ "$(grep -cF "[launch] $why" "$tmp/l$e.log" || true)" = 1 ] ||
        fail "tether-launch --epochs=$e did not refuse once: $(grep '^E' "$tmp/l$e.log")"
      ! grep -q "\[launch\] started\|\[launch\] restart" "$tmp/l$e.log" || fail "tether-launch --epochs=$e started the job"
      rc=0
      timeout -k 5 60 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --rank=0 --num_servers=1 \
        --num_workers=1 --epochs="$e" --resume_from="$tmp/ck" --server_addresses=tcp://127.0.0.1:9 \
        > "$tmp/w$e.log" 2>&1 || rc=$?
      [ "$rc" = 2 ] || fail "a worker by hand with --epochs=$e exited $rc, expected 2"
      grep -qF "[worker 0] $why" "$tmp/w$e.log" || fail "the worker did not name both: $(grep '^E' "$tmp/w$e.log")"
      ! grep -q "training rows" "$tmp/w$e.log" || fail "the worker read its data before it refused the resume"
      rc=0
      timeout -k 5 60 "${one[@]}" --epochs="$e" --resume_from="$tmp/ck" > "$tmp/ip$e.log" 2>&1 || rc=$?
      [ "$rc" = 2 ] || fail "a one-process job with --epochs=$e exited $rc, expected 2"
      grep -qF "$why" "$tmp/ip$e.log" || fail "the one-process job did not name both: $(grep '^E' "$tmp/ip$e.log")"
      echo "--epochs=$e: exit 2 from tether-launch, a worker and a one-process job: ${why:0:100}..."
    done
    [ ! -e "$tmp/ck2" ] || fail "a refused launch made $tmp/ck2"
    timeout -k 5 60 "${one[@]}" --epochs=2 --resume_from="$tmp/ck" --metrics_out="$tmp/m.json" > "$tmp/same.log" 2>&1 ||
      fail "the resume with --epochs=2 failed: $(grep '^E' "$tmp/same.log")"
    [ "$(metric "$tmp/m.json" epochs)" = 2 ] || fail "the resume reports epochs $(metric "$tmp/m.json" epochs)"
    [ "$(metric "$tmp/m.json" total_samples)" = 9760 ] ||
      fail "the resume reports $(metric "$tmp/m.json" total_samples) rows, expected 2 x 4880"
    echo "--epochs=2: exit 0, epochs 2, 9760 rows"
    echo "PASS"
    ;;
  *)
    echo "usage: $0 killed|bad_paths|final_twice|relative|bad_shard|bad_shard_alone|live_folder|changed_config|resume_epochs BIN_DIR"
    exit 2
    ;;
esac
