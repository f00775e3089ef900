#!/usr/bin/env bash
# A worker that waits for its peers says what it waits for, and a peer that
# is not a Tether server is named within seconds (found by a fresh user: a
# worker with no server up was silent for cluster.startup_timeout_ms; one
# given a web server's port waited 36 s and blamed a disconnect).
# Mode no_server: one worker, --num_servers=1, no server on the port
# (bound by this script, never listened on), --startup_timeout_ms=4500:
# the worker logs "waiting for server shard 0 at ADDR (no connection yet;
# 3 s of cluster.startup_timeout_ms=4500)" once, then exits 1 "never
# answered" within 15 s of its start.
# Mode not_zmtp_close / not_zmtp_hold: a Python listener answers every
# connection "HTTP/1.0 200 OK" and closes it (close) or holds it open
# (hold); the worker exits 1 within 12 s naming the peer: "the peer does not
# speak ZMTP (not a Tether server? check --server_addresses)", with "closed
# the connection before the ZMTP greeting" (close) or "completed no ZMTP
# greeting within 5000 ms" (hold).
# Usage: wait_lines_test.sh no_server|not_zmtp_close|not_zmtp_hold BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
limit_s=30
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1)
# A listener (or only a bound port) on 127.0.0.1; its port in $tmp/port.
cat > "$tmp/peer.py" << 'PY'
import os, socket, sys, time
mode, port_file = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", 0))  # no_server: bound, never listening, so connects are refused
if mode != "no_server":
    s.listen(16)
with open(port_file + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
held = []
while True:
    if mode == "no_server":
        time.sleep(1)
        continue
    c, _ = s.accept()
    c.sendall(b"HTTP/1.0 200 OK\r\n\r\n")
    if mode == "not_zmtp_close":
        c.close()
    else:
        held.append(c)
PY
case "$mode" in
  no_server | not_zmtp_close | not_zmtp_hold) ;;
  *) echo "usage: $0 no_server|not_zmtp_close|not_zmtp_hold BIN_DIR"; exit 2 ;;
esac
timeout -k 5 "$limit_s" python3 "$tmp/peer.py" "$mode" "$tmp/port" > "$tmp/peer.log" 2>&1 &
pids+=($!)
wait_port "$tmp/port"
addrs="tcp://127.0.0.1:$(cat "$tmp/port")"
case "$mode" in
  no_server)
    start_worker 0 "$tmp/w0.log" --startup_timeout_ms=4500; w0=$started
    expect_exit "$w0" 1 15000 "worker 0, no server"
    want="[worker 0] waiting for server shard 0 at $addrs (no connection yet; 3 s of cluster.startup_timeout_ms=4500)"
    [ "$(grep -cF "$want" "$tmp/w0.log")" = 1 ] || fail "worker 0 did not say once what it waits for: $want"
    grep -qF "server shard 0 at $addrs never answered: no connection within 4500 ms" "$tmp/w0.log" ||
      fail "worker 0 did not say that the server never answered"
    ;;
  not_zmtp_close | not_zmtp_hold)
    start_worker 0 "$tmp/w0.log" --startup_timeout_ms=60000; w0=$started
    expect_exit "$w0" 1 12000 "worker 0, a peer that is not a Tether server"
    want="server shard 0 at $addrs: the peer does not speak ZMTP (not a Tether server? check --server_addresses)"
    [ "$mode" = not_zmtp_close ] && how="closed the connection before the ZMTP greeting was done, 3 times in a row" ||
      how="it accepted the connection and completed no ZMTP greeting within 5000 ms"
    grep -F "$want" "$tmp/w0.log" > "$tmp/named" || fail "worker 0 did not name the peer: $want"
    grep -qF "$how" "$tmp/named" || fail "worker 0 did not say how the peer failed: $how"
    ;;
esac
echo "worker 0: exit 1 $took ms after the check began: $(grep -oE "(waiting for|never answered|does not speak ZMTP)[^(]*" "$tmp/w0.log" | head -1)"
echo PASS
