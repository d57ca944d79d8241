#!/usr/bin/env bash
# Start (or stop) the remote BLAH path on loopback: an access point that reaches a "cluster"
# account over SSH, as BOSCO and OSG's Hosted CEs do (grid_resource = batch <lrms> user@host).
#
# Usage (as root):   bash .ci/remote-up.sh          # start; prints the env file
#                    bash .ci/remote-up.sh --down   # stop the sshd and the condor_master
#
# Run after .ci/slurm-up.sh, .ci/pbs-up.sh and .ci/lsf-up.sh (the cluster account's login
# profile points at them).  Everything lives in $GAHP_REMOTE_DIR (default /tmp/gahp-remote):
# * release/: the pool prefix htcondor-25.0.13-pool-debian12-x86_64.tar.xz of
#   ${GAHP_SHARED:-<checkout>/../shared}/htcondor-pool (remote_gahp, condor_remote_cluster,
#   condor_ssh_start, condor_ft-gahp); its runtime packages, openssh-server and rsync are
#   apt-get installed when missing.
# * sshd/: an sshd on 127.0.0.1 on a free port (keys only, AllowUsers the cluster account).
# * Two users: the submitter $GAHP_REMOTE_SUBMITTER (default gahpsub) runs a personal
#   HTCondor (MASTER, SCHEDD; config condor_config, local/), and the cluster account
#   $GAHP_REMOTE_USER (default gahprc), whose ~/.bash_profile sets SLURM_CONF, LSF_ENVDIR and
#   PATH as a cluster's login environment would.
# * As the cluster account: a venv from Debian's /usr/bin/python3 in ~/gahp-venv with a copy of
#   this checkout ('.[blah]'; reinstalled when the checkout changes).
# * As the submitter: condor_remote_cluster -u file://<the shared tarball> -a
#   gahprc@127.0.0.1:<port> slurm (the C blahp and condor_ft-gahp into ~gahprc/bosco/glite),
#   then, over ssh, `blahpd install-remote` (our blahpd in its place; the C one kept as
#   bin/blahpd.orig).
# It writes $GAHP_REMOTE_DIR/env (tests/remote read it) and prints it.  Idempotent: when all
# answers it only prints the env again.
set -euo pipefail

log() { printf 'remote-up: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    for f in "${DIR:-/nonexistent}"/local/log/{MasterLog,SchedLog} "${DIR:-/nonexistent}"/sshd/sshd.log; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
            tail -n 30 "$f" >&2 || true
        fi
    done
    exit 1
}

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$CHECKOUT/../shared}/htcondor-pool"
DIR="${GAHP_REMOTE_DIR:-/tmp/gahp-remote}"
SUBMITTER="${GAHP_REMOTE_SUBMITTER:-gahpsub}"
RUSER="${GAHP_REMOTE_USER:-gahprc}"
VERSION=25.0.13
REL="$DIR/release"
TARBALL="$SHARED/condor-$VERSION-x86_64_Debian12-stripped.tar.gz"
export CONDOR_CONFIG="$DIR/condor_config"

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages and creates users)"

pid_of() { # pidfile comm -> the pid when that process runs
    local pid
    pid="$(cat "$1" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    grep -q "$2" "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 100); do [ -d "/proc/$1" ] || return 0; sleep 0.2; done
    kill -KILL "$1" 2>/dev/null || true
}

if [ "${1:-}" = "--down" ]; then
    if pid="$(pid_of "$DIR/local/run/master.pid" condor_master)"; then
        log "stopping condor_master (pid $pid)"
        stop_pid "$pid"
    fi
    if pid="$(pid_of "$DIR/sshd/sshd.pid" sshd)"; then
        log "stopping sshd (pid $pid)"
        stop_pid "$pid"
    fi
    exit 0
fi

as() { # user command...: run as that user, in their home, with a clean login-less environment
    local user="$1" home
    shift
    home="$(getent passwd "$user" | cut -d: -f6)"
    (cd "$home" && runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" \
        PATH="$REL/bin:$REL/sbin:/usr/local/bin:/usr/bin:/bin" CONDOR_CONFIG="$CONDOR_CONFIG" "$@")
}
answers() {
    [ -x "$REL/bin/condor_q" ] && id "$SUBMITTER" >/dev/null 2>&1 || return 1
    as "$SUBMITTER" timeout 20 condor_q -totals >/dev/null 2>&1
}
ssh_ok() { # the submitter reaches the cluster account with its key, nothing on stdout
    [ -f "$DIR/env" ] || return 1
    local port out
    port="$(sed -n 's/^GAHP_REMOTE_PORT=//p' "$DIR/env")"
    out="$(as "$SUBMITTER" timeout 30 ssh -p "$port" -o BatchMode=yes "$RUSER@127.0.0.1" \
        /bin/bash -l -c "'bosco/glite/bin/blahpd install-remote --help >/dev/null && echo ok'" \
        2>/dev/null)" || return 1
    [ "$out" = ok ]
}
if answers && ssh_ok && [ "$(cat "$DIR/.stamp" 2>/dev/null)" = "$(cd "$CHECKOUT" && git rev-parse HEAD 2>/dev/null)" ]; then
    log "the remote path already answers"
    cat "$DIR/env"
    exit 0
fi

# ---------------------------------------------------------------- packages + prefix
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    local policy=/usr/sbin/policy-rc.d had_policy=0
    [ -e "$policy" ] && had_policy=1
    [ "$had_policy" = 1 ] || printf '#!/bin/sh\nexit 101\n' >"$policy" # no service starts
    chmod 755 "$policy"
    local ok=1
    for _ in $(seq 30); do # another apt-get may hold the lock (the other scripts run beside)
        if apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1; then ok=0; break; fi
        sleep 5
        apt-get update -q >/dev/null 2>&1 || true
    done
    [ "$had_policy" = 1 ] || rm -f "$policy"
    return "$ok"
}
[ -f "$SHARED/htcondor-$VERSION-pool-debian12-x86_64.tar.xz" ] || die "no bundle in $SHARED (set GAHP_SHARED)"
[ -f "$TARBALL" ] || die "no remote-install tarball $TARBALL"
mkdir -p "$DIR"
chmod 755 "$DIR"
if [ ! -x "$REL/sbin/remote_gahp" ]; then
    log "unpacking the pool prefix"
    rm -rf "$REL" "$DIR/unpack"
    mkdir -p "$DIR/unpack"
    tar -xJf "$SHARED/htcondor-$VERSION-pool-debian12-x86_64.tar.xz" -C "$DIR/unpack"
    mv "$DIR/unpack/htcondor-$VERSION" "$REL"
    rmdir "$DIR/unpack"
fi
missing=()
mapfile -t deps < <(grep -v '^#' "$REL/RUNTIME-DEBIAN-PACKAGES.txt" | tr -s ' \t' '\n' | grep .)
for p in "${deps[@]}" openssh-server openssh-client rsync curl; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi

# ---------------------------------------------------------------- users + sshd
for u in "$SUBMITTER" "$RUSER"; do
    id "$u" >/dev/null 2>&1 || { log "creating user $u"; useradd --create-home --shell /bin/bash "$u"; }
done
usermod -p '*' "$RUSER" # a locked password ('!') makes sshd refuse even keys
SHOME="$(getent passwd "$SUBMITTER" | cut -d: -f6)"
RHOME="$(getent passwd "$RUSER" | cut -d: -f6)"

mkdir -p "$DIR/sshd" /run/sshd
chmod 755 "$DIR/sshd"
if pid="$(pid_of "$DIR/sshd/sshd.pid" sshd)"; then
    PORT="$(sed -n 's/^Port //p' "$DIR/sshd/sshd_config")"
else
    PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    [ -f "$DIR/sshd/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$DIR/sshd/host_ed25519"
    cat >"$DIR/sshd/sshd_config" <<EOF
# sshd of .ci/remote-up.sh: the "cluster" login node on loopback
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/sshd/host_ed25519
PidFile $DIR/sshd/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowUsers $RUSER
AllowTcpForwarding yes
PermitRootLogin no
MaxStartups 100:30:200
MaxSessions 100
EOF
    log "starting sshd on 127.0.0.1:$PORT"
    /usr/sbin/sshd -f "$DIR/sshd/sshd_config" -E "$DIR/sshd/sshd.log" || die "sshd did not start"
    for _ in $(seq 50); do pid_of "$DIR/sshd/sshd.pid" sshd >/dev/null && break; sleep 0.2; done
fi

# The submitter's key (no passphrase) in the cluster account's authorized_keys.
as "$SUBMITTER" mkdir -p "$SHOME/.ssh"
chmod 700 "$SHOME/.ssh"
[ -f "$SHOME/.ssh/id_ed25519" ] || as "$SUBMITTER" ssh-keygen -q -t ed25519 -N '' -f "$SHOME/.ssh/id_ed25519"
cat >"$SHOME/.ssh/config" <<EOF
Host 127.0.0.1
    Port $PORT
    StrictHostKeyChecking accept-new
    UserKnownHostsFile ~/.ssh/known_hosts_gahp_remote
EOF
chown "$SUBMITTER:" "$SHOME/.ssh/config"
chmod 600 "$SHOME/.ssh/config"
rm -f "$SHOME/.ssh/known_hosts_gahp_remote" # the host key may be new
as "$RUSER" mkdir -p "$RHOME/.ssh"
chmod 700 "$RHOME/.ssh"
touch "$RHOME/.ssh/authorized_keys"
grep -qF "$(cut -d' ' -f2 "$SHOME/.ssh/id_ed25519.pub")" "$RHOME/.ssh/authorized_keys" \
    || cat "$SHOME/.ssh/id_ed25519.pub" >>"$RHOME/.ssh/authorized_keys"
chown "$RUSER:" "$RHOME/.ssh/authorized_keys"
chmod 600 "$RHOME/.ssh/authorized_keys"

# The cluster account's login environment (quiet: remote_gahp runs `bash -l`).
env_value() { # file name -> the value of "export name=value" in file (empty when none)
    [ -f "$1" ] && sed -n "s/^\(export \)\{0,1\}$2=//p" "$1" | tail -n 1 | tr -d "'\""
}
PBS_BIN_DIR="$(env_value "${GAHP_PBS_DIR:-/tmp/gahp-pbs}/env" GAHP_PBS_BIN_DIR || true)"
PBS_CONF_VALUE="$(env_value "${GAHP_PBS_DIR:-/tmp/gahp-pbs}/env" PBS_CONF_FILE || true)"
LSF_ENVDIR_VALUE="$(env_value "${GAHP_LSF_DIR:-/tmp/gahp-lsf}/env" LSF_ENVDIR || true)"
LSF_BINDIR_VALUE=""
[ -n "$LSF_ENVDIR_VALUE" ] && LSF_BINDIR_VALUE="$(env_value "$LSF_ENVDIR_VALUE/lsf.conf" LSF_BINDIR || true)"
{
    echo "# the cluster's login environment (written by .ci/remote-up.sh); nothing on stdout"
    echo "export SLURM_CONF=${SLURM_CONF:-${GAHP_SLURM_DIR:-/tmp/gahp-slurm}/slurm.conf}"
    [ -n "$PBS_CONF_VALUE" ] && echo "export PBS_CONF_FILE=$PBS_CONF_VALUE"
    [ -n "$LSF_ENVDIR_VALUE" ] && echo "export LSF_ENVDIR=$LSF_ENVDIR_VALUE"
    echo "PATH=${PBS_BIN_DIR:+$PBS_BIN_DIR:}${LSF_BINDIR_VALUE:+$LSF_BINDIR_VALUE:}\$PATH"
    echo "export PATH"
} >"$RHOME/.bash_profile"
chown "$RUSER:" "$RHOME/.bash_profile"

# ---------------------------------------------------------------- the project, as the user would
STAMP="$(cd "$CHECKOUT" && git rev-parse HEAD 2>/dev/null || date +%s)"
if [ ! -x "$RHOME/gahp-venv/bin/blahpd" ] || [ "$(cat "$RHOME/gahp-venv/.gahp-checkout" 2>/dev/null)" != "$STAMP" ]; then
    log "installing the project into $RHOME/gahp-venv (a copy of $CHECKOUT at $STAMP)"
    rm -rf "$RHOME/gahp-src" "$RHOME/gahp-venv"
    as "$RUSER" mkdir -p "$RHOME/gahp-src"
    (cd "$CHECKOUT" && git ls-files -z --cached --others --exclude-standard \
        | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | as "$RUSER" tar -xf - -C "$RHOME/gahp-src"
    as "$RUSER" /usr/bin/python3 -m venv "$RHOME/gahp-venv"
    (cd "$RHOME" && as "$RUSER" env PIP_DISABLE_PIP_VERSION_CHECK=1 "$RHOME/gahp-venv/bin/pip" \
        install -q "$RHOME/gahp-src[blah]") >"$DIR/pip.log" 2>&1 \
        || { tail -n 20 "$DIR/pip.log" >&2; die "pip install as $RUSER failed"; }
    echo "$STAMP" | as "$RUSER" tee "$RHOME/gahp-venv/.gahp-checkout" >/dev/null
fi

# ---------------------------------------------------------------- the submitter's HTCondor
mkdir -p "$DIR/local"/{log,spool,execute,lock,run}
CPORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$CONDOR_CONFIG" <<EOF
# Personal HTCondor $VERSION, the access point of the remote BLAH path (written by .ci/remote-up.sh)
RELEASE_DIR = $REL
LOCAL_DIR = $DIR/local
BIN = \$(RELEASE_DIR)/bin
SBIN = \$(RELEASE_DIR)/sbin
LIB = \$(RELEASE_DIR)/lib
LIBEXEC = \$(RELEASE_DIR)/libexec
LOG = \$(LOCAL_DIR)/log
SPOOL = \$(LOCAL_DIR)/spool
EXECUTE = \$(LOCAL_DIR)/execute
LOCK = \$(LOCAL_DIR)/lock
RUN = \$(LOCAL_DIR)/run
LOCAL_CONFIG_FILE =

CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:$CPORT
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
USE_SHARED_PORT = False
ENABLE_IPV6 = False
DAEMON_LIST = MASTER, SCHEDD
START = False
UID_DOMAIN = localhost
FILESYSTEM_DOMAIN = localhost
CONDOR_IDS = $(id -u "$SUBMITTER").$(id -g "$SUBMITTER")
SEC_DEFAULT_AUTHENTICATION_METHODS = FS
SEC_CLIENT_AUTHENTICATION_METHODS = FS
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_ADMINISTRATOR = *
ALLOW_DAEMON = *
ALLOW_OWNER = *
ALLOW_CONFIG = *
ALLOW_NEGOTIATOR = *
MAIL = /bin/true

GRIDMANAGER = \$(SBIN)/condor_gridmanager
REMOTE_GAHP = \$(SBIN)/remote_gahp
GRIDMANAGER_DEBUG = D_FULLDEBUG
MAX_GRIDMANAGER_LOG = 200000000
MAX_NUM_GRIDMANAGER_LOG = 3

# fast turnaround for tests
GRIDMANAGER_JOB_PROBE_INTERVAL = 2
GRIDMANAGER_JOB_PROBE_RATE = 50
GRIDMANAGER_RESOURCE_PROBE_INTERVAL = 10
GRIDMANAGER_CONTACT_SCHEDD_DELAY = 1
GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE = 1000
SCHEDD_INTERVAL = 5
SCHEDD_MIN_INTERVAL = 1
JOB_IS_FINISHED_INTERVAL = 0
SCHEDD_DEBUG = D_ALWAYS
EOF
chmod 644 "$CONDOR_CONFIG"
chown -R "$SUBMITTER:" "$DIR/local"

if pid="$(pid_of "$DIR/local/run/master.pid" condor_master)"; then
    log "restarting condor_master (pid $pid) on the new configuration"
    stop_pid "$pid"
fi
log "starting condor_master as $SUBMITTER"
as "$SUBMITTER" condor_master -pidfile "$DIR/local/run/master.pid" || die "condor_master did not start"
deadline=$((SECONDS + 60))
until answers; do
    [ "$SECONDS" -lt "$deadline" ] || die "condor_q got no answer within 60 s"
    sleep 1
done

# ---------------------------------------------------------------- condor_remote_cluster + installer
RESOURCE="$RUSER@127.0.0.1:$PORT"
log "condor_remote_cluster -u file://$TARBALL -a $RESOURCE slurm"
(as "$SUBMITTER" condor_remote_cluster -u "file://$TARBALL" -a "$RESOURCE" slurm \
    </dev/null >"$DIR/remote_cluster.log" 2>&1) \
    || { tail -n 30 "$DIR/remote_cluster.log" >&2; die "condor_remote_cluster failed"; }
grep -q "Installation complete" "$DIR/remote_cluster.log" \
    || { tail -n 30 "$DIR/remote_cluster.log" >&2; die "condor_remote_cluster did not complete"; }
log "blahpd install-remote, over ssh as $RUSER"
as "$SUBMITTER" ssh -p "$PORT" -o BatchMode=yes "$RUSER@127.0.0.1" \
    /bin/bash -l -c "'gahp-venv/bin/blahpd install-remote'" >"$DIR/install-remote.log" 2>&1 \
    || { cat "$DIR/install-remote.log" >&2; die "blahpd install-remote failed (see above)"; }
cat "$DIR/install-remote.log" >&2
echo "$STAMP" >"$DIR/.stamp"

cat >"$DIR/env" <<EOF
CONDOR_CONFIG=$CONDOR_CONFIG
PATH=$REL/bin:$REL/sbin:\$PATH
GAHP_HTCONDOR_VERSION=$VERSION
GAHP_HTCONDOR_DIR=$DIR
GAHP_HTCONDOR_BIN=$REL/bin
GAHP_HTCONDOR_USER=$SUBMITTER
GAHP_HTCONDOR_LOG=$DIR/local/log
GAHP_REMOTE_USER=$RUSER
GAHP_REMOTE_HOME=$RHOME
GAHP_REMOTE_PORT=$PORT
GAHP_REMOTE_RESOURCE=$RESOURCE
GAHP_REMOTE_GLITE=$RHOME/bosco/glite
GAHP_REMOTE_SSHD_PID=$DIR/sshd/sshd.pid
EOF
chmod 644 "$DIR/env"
log "the remote path answers: grid_resource = batch slurm|pbs|lsf $RESOURCE"
cat "$DIR/env"
