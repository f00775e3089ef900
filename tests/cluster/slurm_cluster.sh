#!/usr/bin/env bash
# A real SLURM on this one machine (Debian's munge, slurmctld, slurmd and
# slurm-client), started and stopped by the tests themselves: one munged, one
# slurmctld, one slurmd, a slurm.conf written here with one node (this host,
# its CPUs oversubscribed) and one partition, on free ports, with all state,
# logs and pid files in a private directory. Nothing under /etc is written
# except /etc/munge/munge.key when it does not exist (munge's own default key,
# as `mungekey` would create it).
#
# As a library (what the tests do):
#   source tests/cluster/slurm_cluster.sh
#   slurm_cluster_start || exit $?   # 77 = skipped (not root, binary missing)
#   sbatch --wait ...                # SLURM_CONF is exported
#   slurm_cluster_stop               # kills exactly the daemons started, removes the dir
# By hand:
#   tests/cluster/slurm_cluster.sh start     # prints `export SLURM_CONF=...`
#   tests/cluster/slurm_cluster.sh stop DIR  # DIR = dirname of that SLURM_CONF
#
# Root is needed: slurmd runs job steps as the submitting user and munged runs
# as user munge. The daemons run in the foreground (munged -F, slurmctld -D,
# slurmd -D) as children of this shell, so their pids are known exactly and
# stop kills those pids and no other process.
#
# Settings (environment, all optional):
#   SLURM_CLUSTER_CPUS        CPUs the node declares (default: at least 8, or
#                             nproc if larger): a 2-core machine must run a job
#                             of 4 tasks, 1 CPU each; slurmd is told to trust
#                             the config (SlurmdParameters=config_overrides).
#   SLURM_CLUSTER_START_S     bound on the start, seconds (default 60).
#   SLURM_CLUSTER_KEEP=1      stop leaves the directory (logs) in place.
#
# What the cluster is configured for (tests of the SLURM integration):
#   JobRequeue=1              batch jobs can be requeued (scontrol requeue).
#   AuthInfo cred_expire=10   a requeued job waits this long before it may start
#                             again (SLURM's default is 120 s).
#   KillWait=5                seconds between SIGTERM and SIGKILL when a step ends.
#   SchedulerParameters=sched_interval=2  the main scheduling loop (which starts
#                             a requeued job) runs every 2 s instead of 60 s.

slurm_cluster_skip() {
  echo "SKIP: $*"
  return 77
}

# Prints a free TCP port on 127.0.0.1 (bound then released: a small window in
# which another process could take it; the start fails loudly if so).
slurm_cluster_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# slurm_cluster_wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s until
# it succeeds or SECONDS pass (returns 1).
slurm_cluster_wait_for() {
  local limit=$1; shift
  local deadline=$((SECONDS + limit))
  while [ "$SECONDS" -lt "$deadline" ]; do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  "$@" >/dev/null 2>&1
}

slurm_cluster_node_idle() {
  [ "$(sinfo -h -N -n "$SLURM_CLUSTER_NODE" -o %T 2>/dev/null)" = idle ]
}

# Prints the logs of a start that failed.
slurm_cluster_dump_logs() {
  local f
  for f in "$SLURM_CLUSTER_DIR"/munge/munged.log "$SLURM_CLUSTER_DIR"/*.log; do
    [ -f "$f" ] || continue
    echo "---- $f (last 30 lines)"
    tail -n 30 "$f"
  done
}

slurm_cluster_start() {
  if [ "$(id -u)" -ne 0 ]; then
    slurm_cluster_skip "a one-machine SLURM needs root (slurmd, munged as user munge)"
    return 77
  fi
  local b
  for b in munged slurmctld slurmd sbatch srun scontrol sinfo squeue setpriv python3; do
    if ! command -v "$b" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$b" ]; then
      slurm_cluster_skip "$b not found (install with scripts/setup_cluster.sh: munge slurmctld slurmd slurm-client)"
      return 77
    fi
  done
  if ! id munge >/dev/null 2>&1; then
    slurm_cluster_skip "no user munge (Debian's munge package creates it)"
    return 77
  fi
  export PATH="$PATH:/usr/sbin:/sbin"
  local start_s=${SLURM_CLUSTER_START_S:-60}

  # munged refuses a key not owned by the user it runs as, or readable by others.
  if [ ! -f /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1 || [ -x /usr/sbin/mungekey ]; then
      mungekey --create --keyfile=/etc/munge/munge.key
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    echo "slurm_cluster: created /etc/munge/munge.key"
  fi

  SLURM_CLUSTER_DIR=$(mktemp -d "${TMPDIR:-/tmp}/slurm-cluster.XXXXXX")
  SLURM_CLUSTER_PIDS=()
  : > "$SLURM_CLUSTER_DIR/pids"
  local d=$SLURM_CLUSTER_DIR

  # munged's socket directory must be reachable by user munge, which cannot
  # enter a mode-0700 TMPDIR (scripts/test.sh makes one); then the socket
  # lives in a private directory under /run, removed by stop.
  chmod 0711 "$d"
  mkdir -p "$d/munge"
  chown munge:munge "$d/munge"
  chmod 0700 "$d/munge"
  SLURM_CLUSTER_MUNGE_DIR=$d/munge
  if ! setpriv --reuid=munge --regid=munge --init-groups test -w "$d/munge" 2>/dev/null; then
    # A run killed before its stop (SIGKILL, a ctest timeout) leaves its
    # directory: remove those whose munged is gone (and older than a minute,
    # so that one whose munged is only starting is left alone).
    local old
    while IFS= read -r old; do
      if [ ! -f "$old/munged.pid" ] || ! kill -0 "$(cat "$old/munged.pid" 2>/dev/null)" 2>/dev/null; then
        rm -rf "$old"
      fi
    done < <(find /run -maxdepth 1 -name 'tether-munge.*' -type d -mmin +1 2>/dev/null)
    SLURM_CLUSTER_MUNGE_DIR=$(mktemp -d /run/tether-munge.XXXXXX)
    chown munge:munge "$SLURM_CLUSTER_MUNGE_DIR"
    chmod 0700 "$SLURM_CLUSTER_MUNGE_DIR"
    echo "$SLURM_CLUSTER_MUNGE_DIR" > "$d/munge_dir"
  fi
  local m=$SLURM_CLUSTER_MUNGE_DIR
  # The socket's directory must let root (the SLURM daemons) reach the socket.
  chmod 0755 "$m"
  local sock=$m/munge.socket
  setpriv --reuid=munge --regid=munge --init-groups \
    /usr/sbin/munged -F --socket="$sock" --pid-file="$m/munged.pid" \
    --log-file="$m/munged.log" --seed-file="$m/munged.seed" \
    --key-file=/etc/munge/munge.key > "$d/munged.out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
  echo "munged $!" >> "$d/pids"
  if ! slurm_cluster_wait_for "$start_s" test -S "$sock" ||
     ! slurm_cluster_wait_for 10 munge --socket="$sock" -n; then
    echo "slurm_cluster: munged did not start"
    cat "$d/munged.out"
    slurm_cluster_dump_logs
    slurm_cluster_stop
    return 1
  fi

  local host cpus ctld_port slurmd_port
  host=$(hostname -s)
  SLURM_CLUSTER_NODE=$host
  cpus=${SLURM_CLUSTER_CPUS:-$(( $(nproc) > 8 ? $(nproc) : 8 ))}
  ctld_port=$(slurm_cluster_free_port)
  slurmd_port=$(slurm_cluster_free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(slurm_cluster_free_port); done
  mkdir -p "$d/state" "$d/spool"
  : > "$d/plugstack.conf"
  cat > "$d/slurm.conf" <<CONF
# Written by tests/cluster/slurm_cluster.sh: a one-machine SLURM for tests.
ClusterName=tether-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$d/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
ReturnToService=2
JobRequeue=1
KillWait=5
InactiveLimit=0
MinJobAge=4
MailProg=/bin/true
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
  export SLURM_CONF=$d/slurm.conf
  /usr/sbin/slurmctld -D -c -f "$SLURM_CONF" > "$d/slurmctld.out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
  echo "slurmctld $!" >> "$d/pids"
  if ! slurm_cluster_wait_for "$start_s" scontrol ping; then
    echo "slurm_cluster: slurmctld did not answer within ${start_s} s"
    cat "$d/slurmctld.out"
    slurm_cluster_dump_logs
    slurm_cluster_stop
    return 1
  fi
  /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$host" > "$d/slurmd.out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
  echo "slurmd $!" >> "$d/pids"
  if ! slurm_cluster_wait_for "$start_s" slurm_cluster_node_idle; then
    echo "slurm_cluster: node $host not idle within ${start_s} s:"
    sinfo -N -l 2>&1
    cat "$d/slurmd.out"
    slurm_cluster_dump_logs
    slurm_cluster_stop
    return 1
  fi
  echo "slurm_cluster: up (node $host, $cpus CPUs, slurmctld port $ctld_port, slurmd port $slurmd_port, dir $d)"
}

# Stops what slurm_cluster_start started: pending and running jobs are
# cancelled first and their end awaited (20 s at most), then slurmd,
# slurmctld and munged get SIGTERM, and SIGKILL after 10 s; a job process
# left after that is SIGKILLed. Reads the pids from the directory, so a
# shell other than the one that started the cluster can stop it.
slurm_cluster_stop() {
  local d=${1:-${SLURM_CLUSTER_DIR:-}}
  [ -n "$d" ] && [ -d "$d" ] || return 0
  if [ -f "$d/slurm.conf" ] && [ -f "$d/pids" ] && grep -q '^slurmctld ' "$d/pids"; then
    SLURM_CONF=$d/slurm.conf timeout 10 scancel --full --signal=KILL --user=root >/dev/null 2>&1 || true
    SLURM_CONF=$d/slurm.conf timeout 10 scancel --user=root >/dev/null 2>&1 || true
    # slurmd must still be up while the steps end (it relays the kill).
    local deadline=$((SECONDS + 20))
    while [ -n "$(SLURM_CONF=$d/slurm.conf timeout 5 squeue -h -o %i 2>/dev/null)" ] &&
          [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.2
    done
  fi
  local name pid order
  # slurmd first (it ends its steps), then slurmctld, then munged.
  for order in slurmd slurmctld munged; do
    while read -r name pid; do
      [ "$name" = "$order" ] || continue
      kill -TERM "$pid" 2>/dev/null || continue
      local deadline=$((SECONDS + 10))
      while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
      if kill -0 "$pid" 2>/dev/null; then
        echo "slurm_cluster: $name ($pid) ignored SIGTERM for 10 s; SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      fi
      wait "$pid" 2>/dev/null || true
    done < "$d/pids"
  done
  # A daemon that is not our child cannot be waited for: poll until it is gone.
  while read -r name pid; do
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
  done < "$d/pids"
  # Last resort: a process of one of this cluster's jobs that outlived the
  # daemons (its environment has this cluster's SLURM_CONF and a
  # SLURM_JOB_ID, or it is one of its slurmstepd) is killed by pid.
  local p
  for p in $(grep -lzx "SLURM_CONF=$d/slurm.conf" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    if grep -qz '^SLURM_JOB_ID=' "/proc/$p/environ" 2>/dev/null ||
       [ "$(cat "/proc/$p/comm" 2>/dev/null)" = slurmstepd ]; then
      echo "slurm_cluster: killing leftover job process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  if [ -f "$d/munge_dir" ]; then
    rm -rf "$(cat "$d/munge_dir")"
  fi
  if [ -n "${SLURM_CLUSTER_KEEP:-}" ]; then
    echo "slurm_cluster: kept $d"
  else
    rm -rf "$d"
  fi
  if [ "$d" = "${SLURM_CLUSTER_DIR:-}" ]; then
    SLURM_CLUSTER_DIR=
    SLURM_CLUSTER_PIDS=()
  fi
}

# Run as a command: start (prints what to export) or stop DIR.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case "${1:-}" in
    start)
      slurm_cluster_start || exit $?
      echo "export SLURM_CONF=$SLURM_CONF"
      echo "stop with: $0 stop $SLURM_CLUSTER_DIR"
      # The daemons outlive this shell (their output goes to files).
      disown -a
      ;;
    stop)
      [ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
      slurm_cluster_stop "$2"
      ;;
    *)
      echo "usage: $0 start | stop DIR" >&2
      exit 2
      ;;
  esac
fi
