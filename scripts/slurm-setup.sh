#!/usr/bin/env bash
# A one-machine Slurm (munged + slurmctld + slurmd) for testing `--launcher slurm`.
# Idempotent: installs Debian's slurm-wlm and munge if missing (root + apt-get), writes a
# config under $ES_SLURM_DIR (default /tmp/elastic-sim-slurm), starts the daemons unless
# they already answer, and prints `export SLURM_CONF=...` on its last line.
# Exits non-zero, saying why, where Slurm cannot be set up (the tests then skip).
set -euo pipefail
dir=${ES_SLURM_DIR:-/tmp/elastic-sim-slurm}
cpus=${ES_SLURM_CPUS:-8}
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "slurm-setup: slurm-wlm is not installed and cannot be (needs root and apt-get)" >&2
    exit 1
  fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge) \
    >/dev/null 2>&1 || { echo "slurm-setup: apt-get install slurm-wlm munge failed" >&2; exit 1; }
fi
[ "$(id -u)" = 0 ] || { echo "slurm-setup: starting slurmd needs root" >&2; exit 1; }
host=$(hostname -s)
mkdir -p "$dir/state" "$dir/spool" /etc/munge /var/log/munge /run/munge /var/lib/munge
cat >"$dir/slurm.conf" <<CONF
ClusterName=elasticsim
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ReturnToService=2
MpiDefault=none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$dir/slurm.conf"
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
fi
chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged 2>/dev/null \
  || /usr/sbin/munged --force
if ! timeout 5 sinfo -h >/dev/null 2>&1; then
  slurmctld -f "$SLURM_CONF"
fi
pgrep -x slurmd >/dev/null || slurmd -f "$SLURM_CONF"
for _ in $(seq 1 30); do
  if timeout 5 sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$SLURM_CONF"
    exit 0
  fi
  sleep 1
done
echo "slurm-setup: the node did not become idle; see $dir/slurmd.log and $dir/slurmctld.log" >&2
exit 1
