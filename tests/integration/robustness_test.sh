#!/usr/bin/env bash
# Bad input through the real binaries (cases in
# tests/data/cases/). Usage: robustness_test.sh MODE BIN_DIR
#   data_cases        tether-data check on every data case: exact counts, or
#                     the exact error and a non-zero exit
#   startup_refusals  C20 config typo and flag errors (command line and
#                     --flagfile), C11 empty training
#                     file, C15 oversized block: each start is refused with a
#                     non-zero exit before any network activity (a listener
#                     counts connections; a server never binds); the values
#                     in force, index base included (C02), are logged once
#   command_line      every binary: --help (usage, Tether's flags first, no
#                     glog flags), --version, no arguments (usage, exit 2), a
#                     stray positional argument and a typo (exit 1, named);
#                     log lines carry one prefix
# Every process runs under `timeout`; the listener is killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
cases=tests/data/cases

# expect_ok NAME "ARGS..." "key: value" ...: exit 0 and every line present.
expect_ok() {
  local name=$1 args=$2
  shift 2
  local out
  out=$(timeout 30 "$bin/tether-data" check $args 2>/dev/null) || fail "$name: exit $? (expected 0)"
  for line in "$@"; do
    grep -qxF -- "$line" <<<"$out" || fail "$name: missing '$line' in:"$'\n'"$out"
  done
  echo "ok   $name"
}
# expect_error NAME "ARGS..." MESSAGE: non-zero exit and exactly this error.
expect_error() {
  local name=$1 args=$2 want=$3 out rc=0
  out=$(timeout 30 "$bin/tether-data" check $args 2>&1 >/dev/null | grep -v '^[IWE][0-9]\{8\} ') || rc=$?
  timeout 30 "$bin/tether-data" check $args >/dev/null 2>&1 && fail "$name: exit 0 (expected an error)"
  [ "$out" = "tether-data: $want" ] || fail "$name: error was:"$'\n'"$out"$'\n'"expected:"$'\n'"tether-data: $want"
  echo "ok   $name (refused)"
}

case "$mode" in
data_cases)
  x="--format=xmc --index_base=0"
  l="--format=libsvm --index_base=1"
  expect_error C01_count "$x $cases/C01_xmc_header_count_mismatch.txt" \
    "$cases/C01_xmc_header_count_mismatch.txt:1: header declares 4 examples but the file has 3 data rows (declared 4, found 3)"
  expect_ok C01_count_warning "$x --noheader_mismatch_is_error $cases/C01_xmc_header_count_mismatch.txt" \
    "rows: 3" "features: 10" "labels: 5"
  expect_ok C01_width "$x $cases/C01_xmc_header_test_split.txt" "rows: 2" "features: 10" "labels: 5" "nnz: 4"
  expect_ok C02_zero_based "$x $cases/C02_zero_based_no_zero_index.txt" \
    "index_base: 0" "rows: 3" "features: 4" "labels: 3" "nnz: 5"
  expect_error C02_one_based "$l $cases/C02_one_based_with_zero.txt" \
    "$cases/C02_one_based_with_zero.txt:1: feature index 0 is invalid with 1-based indexing (token '0:0.5')"
  expect_error C04_duplicate "$l $cases/C04_unsorted_duplicate_indices.txt" \
    "$cases/C04_unsorted_duplicate_indices.txt:2: duplicate feature index 3 (to merge repeats, set data.duplicates: DUPLICATES_SUM or DUPLICATES_KEEP_LAST; tether-data: --duplicates=sum|keep_last)"
  expect_ok C04_sum "$l --duplicates=sum $cases/C04_unsorted_duplicate_indices.txt" "rows: 3" "features: 7" "nnz: 7"
  expect_ok C05_unlabeled "$x $cases/C05_empty_label_list.txt" \
    "rows: 4" "features: 8" "labels: 5" "nnz: 7" "label_nnz: 3" "unlabeled: 2 (kept as all-negative)"
  expect_ok C05_skip "$x --skip_unlabeled $cases/C05_empty_label_list.txt" \
    "rows: 2" "rows_read: 4" "unlabeled: 2 (skipped)"
  for f in C06_crlf_trailing_ws.txt C06_crlf_trailing_ws_clean_twin.txt; do
    expect_ok "$f" "$l $cases/$f" "rows: 3" "features: 4" "nnz: 4" "targets: 3"
  done
  # C07: qid is checked and ignored (one warning with the count), '#' starts a
  # comment with or without a space before it.
  expect_ok C07_qid_comments "$l $cases/C07_qid_and_comments.txt" \
    "rows: 4" "features: 4" "nnz: 5" "targets: 4" "qid: 4 (ignored)"
  out=$(timeout 30 "$bin/tether-data" check $l $cases/C07_qid_and_comments.txt 2>&1 >/dev/null)
  [ "$(grep -c "4 of 4 lines have a 'qid:' field" <<<"$out")" = 1 ] || fail "C07: no single qid warning:"$'\n'"$out"
  expect_error C08_nonfinite "$l $cases/C08_nan_inf_values.txt" \
    "$cases/C08_nan_inf_values.txt:1: non-finite value: '2:nan' is NaN; 4 lines have non-finite or overflowing values (line 1 '2:nan' is NaN, line 2 '1:inf' is infinite, line 3 '2:-Infinity' is infinite, line 4 '1:1e999' overflows double (not read as inf)); to drop such rows instead, set data.non_finite: NON_FINITE_DROP_ROW (tether-data: --non_finite=drop_row)"
  expect_ok C08_drop "$l --non_finite=drop_row $cases/C08_nan_inf_values.txt" "rows: 1" "rows_read: 5" "dropped: 4"
  expect_ok C10_last_row "$l $cases/C10_no_trailing_newline.txt" "rows: 5" "features: 5" "nnz: 5"
  total=0
  for n in 2 3; do
    sum=0
    for p in $(seq 0 $((n - 1))); do
      rows=$(timeout 30 "$bin/tether-data" check $l --num_features=5 --partition=$p --num_partitions=$n \
        $cases/C10_no_trailing_newline.txt 2>/dev/null | sed -n 's/^rows: //p')
      sum=$((sum + rows))
    done
    [ "$sum" -eq 5 ] || fail "C10 $n shares hold $sum rows, expected 5"
    echo "ok   C10_shares_$n (5 rows)"
  done
  expect_error C11_empty "$l $cases/C11_empty_file.txt" "$cases/C11_empty_file.txt: no examples found (the file is empty)"
  for f in C11_gzip_input.txt.gz C11_gzip_input_plain_twin.txt; do
    expect_ok "$f" "$l $cases/$f" "rows: 3" "features: 4" "nnz: 4" "targets: 3"
  done
  ;;

startup_refusals)
  # A TCP listener that counts connections: the refused starts must make none.
  python3 - "$tmp/port" "$tmp/connections" <<'EOF' &
import os, socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
s.settimeout(0.1)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
n, deadline = 0, time.time() + 120
while time.time() < deadline and not os.path.exists(sys.argv[2] + ".stop"):
    try:
        c, _ = s.accept()
        n += 1
        c.close()
    except socket.timeout:
        pass
with open(sys.argv[2], "w") as f:
    f.write(str(n))
EOF
  pids+=($!)
  wait_port "$tmp/port" "$!" || fail "the listener wrote no port file"
  addr="tcp://127.0.0.1:$(cat "$tmp/port")"
  # refused NAME WANT CMD...: non-zero exit, WANT in the output, no bind.
  refused() {
    local name=$1 want=$2 out rc=0
    shift 2
    out=$(timeout 30 "$@" 2>&1) || rc=$?
    [ "$rc" -ne 0 ] || fail "$name: exit 0"
    [ "$rc" -ne 124 ] || fail "$name: hung (timeout)"
    grep -qF -- "$want" <<<"$out" || fail "$name: output lacks '$want':"$'\n'"$out"
    ! grep -q "listening on\|connected to" <<<"$out" || fail "$name: started networking:"$'\n'"$out"
    echo "ok   $name (exit $rc)"
  }
  typo=$cases/C20_config_typo.pbtxt
  want="C20_config_typo.pbtxt:2: unknown field 'staleness_bond' (did you mean 'staleness'?)"
  refused C20_server_config "$want" "$bin/tether-server" --config=$typo --port_file="$tmp/server.port"
  [ ! -e "$tmp/server.port" ] || fail "C20: the server bound a port"
  refused C20_worker_config "$want" "$bin/tether-worker" --config=$typo --server_addresses="$addr"
  cat > "$tmp/job.pbtxt" <<EOF
cluster { num_servers: 1 num_workers: 1 request_timeout_ms: 2000 startup_timeout_ms: 1000 }
data { format: XMC train_file: "$PWD/$cases/C11_empty_file.txt" index_base: 0 num_features: 10 num_labels: 5 }
model { hidden: 4 }
consistency { staleness: 1 }
EOF
  refused C20_flag_typo "unknown flag --stalenes (did you mean --staleness?)" \
    "$bin/tether-worker" --config="$tmp/job.pbtxt" --stalenes=3 --server_addresses="$addr"
  refused C20_flag_without_value "flag --staleness is missing its value" \
    "$bin/tether-worker" --config="$tmp/job.pbtxt" --server_addresses="$addr" --staleness
  refused C20_flag_empty_value "flag --staleness has an empty value" \
    "$bin/tether-server" --config="$tmp/job.pbtxt" --staleness= --port_file="$tmp/server.port"
  # gflags itself skips unknown names, and flags without a value, in a flagfile.
  printf -- '--stalenes=3\n' > "$tmp/typo.flags"
  refused C20_flagfile_typo "$tmp/typo.flags:1: unknown flag --stalenes (did you mean --staleness?)" \
    "$bin/tether-worker" --config="$tmp/job.pbtxt" --flagfile="$tmp/typo.flags" --server_addresses="$addr"
  printf -- '# job flags\n--staleness\n' > "$tmp/novalue.flags"
  refused C20_flagfile_without_value "$tmp/novalue.flags:2: flag --staleness is missing its value" \
    "$bin/tether-server" --config="$tmp/job.pbtxt" --flagfile="$tmp/novalue.flags" --port_file="$tmp/server.port"
  refused C11_empty_training_file "$cases/C11_empty_file.txt: no examples found (the file is empty)" \
    "$bin/tether-worker" --config="$tmp/job.pbtxt" --server_addresses="$addr"
  sed 's/hidden: 4/hidden: 700000000/' "$tmp/job.pbtxt" > "$tmp/big.pbtxt"
  refused C15_block_above_the_limit "dense table 'b1' is 2800000000 bytes (700000000 floats); split over cluster.num_servers=1 its largest slice is 2800000000 bytes, above the 1073741824-byte message limit: set cluster.num_servers to at least 3" \
    "$bin/tether-worker" --config="$tmp/big.pbtxt" --server_addresses="$addr"
  # The server knows no model: the tables' sizes are the worker's (and the
  # launcher's) to refuse, before any connection is made.
  refused C15_block_above_the_limit_launch "dense table 'b1' is 2800000000 bytes" \
    "$bin/tether-launch" --config="$tmp/big.pbtxt"
  # C23: a second table { name: "w2" } block is refused naming both lines, exit 2.
  rc=0
  refused C23_repeated_table "$cases/C23_dup_table_staleness.pbtxt:27: table \"w2\" is already configured at line 23" \
    "$bin/tether-launch" --config="$cases/C23_dup_table_staleness.pbtxt"
  timeout 30 "$bin/tether-launch" --config="$cases/C23_dup_table_staleness.pbtxt" >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "C23: tether-launch exit $rc (expected 2)"
  # A config's relative data paths are taken against its own folder;
  # a missing data file stops the launcher before any process starts (exit
  # 2), with the full path it tried; a worker refuses it the same way.
  mkdir -p "$tmp/cfg"
  sed 's#"\.\./\.\./data/bibtex/Bibtex_data.txt.gz"#"../nodata/x.txt"#' tests/data/bibtex_fixed.pbtxt > "$tmp/cfg/job.pbtxt"
  rc=0
  out=$(timeout 30 "$bin/tether-launch" --config="$tmp/cfg/job.pbtxt" 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "missing data file: tether-launch exit $rc (expected 2):"$'\n'"$out"
  grep -qF "config field data.train_file: '$tmp/nodata/x.txt' does not exist" <<<"$out" ||
    fail "missing data file: message lacks the full path:"$'\n'"$out"
  ! grep -q "started server\|started worker" <<<"$out" || fail "missing data file: a process started:"$'\n'"$out"
  echo "ok   missing data file (relative to the config's folder) refused by tether-launch before any process starts (exit 2, full path)"
  # A path given by flag stays relative to the current directory.
  rc=0
  out=$(cd "$tmp" && timeout 30 "$bin/tether-launch" --config="$OLDPWD/tests/data/bibtex_fixed.pbtxt" --train_file=x.txt 2>&1) || rc=$?
  [ "$rc" = 2 ] || fail "missing --train_file: tether-launch exit $rc (expected 2):"$'\n'"$out"
  grep -qF "config field data.train_file: 'x.txt' does not exist (tried $tmp/x.txt, relative to the current directory $tmp)" <<<"$out" ||
    fail "missing --train_file: message lacks the full path:"$'\n'"$out"
  echo "ok   a --train_file flag is relative to the current directory (exit 2, full path)"
  # The examples run from any current directory: pendigits, one epoch, from $tmp.
  out=$(cd "$tmp" && timeout 60 "$bin/tether-launch" --config="$OLDPWD/examples/pendigits.pbtxt" --transport=inproc \
    --epochs=1 --metrics_out="$tmp/pd.json" 2>&1) || fail "examples/pendigits.pbtxt from $tmp: exit $?:"$'\n'"$out"
  [ -s "$tmp/pd.json" ] || fail "examples/pendigits.pbtxt from $tmp: no metrics"
  echo "ok   examples/pendigits.pbtxt runs from another current directory"
  refused missing_data_file_worker "config field data.test_file: '/nonexistent/t.txt' does not exist" \
    "$bin/tether-worker" --config="$tmp/job.pbtxt" --test_file=/nonexistent/t.txt --server_addresses="$addr"
  touch "$tmp/connections.stop"
  wait "${pids[0]}"
  pids=()
  [ "$(cat "$tmp/connections")" = 0 ] || fail "refused starts made $(cat "$tmp/connections") connection(s)"
  echo "ok   no connection was made by any refused start"

  # The values in force are logged once at start-up, with the index base (C02)
  # and a flag's override; this server stops itself (no worker comes).
  # By default in one line, naming the index base and the staleness in force.
  out=$(timeout 30 "$bin/tether-server" --config="$tmp/job.pbtxt" --staleness=3 2>&1) && fail "server without workers: exit 0"
  [ "$(grep -c "config in force" <<<"$out")" = 1 ] || fail "config in force not logged exactly once:"$'\n'"$out"
  line=$(grep "config in force" <<<"$out")
  for part in "index_base 0" "staleness 3 (SSP)" "flags --staleness=3"; do
    grep -qF "$part" <<<"$line" || fail "config in force lacks '$part': $line"
  done
  # At --v=1, every field instead: its header line, then one indented line
  # per config section.
  out=$(timeout 30 "$bin/tether-server" --config="$tmp/job.pbtxt" --staleness=3 --v=1 2>&1) && fail "server without workers: exit 0"
  [ "$(grep -c "config in force" <<<"$out")" = 1 ] || fail "config in force not logged exactly once at --v=1:"$'\n'"$out"
  line=$(awk '/config in force/ {on = 1; print; next} on && /^  / {print; next} {on = 0}' <<<"$out")
  for part in "index_base: 0" "staleness: 3" "num_features: 10" "flags --staleness=3"; do
    grep -qF "$part" <<<"$line" || fail "config in force lacks '$part': $line"
  done
  awk 'length > 200 {exit 1}' <<<"$line" || fail "config in force has a line over 200 characters: $line"
  grep -qF "no worker said hello within cluster.startup_timeout_ms=1000" <<<"$out" || fail "server: $out"
  echo "ok   config in force logged once (index_base: 0, staleness: 3)"

  # num_features / num_labels left at 0 take the XMC header's widths
  # (10 and 5 here), in the values in force and in training.
  cat > "$tmp/widths.pbtxt" <<EOF
cluster { num_servers: 1 num_workers: 1 }
data { format: XMC train_file: "$PWD/$cases/C01_xmc_header_test_split.txt" index_base: 0 }
model { hidden: 4 }
train { epochs: 1 minibatch_size: 2 }
EOF
  out=$(timeout 60 "$bin/tether-launch" --config="$tmp/widths.pbtxt" --transport=inproc --metrics_out="$tmp/w.json" 2>&1) ||
    fail "widths from the XMC header: exit $?:"$'\n'"$out"
  grep -qF "10 features, 5 labels" <<<"$out" || fail "widths not taken from the header:"$'\n'"$out"
  [ -s "$tmp/w.json" ] || fail "widths from the XMC header: no metrics"
  echo "ok   num_features/num_labels 0 take the XMC header's widths (10, 5)"
  ;;
command_line)
  for b in tether-server tether-worker tether-launch tether-data tether-gen-xmc tether-bench tether-keygen; do
    out=$(timeout 10 "$bin/$b" --help 2>&1) || fail "$b --help: exit $?"
    [[ "$(head -1 <<<"$out")" == "usage: $b"* ]] ||
      fail "$b --help: first line is not its usage:"$'\n'"$out"
    grep -q -- "--logtostderr\|--minloglevel\|--flagfile=" <<<"$out" && fail "$b --help lists glog/gflags flags:"$'\n'"$out"
    [[ "$(tail -1 <<<"$out")" == *"$b --helpfull" ]] || fail "$b --help: last line does not point at --helpfull"
    out=$(timeout 10 "$bin/$b" --helpfull 2>&1) || fail "$b --helpfull: exit $?"
    grep -q -- "-logtostderr" <<<"$out" || fail "$b --helpfull lacks the glog flags"
    out=$(timeout 10 "$bin/$b" --version 2>&1) || fail "$b --version: exit $?"
    grep -qE "^$b [0-9]+\.[0-9]+\.[0-9]+ \(commit [^,]+, CUDA (on|off)\)$" <<<"$out" || fail "$b --version: $out"
    rc=0; out=$(timeout 10 "$bin/$b" 2>&1) || rc=$?
    [ "$rc" = 2 ] || fail "$b without arguments: exit $rc (expected 2):"$'\n'"$out"
    [[ "$(head -1 <<<"$out")" == "usage: $b"* ]] || fail "$b without arguments does not print its usage:"$'\n'"$out"
    rc=0; out=$(timeout 10 "$bin/$b" --no_such_flagz=1 2>&1) || rc=$?
    [ "$rc" = 1 ] && grep -qF "error: unknown flag --no_such_flagz" <<<"$out" || fail "$b typo: exit $rc: $out"
    echo "ok   $b: --help, --helpfull, --version, no arguments, typo"
  done
  help=$(timeout 10 "$bin/tether-server" --help)
  [ "$(grep -n -- "^  --shard=" <<<"$help" | cut -d: -f1)" -lt "$(grep -n -- "^  --staleness " <<<"$help" | cut -d: -f1)" ] ||
    fail "tether-server --help: its own flags should come before the config overrides"
  grep -qE -- "^  --staleness +consistency.staleness: staleness bound" <<<"$help" ||
    fail "tether-server --help lacks the staleness override:"$'\n'"$help"
  # One line per flag, no more: the server's own, --config, --log_config and one per override flag.
  [ "$(wc -l <<<"$help")" -lt 110 ] || fail "tether-server --help has $(wc -l <<<"$help") lines"
  rc=0; out=$(timeout 10 "$bin/tether-data" chek --format=xmc --index_beas=0 f 2>&1) || rc=$?
  [ "$rc" = 1 ] && grep -qF "unknown flag --index_beas (did you mean --index_base?)" <<<"$out" || fail "tether-data typo: $out"
  rc=0; out=$(timeout 10 "$bin/tether-data" chek --format=xmc --index_base=0 f 2>&1) || rc=$?
  [ "$rc" = 1 ] && grep -qF "unknown command 'chek'" <<<"$out" || fail "tether-data chek: $out"
  rc=0; out=$(timeout 10 "$bin/tether-data" check --format=xmc --index_base=0 a b 2>&1) || rc=$?
  [ "$rc" = 1 ] && grep -qF "error: unexpected argument 'b'" <<<"$out" || fail "tether-data extra argument: $out"
  for b in tether-server tether-worker tether-launch; do
    rc=0; out=$(timeout 10 "$bin/$b" --config=tests/data/bibtex_fixed.pbtxt stray 2>&1) || rc=$?
    [ "$rc" = 1 ] && grep -qF "error: unexpected argument 'stray' ($b takes flags only" <<<"$out" ||
      fail "$b stray argument: exit $rc: $out"
  done
  rc=0; out=$(timeout 10 "$bin/tether-bench" transport extra 2>&1) || rc=$?
  [ "$rc" = 1 ] && grep -qF "error: unexpected argument 'extra'" <<<"$out" || fail "tether-bench extra: $out"
  echo "ok   stray positional arguments are refused by name"
  # One prefix per log line: level, date and time, then the role.
  out=$(timeout 30 "$bin/tether-server" --config=tests/data/cases/C20_config_typo.pbtxt 2>&1 || true)
  while IFS= read -r l; do
    [[ "$l" =~ ^[IWEF][0-9]{8}\ [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}\ \[server\ 0\]\  ]] ||
      fail "log line without exactly one prefix: '$l'"
  done < <(grep -E '^[IWEF][0-9]{8} ' <<<"$out")
  grep -qE '^E[0-9]{8} [0-9:.]{12} \[server 0\] .*unknown field' <<<"$out" || fail "server error line: $out"
  echo "ok   log lines carry one prefix"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
