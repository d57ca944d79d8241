#!/usr/bin/env bash
# Install (if missing), configure and start a single-node Slurm for gahp's tests and CI.
#
# Usage (as root, no systemd needed):   bash .ci/slurm-up.sh
#
# Idempotent: when our Slurm is already up with this configuration it only prints the
# environment line again; when it is up with another one (an older version of this script),
# it is restarted once with the new configuration, its jobs kept.
# Everything lives under one directory, $GAHP_SLURM_DIR (default /tmp/gahp-slurm):
#   slurm.conf, gres.conf, dev/gpu{0,1}, state/, spool/, log/{slurmctld,slurmd}.log,
#   log/jobcomp.txt
# The node has two GPUs of type "ci" as a generic resource (GresTypes=gpu, Gres=gpu:ci:2),
# without GPU hardware: gres.conf names two character devices made here (mknod c 1 3, i.e.
# /dev/null's numbers; a bare Count= leaves the node INVALID).  A job with --gres=gpu:2
# gets them and sees CUDA_VISIBLE_DEVICES=0,1.
# Clients find the configuration through SLURM_CONF.  The script writes
#   $GAHP_SLURM_DIR/env      containing  `export SLURM_CONF=$GAHP_SLURM_DIR/slurm.conf`
# and prints that line on stdout.  The tests (tests/gahp_lrms/conftest.py) use $SLURM_CONF when
# set, else /tmp/gahp-slurm/slurm.conf when it exists, else the system default.  /etc/slurm is
# left alone unless it has no slurm.conf, in which case a symlink to ours is added so that
# plain interactive use (sinfo, qsub, ...) works too; set GAHP_SLURM_NO_ETC=1 to skip that.
set -euo pipefail

DIR="${GAHP_SLURM_DIR:-/tmp/gahp-slurm}"
CONF="$DIR/slurm.conf"
WAIT_S="${GAHP_SLURM_WAIT:-60}"

log() { printf 'slurm-up: %s\n' "$*" >&2; }
# shellcheck source=.ci/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/daemons.sh"

die() {
    log "ERROR: $*"
    for f in "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" "$DIR/log/munged.out"; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 60 lines) =====\n' "$f" >&2
            tail -n 60 "$f" >&2 || true
        fi
    done
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    die "must run as root (it installs packages and starts slurmctld/slurmd)"
fi

# ---------------------------------------------------------------- install
need_install=0
for bin in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged /usr/bin/sinfo /usr/bin/qsub; do
    [ -x "$bin" ] || need_install=1
done
if [ "$need_install" -eq 1 ]; then
    log "installing slurm-wlm munge slurm-wlm-torque"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge slurm-wlm-torque >/dev/null ||
        die "apt-get install failed"
fi

export SLURM_CONF="$CONF"

slurm_up() {
    [ -f "$CONF" ] || return 1
    local state
    state="$(timeout 5 sinfo -h -o %T 2>/dev/null | head -n 1)" || return 1
    case "$state" in
    idle* | mix* | alloc* | completing*) return 0 ;;
    *) return 1 ;;
    esac
}

print_env() {
    printf 'export SLURM_CONF=%s\n' "$CONF" >"$DIR/env"
    if [ "${GAHP_SLURM_NO_ETC:-0}" != 1 ] && [ ! -e /etc/slurm/slurm.conf ]; then
        mkdir -p /etc/slurm
        ln -s "$CONF" /etc/slurm/slurm.conf
    fi
    cat "$DIR/env"
}

# ---------------------------------------------------------------- configuration
running=0
if pid_alive "$DIR/slurmctld.pid" && pid_alive "$DIR/slurmd.pid" && slurm_up; then
    running=1
fi

HOST="$(hostname -s)"
# At least 4 CPUs (config_overrides below lets slurmd accept more than the hardware has) so
# that a few short test jobs run side by side even on a 1-2 CPU CI machine.
CPUS="${GAHP_SLURM_CPUS:-$(nproc)}"
[ "$CPUS" -ge 4 ] || CPUS=4
MEM_MB="$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)"
REAL_MB=$((MEM_MB * 8 / 10)) # RealMemory above the real memory leaves the node INVAL
[ "$REAL_MB" -gt 100 ] || REAL_MB=100
if [ "$running" -eq 1 ]; then # keep the ports it listens on
    CTLD_PORT="$(sed -n 's/^SlurmctldPort=//p' "$CONF")"
    SLURMD_PORT="$(sed -n 's/^SlurmdPort=//p' "$CONF")"
else
    CTLD_PORT="$(pick_port "${GAHP_SLURMCTLD_PORT:-6817}")"
    SLURMD_PORT="$(pick_port "${GAHP_SLURMD_PORT:-6818}")"
    [ "$SLURMD_PORT" != "$CTLD_PORT" ] || SLURMD_PORT="$(pick_port $((CTLD_PORT + 1)))"
fi
GPU_TYPE=ci

mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/dev"
for i in 0 1; do # stand-ins for GPU devices: character devices with /dev/null's numbers
    dev="$DIR/dev/gpu$i"
    if [ -L "$dev" ] || { [ -e "$dev" ] && [ ! -c "$dev" ]; }; then rm -f "$dev"; fi
    [ -c "$dev" ] || mknod -m 0666 "$dev" c 1 3 || die "mknod $dev failed"
done
cat >"$DIR/gres.conf.new" <<EOF
# Written by gahp .ci/slurm-up.sh: two stand-in GPUs (no hardware).
Name=gpu Type=$GPU_TYPE File=$DIR/dev/gpu0
Name=gpu Type=$GPU_TYPE File=$DIR/dev/gpu1
EOF
# proctrack/pgid, not linuxproc: linuxproc cannot parse /proc/PID/stat when the program's
# name holds a space, loses the job's processes and drains the node ("Kill task failed").
# DefaultTime: a job without a time limit gets 30 minutes, so the backfill scheduler knows
# when the running jobs end; with none (unlimited), it keeps starting small jobs on a node a
# whole-node job waits for, which then waits as long as others keep submitting.
cat >"$CONF.new" <<EOF
# Written by gahp .ci/slurm-up.sh: single-node Slurm for tests.
ClusterName=gahpci
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$REAL_MB Gres=gpu:$GPU_TYPE:2 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE DefaultTime=00:30:00 State=UP
EOF

if [ "$running" -eq 1 ] && cmp -s "$CONF.new" "$CONF" &&
    cmp -s "$DIR/gres.conf.new" "$DIR/gres.conf"; then
    rm -f "$CONF.new" "$DIR/gres.conf.new"
    log "already running"
    print_env
    exit 0
fi
# A fresh start clears the state (-c); a restart for a new configuration keeps the jobs.
CLEAR=-c
if [ "$running" -eq 1 ]; then
    log "running with another configuration: restarting with the new one (jobs kept)"
    CLEAR=
fi

# ---------------------------------------------------------------- stop our (stale) daemons
for name in slurmd slurmctld; do stop_daemon "$DIR/$name.pid"; done
mv "$DIR/gres.conf.new" "$DIR/gres.conf"
mv "$CONF.new" "$CONF"

# ---------------------------------------------------------------- munge
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then
        mungekey --create --keyfile=/etc/munge/munge.key --force
    else
        dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    fi
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged >"$DIR/log/munged.out" 2>&1 ||
        die "munged did not start"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
        sleep 0.1
    done
    munge -n | unmunge >/dev/null 2>&1 || die "munge does not work"
fi

# ---------------------------------------------------------------- slurm daemons
log "starting slurmctld (port $CTLD_PORT) and slurmd (port $SLURMD_PORT) on $HOST"
# shellcheck disable=SC2086 # $CLEAR is one option or none
/usr/sbin/slurmctld -f "$CONF" $CLEAR || die "slurmctld did not start"
/usr/sbin/slurmd -f "$CONF" || die "slurmd did not start"

deadline=$((SECONDS + WAIT_S))
until slurm_up; do
    if [ "$SECONDS" -ge "$deadline" ]; then
        log "sinfo says: $(timeout 5 sinfo -h -o '%T %E' 2>&1 || true)"
        die "node not idle after ${WAIT_S}s"
    fi
    sleep 0.5
done
log "up: $(timeout 5 sinfo -h -o '%P %T %D %N')"
print_env
