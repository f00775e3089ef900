#!/usr/bin/env bash
# Installs the Debian 12 packages the cluster tests need on top of
# scripts/setup.sh: a one-machine SLURM (tests/cluster/slurm_cluster.sh),
# Open MPI's mpirun, a Prometheus server, packet capture and network
# namespaces. Run as root (or with sudo). Safe to run twice: apt-get skips
# what is there. Without these packages the cluster tests (ctest label
# `cluster`) skip with a message; everything else builds and passes.
#
# Installing must not start daemons: the tests start munged, slurmctld,
# slurmd and prometheus themselves, on free ports, and stop exactly what
# they started. Where no /usr/sbin/policy-rc.d exists, one that refuses
# every start is put in place for the install and removed afterwards.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then exec sudo -E "$0" "$@"; fi
  echo "scripts/setup_cluster.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  munge                                  # SLURM's authentication daemon (munged)
  slurmctld slurmd slurm-client          # a real SLURM on one machine (sbatch, srun, scontrol)
  openmpi-bin                            # mpirun -np N launches a job (ranks from its environment)
  prometheus                             # a real Prometheus scrapes /metrics in the tests
  libmicrohttpd-dev                      # the /metrics HTTP endpoint
  tcpdump                                # captures the wire to check CURVE encrypts it
  iproute2                               # ip netns + veth: two "hosts" on one machine
  procps                                 # pgrep/pkill in the cluster tests
)
missing=()
for p in "${packages[@]}"; do
  grep -q "install ok installed" <<< "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "scripts/setup_cluster.sh: all packages present"
  exit 0
fi
policy=/usr/sbin/policy-rc.d
placed_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/setup_cluster.sh: no daemon starts during the install\nexit 101\n' > "$policy"
  chmod 0755 "$policy"
  placed_policy=1
fi
remove_policy() { [ "$placed_policy" = 1 ] && rm -f "$policy"; return 0; }
trap remove_policy EXIT
echo "scripts/setup_cluster.sh: installing ${missing[*]}"
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
