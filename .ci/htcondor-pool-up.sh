#!/usr/bin/env bash
# Start (or stop) a one-machine HTCondor 25.0.13 pool (collector, negotiator, schedd, startd)
# on loopback, the batch system behind blahpd's `condor` driver in the tests and CI.
#
# Usage:   bash .ci/htcondor-pool-up.sh          # start it (idempotent)
#          bash .ci/htcondor-pool-up.sh --down   # stop it
#
# The prebuilt bundle htcondor-25.0.13-pool-debian12-x86_64.tar.xz is taken from
# ${GAHP_SHARED:-<checkout>/../shared}/htcondor-pool and unpacked into $GAHP_HTCONDOR_POOL_DIR
# (default /tmp/gahp-htcondor-pool): release/ (bin, sbin, lib), local/ (log, spool, execute,
# lock, run), condor_config and env.
#
# * The pool belongs to an ordinary user, $GAHP_HTCONDOR_POOL_USER (default gahpjob, the owner
#   of .ci/htcondor-up.sh's personal HTCondor, whose blahpd submits here; created when missing):
#   CONDOR_IDS is that user's uid.gid, condor_master runs as that user, and so does every job
#   (a non-root pool cannot switch users).  Run as root, or as that user.
# * Loopback only, no shared port; the collector on a free port from 29718 (kept across runs);
#   one partitionable slot of 4 CPUs, 4096 MB and 2 pretend GPUs (MACHINE_RESOURCE_GPUs: the
#   bundle has no condor_gpu_discovery, so STARTD_DETECT_GPUS is off); FS authentication.
# * Fast turnaround: negotiation, schedd and update intervals of 5 s.
#
# It waits until the slot and the schedd are in the collector, then writes $DIR/env
# (CONDOR_CONFIG, PATH, GAHP_HTCONDOR_POOL_USER, GAHP_HTCONDOR_POOL_COLLECTOR, ...), which
# tests/gahp_lrms and tests/htcondor read, and prints it.
set -euo pipefail

log() { printf 'htcondor-pool-up: %s\n' "$*" >&2; }
# shellcheck source=.ci/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/daemons.sh"

VERSION=25.0.13
CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$CHECKOUT/../shared}/htcondor-pool"
DIR="${GAHP_HTCONDOR_POOL_DIR:-/tmp/gahp-htcondor-pool}"
OWNER="${GAHP_HTCONDOR_POOL_USER:-gahpjob}"
WAIT_S="${GAHP_HTCONDOR_POOL_WAIT:-90}"
REL="$DIR/release"
LOCAL="$DIR/local"
export CONDOR_CONFIG="$DIR/condor_config"

die() {
    log "ERROR: $*"
    for f in "$LOCAL"/log/{MasterLog,CollectorLog,SchedLog,StartLog,NegotiatorLog}; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
            tail -n 30 "$f" >&2 || true
        fi
    done
    exit 1
}

DOWN=0
if [ "${1:-}" = "--down" ]; then DOWN=1; shift; fi
[ $# -eq 0 ] || die "usage: $0 [--down]"

if [ "$(id -u)" -ne 0 ] && [ "$(id -un)" != "$OWNER" ]; then
    die "run as root or as $OWNER (GAHP_HTCONDOR_POOL_USER)"
fi
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u "$OWNER" -- env CONDOR_CONFIG="$CONDOR_CONFIG" "$@"
    else
        env CONDOR_CONFIG="$CONDOR_CONFIG" "$@"
    fi
}

master_pid() { # the condor_master of this pool, from its pid file
    local pid
    pid="$(cat "$LOCAL/run/master.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    grep -q condor_master "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

pool_up() { # 0 when the collector lists a slot with CPUs and the schedd
    [ -x "$REL/bin/condor_status" ] && [ -f "$CONDOR_CONFIG" ] || return 1
    local slots schedds
    slots="$(timeout 15 "$REL/bin/condor_status" -af Name 2>/dev/null)" || return 1
    schedds="$(timeout 15 "$REL/bin/condor_status" -schedd -af Name 2>/dev/null)" || return 1
    [ -n "$slots" ] && [ -n "$schedds" ]
}

stop_master() {
    local pid
    if pid="$(master_pid)"; then
        log "stopping condor_master (pid $pid)"
        kill -TERM "$pid" || true
        for _ in $(seq 150); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        if [ -d "/proc/$pid" ]; then kill -QUIT "$pid" 2>/dev/null || true; fi
    else
        log "no condor_master of the pool is running"
    fi
}

if [ "$DOWN" = 1 ]; then
    stop_master
    exit 0
fi

if master_pid >/dev/null && pool_up && [ -f "$DIR/env" ]; then
    log "the pool already answers"
    cat "$DIR/env"
    exit 0
fi

# ---------------------------------------------------------------- unpack + packages
TARBALL="$SHARED/htcondor-$VERSION-pool-debian12-x86_64.tar.xz"
[ -f "$TARBALL" ] || die "no bundle $TARBALL (set GAHP_SHARED)"
if master_pid >/dev/null; then
    log "a condor_master of the pool runs but the pool does not answer: restarting it"
    stop_master
fi
mkdir -p "$DIR"
chmod 755 "$DIR"
if [ ! -x "$REL/sbin/condor_master" ]; then
    log "unpacking $TARBALL"
    rm -rf "$REL" "$DIR/unpack"
    mkdir -p "$DIR/unpack"
    tar -xJf "$TARBALL" -C "$DIR/unpack"
    mv "$DIR/unpack/htcondor-$VERSION" "$REL"
    rmdir "$DIR/unpack"
fi

if [ "$(id -u)" -eq 0 ]; then
    missing=()
    while read -r p; do
        [ -n "$p" ] || continue
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done <"$REL/RUNTIME-DEBIAN-PACKAGES.txt"
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        ok=0
        for _ in $(seq 30); do # another apt-get may hold the lock
            if apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
                ok=1
                break
            fi
            sleep 5
            apt-get update -q >/dev/null 2>&1 || true
        done
        [ "$ok" = 1 ] || die "apt-get install ${missing[*]} failed"
    fi
    if ! id "$OWNER" >/dev/null 2>&1; then
        log "creating user $OWNER"
        useradd --create-home --shell /bin/bash "$OWNER"
    fi
fi

# ---------------------------------------------------------------- config
CPORT=""
if [ -f "$CONDOR_CONFIG" ]; then # keep the collector's port of an earlier run when free
    CPORT="$(sed -n 's/^COLLECTOR_HOST = 127\.0\.0\.1://p' "$CONDOR_CONFIG")"
fi
if [ -z "$CPORT" ] || port_taken "$CPORT"; then
    CPORT="$(pick_port "${GAHP_HTCONDOR_POOL_PORT:-29718}")"
fi
UID_GID="$(id -u "$OWNER").$(id -g "$OWNER")"

mkdir -p "$LOCAL"/{log,spool,execute,lock,run}
cat >"$CONDOR_CONFIG" <<EOF
# One-machine HTCondor $VERSION pool for gahp's tests (written by .ci/htcondor-pool-up.sh)
RELEASE_DIR = $REL
LOCAL_DIR = $LOCAL
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
LOCAL_CONFIG_DIR =

CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:$CPORT
COLLECTOR_NAME = gahp-ci-pool
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
USE_SHARED_PORT = False
ENABLE_IPV6 = False
DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD
UID_DOMAIN = localhost
FILESYSTEM_DOMAIN = localhost
MAIL = /bin/true
CONDOR_IDS = $UID_GID

# one partitionable slot: 4 CPUs, 4096 MB, 2 pretend GPUs
NUM_CPUS = 4
MEMORY = 4096
STARTD_DETECT_GPUS = false
MACHINE_RESOURCE_GPUs = 2
NUM_SLOTS_TYPE_1 = 1
SLOT_TYPE_1 = 100%
SLOT_TYPE_1_PARTITIONABLE = True
START = True
SUSPEND = False
PREEMPT = False
KILL = False
WANT_SUSPEND = False
WANT_VACATE = False

SEC_DEFAULT_AUTHENTICATION_METHODS = FS
SEC_CLIENT_AUTHENTICATION_METHODS = FS
ALLOW_READ = *
ALLOW_WRITE = *
ALLOW_DAEMON = *
ALLOW_ADMINISTRATOR = *
ALLOW_NEGOTIATOR = *
ALLOW_OWNER = *
ALLOW_CONFIG = *

# fast turnaround for tests
NEGOTIATOR_INTERVAL = 5
NEGOTIATOR_CYCLE_DELAY = 5
NEGOTIATOR_MIN_INTERVAL = 1
SCHEDD_INTERVAL = 5
SCHEDD_MIN_INTERVAL = 1
UPDATE_INTERVAL = 5
STARTER_UPDATE_INTERVAL = 5
SHADOW_QUEUE_UPDATE_INTERVAL = 5
PERIODIC_EXPR_INTERVAL = 5
JOB_IS_FINISHED_INTERVAL = 0
SCHEDD_DEBUG = D_ALWAYS
MAX_HISTORY_LOG = 200000000
EOF
chmod 644 "$CONDOR_CONFIG"
if [ "$(id -u)" -eq 0 ]; then chown -R "$OWNER:" "$LOCAL"; fi

# ---------------------------------------------------------------- start
log "starting condor_master $VERSION as $OWNER (collector 127.0.0.1:$CPORT)"
as_owner "$REL/sbin/condor_master" -pidfile "$LOCAL/run/master.pid" || die "condor_master did not start"
deadline=$((SECONDS + WAIT_S))
until pool_up; do
    [ "$SECONDS" -lt "$deadline" ] || die "no slot and schedd in the collector within ${WAIT_S}s"
    sleep 1
done

cat >"$DIR/env" <<EOF
CONDOR_CONFIG=$CONDOR_CONFIG
PATH=$REL/bin:$REL/sbin:\$PATH
GAHP_HTCONDOR_POOL_VERSION=$VERSION
GAHP_HTCONDOR_POOL_DIR=$DIR
GAHP_HTCONDOR_POOL_BIN=$REL/bin
GAHP_HTCONDOR_POOL_USER=$OWNER
GAHP_HTCONDOR_POOL_COLLECTOR=127.0.0.1:$CPORT
GAHP_HTCONDOR_POOL_LOG=$LOCAL/log
EOF
chmod 644 "$DIR/env"
log "the pool answers: $(timeout 15 "$REL/bin/condor_status" -af Name Cpus Memory GPUs | head -n 1)"
cat "$DIR/env"
