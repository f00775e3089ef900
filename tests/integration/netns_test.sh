#!/usr/bin/env bash
# Two hosts on one machine: servers in one network namespace, workers in
# another, joined by a veth pair with addresses of their own (10.231.0.1/24
# and 10.231.0.2/24; fd00:7e7e::1/64 and fd00:7e7e::2/64, added with nodad
# so that they are usable at once). Loopback is private to each namespace,
# so the workers reach the servers only across the veth, and they are given
# only the rendezvous: Bibtex (2 servers, 2 workers) must reach P@1 >= 0.58
#   1. over IPv4, store served by tether-rendezvous at 10.231.0.1, servers
#      bound to every interface and advertising 10.231.0.1;
#   2. over IPv6, store served by server 0 (--rendezvous_serve) at
#      [fd00:7e7e::1], servers bound to fd00:7e7e::1;
#   3. over IPv4 with the file backend (a directory both namespaces see).
# Where the source has the unauthenticated-bind warning ("anyone who can
# reach"), the servers' logs must contain it.
# Needs root and `ip netns` (iproute2); skips (exit 77) otherwise. The
# namespaces (and with them the veth pair) are removed on exit.
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (ip netns)"; exit 77; fi
if ! command -v ip >/dev/null; then echo "SKIP: ip (iproute2) not found"; exit 77; fi
source "$(dirname "$0")/lib.sh"
tether_test_init netns "$1"
repo=$(pwd)
ns_s=tether-srv-$$
ns_w=tether-wrk-$$
trap 'tether_test_cleanup; ip netns del "$ns_s" 2>/dev/null || true; ip netns del "$ns_w" 2>/dev/null || true' EXIT
if ! ip netns add "$ns_s" 2>"$tmp/err"; then echo "SKIP: ip netns add failed: $(cat "$tmp/err")"; exit 77; fi
ip netns add "$ns_w"
ip link add tvs$$ type veth peer name tvw$$
ip link set tvs$$ netns "$ns_s"
ip link set tvw$$ netns "$ns_w"
ip -n "$ns_s" addr add 10.231.0.1/24 dev tvs$$
ip -n "$ns_w" addr add 10.231.0.2/24 dev tvw$$
ip -n "$ns_s" addr add fd00:7e7e::1/64 dev tvs$$ nodad
ip -n "$ns_w" addr add fd00:7e7e::2/64 dev tvw$$ nodad
for ns in "$ns_s" "$ns_w"; do ip -n "$ns" link set lo up; done
ip -n "$ns_s" link set tvs$$ up
ip -n "$ns_w" link set tvw$$ up
in_s() { ip netns exec "$ns_s" "$@"; }
in_w() { ip netns exec "$ns_w" "$@"; }
# Both ends up (carrier) and no address tentative, before anything starts.
link_ready() {
  grep -q LOWER_UP <<< "$(ip -n "$ns_s" link show tvs$$)" && grep -q LOWER_UP <<< "$(ip -n "$ns_w" link show tvw$$)" &&
    ! grep -q tentative <<< "$(ip -n "$ns_s" addr show)" && ! grep -q tentative <<< "$(ip -n "$ns_w" addr show)"
}
poll 100 link_ready || true
link_ready || { echo "FAIL: the veth pair is not up"; ip -n "$ns_s" addr; ip -n "$ns_w" addr; exit 1; }

warning_expected=0
if git -C "$repo" grep -q "anyone who can reach" -- '*.cc' '*.h' 2>/dev/null; then warning_expected=1; fi
cfg=tests/data/bibtex_fixed.pbtxt

# run NAME RENDEZVOUS SERVER0_EXTRA LISTEN [SERVER_EXTRA...]: 2 servers in
# ns_s, 2 workers in ns_w given only the rendezvous (and the job id).
run() {
  local name=$1 rdzv=$2 s0_extra=$3 listen=$4; shift 4
  local d="$tmp/$name" job="netns-$name-$$" s w
  mkdir -p "$d"
  local spids=()
  for s in 0 1; do
    local extra=()
    [ "$s" = 0 ] && [ -n "$s0_extra" ] && extra+=("$s0_extra")
    in_s timeout -k 5 120 "$bin/tether-server" --config=$cfg --shard=$s --listen="$listen" --rendezvous="$rdzv" \
      --job_id="$job" "${extra[@]}" "$@" > "$d/server$s.log" 2>&1 &
    spids+=($!); pids+=($!)
  done
  in_w timeout -k 5 120 "$bin/tether-worker" --config=$cfg --rank=1 --rendezvous="$rdzv" --job_id="$job" \
    > "$d/worker1.log" 2>&1 &
  local w1=$!; pids+=($w1)
  if ! in_w timeout -k 5 120 "$bin/tether-worker" --config=$cfg --rank=0 --rendezvous="$rdzv" --job_id="$job" \
      --metrics_out="$d/m.json" > "$d/worker0.log" 2>&1; then
    echo "FAIL ($name): worker 0 failed"; tail -n 20 "$d"/*.log; return 1
  fi
  wait "$w1" || { echo "FAIL ($name): worker 1 failed"; tail -n 20 "$d/worker1.log"; return 1; }
  for s in "${spids[@]}"; do wait "$s" || { echo "FAIL ($name): a server failed"; tail -n 20 "$d"/server*.log; return 1; }; done
  grep -h "servers from the rendezvous" "$d"/worker*.log
  # One run per gate: Bibtex with 2 servers and 2 workers gave P@1 0.608-0.622
  # over 8 runs of `tether-launch --config tests/data/bibtex_fixed.pbtxt`, 0.602-0.616
  # over 6 with `--servers 1`, so 0.58 sits well below the run-to-run spread.
  gate "$(metric "$d/m.json" precision_at_1)" 0.58 "P@1 ($name: servers in $ns_s, workers in $ns_w, rendezvous $rdzv)"
  if [ "$warning_expected" = 1 ]; then
    grep -q "anyone who can reach" "$d/server0.log" ||
      { echo "FAIL ($name): no unauthenticated-bind warning in server 0's log"; return 1; }
    echo "($name) server 0 warned that anyone who can reach its port can change the model"
  fi
}

# 1. IPv4, standalone store, wildcard bind advertised as 10.231.0.1.
in_s timeout -k 5 300 "$bin/tether-rendezvous" --listen=tcp://10.231.0.1:29400 > "$tmp/store.log" 2>&1 &
store=$!; pids+=($store)
run ipv4_store tcp://10.231.0.1:29400 "" "tcp://*:0" --advertise_host=10.231.0.1
grep -q "tcp://10.231.0.1:" "$tmp/ipv4_store/worker0.log"
# `timeout` would report the signal as its own exit: stop the store itself.
kill -TERM "$(pgrep -P "$store" -f tether-rendezvous)"
wait "$store" || { echo "FAIL: tether-rendezvous did not exit 0 on SIGTERM"; cat "$tmp/store.log"; exit 1; }
grep -h "stopped by" "$tmp/store.log"

# 2. IPv6, store served by server 0, servers bound to the IPv6 address.
run ipv6_store "tcp://[fd00:7e7e::1]:29401" --rendezvous_serve "tcp://[fd00:7e7e::1]:0"
grep -q "tcp://\[fd00:7e7e::1\]:" "$tmp/ipv6_store/worker0.log"

# 3. IPv4, file backend (the directory is visible from both namespaces, as
#    a shared filesystem would be from two hosts).
run ipv4_file "file:$tmp/rdzv" "" tcp://10.231.0.1:0
echo PASS
