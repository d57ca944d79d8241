#!/usr/bin/env bash
# Start (or stop) a personal HTCondor whose gridmanager drives this checkout's GAHPs.
#
# Usage (as root):   bash .ci/htcondor-up.sh VERSION          # 9.12.0 or 25.0.13
#                    bash .ci/htcondor-up.sh --down VERSION   # stop it (same as htcondor-down.sh)
#
# The prebuilt bundle htcondor-VERSION-debian12-x86_64.tar.xz is taken from
# ${GAHP_SHARED:-<checkout>/../shared}/htcondor and unpacked into $GAHP_HTCONDOR_DIR (default
# /tmp/gahp-htcondor-VERSION): release/ (bin, sbin, lib), local/ (log, spool, execute, lock,
# run), bin/ (our GAHP wrappers), condor_config, blahpd.toml, blah-state/ and env.
#
# * Its RUNTIME-DEPS packages are apt-get installed when missing.
# * Jobs belong to an unprivileged user, $GAHP_HTCONDOR_USER (default gahpjob; created when
#   missing): condor_master runs as that user, so the schedd, the gridmanager and every GAHP do.
# * The GAHPs run from a venv made with Debian's /usr/bin/python3 ($GAHP_VENV, default
#   /opt/gahp-venv; root's pyenv python under /root is not executable by other users), with this
#   checkout ('.[blah]') installed editable when the job owner can read it, else copied (then
#   re-installed when HEAD changes).  Both versions share it (made under a lock).
# * Wrappers bin/blahpd and bin/boinc-gahp add --log (local/log/<gahp>.log) and, for blahpd,
#   --config (state_dir blah-state/, the batch systems' settings); they set SLURM_CONF, SGE_*
#   (from /tmp/gahp-sge/env when present), PBS_CONF_FILE and LSF_ENVDIR (from /tmp/gahp-pbs/env
#   and /tmp/gahp-lsf/env: run .ci/pbs-up.sh and .ci/lsf-up.sh first for batch pbs/lsf on the
#   real OpenPBS and LSF; without them batch pbs is Slurm's Torque-style wrappers) and never
#   write to stdout themselves.  With /tmp/gahp-htcondor-pool/env (run .ci/htcondor-pool-up.sh
#   first), blahpd's condor driver is pointed at that pool's collector (`batch condor`).
#   A file bin/<gahp>.log-path, when present, names another log file (tests use it).
# * 9.12.0: BOINC_GAHP (grid type boinc) and BATCH_GAHP; 25.0.13: BATCH_GAHP only.  BOINC_GAHP
#   would also capture `batch boinc` jobs, so blahpd's boinc driver is reachable on 25.0 only.
# * Loopback only, no collector or negotiator, fast polling (GRIDMANAGER_JOB_PROBE_INTERVAL 2 s,
#   SCHEDD_INTERVAL 5 s), GRIDMANAGER_DEBUG = D_FULLDEBUG (local/log/GridmanagerLog.<user>).
#
# It waits until condor_q answers, then writes $DIR/env (CONDOR_CONFIG, PATH, the owner, ...),
# which tests/htcondor reads, and prints it.  Idempotent: when that HTCondor answers it only
# prints the env again.
set -euo pipefail

log() { printf 'htcondor-up: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    for f in "${DIR:-/nonexistent}"/local/log/{MasterLog,SchedLog}; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
            tail -n 30 "$f" >&2 || true
        fi
    done
    exit 1
}

DOWN=0
if [ "${1:-}" = "--down" ]; then DOWN=1; shift; fi
VERSION="${1:-}"
case "$VERSION" in
    9.12.0 | 25.0.13) ;;
    *) die "usage: $0 [--down] 9.12.0|25.0.13" ;;
esac

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$CHECKOUT/../shared}/htcondor"
DIR="${GAHP_HTCONDOR_DIR:-/tmp/gahp-htcondor-$VERSION}"
OWNER="${GAHP_HTCONDOR_USER:-gahpjob}"
VENV="${GAHP_VENV:-/opt/gahp-venv}"
WAIT_S="${GAHP_HTCONDOR_WAIT:-60}"
REL="$DIR/release"
export CONDOR_CONFIG="$DIR/condor_config"

[ "$(id -u)" -eq 0 ] || die "must run as root (it installs packages and creates $OWNER)"

as_owner() { runuser -u "$OWNER" -- env CONDOR_CONFIG="$CONDOR_CONFIG" "$@"; }

master_pid() { # the condor_master of this instance, from its pid file
    local pid
    pid="$(cat "$DIR/local/run/master.pid" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    grep -q condor_master "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

answers() { # 0 when this instance's schedd answers condor_q
    [ -x "$REL/bin/condor_q" ] && id "$OWNER" >/dev/null 2>&1 || return 1
    timeout 20 runuser -u "$OWNER" -- env CONDOR_CONFIG="$CONDOR_CONFIG" \
        "$REL/bin/condor_q" -totals >/dev/null 2>&1
}

if [ "$DOWN" = 1 ]; then
    if pid="$(master_pid)"; then
        log "stopping condor_master (pid $pid) of $VERSION"
        kill -TERM "$pid" || true
        for _ in $(seq 150); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        if [ -d "/proc/$pid" ]; then kill -QUIT "$pid" 2>/dev/null || true; fi
    else
        log "no condor_master of $VERSION is running"
    fi
    exit 0
fi

if answers && [ -f "$DIR/env" ]; then
    log "HTCondor $VERSION already answers"
    # a pool brought up since (.ci/htcondor-pool-up.sh): blahpds started from now on use it
    pool_collector="$(sed -n 's/^GAHP_HTCONDOR_POOL_COLLECTOR=//p' \
        "${GAHP_HTCONDOR_POOL_DIR:-/tmp/gahp-htcondor-pool}/env" 2>/dev/null | tail -n 1)"
    if [ -n "$pool_collector" ] && [ -f "$DIR/blahpd.toml" ] \
        && ! grep -q '^\[driver\.condor\]' "$DIR/blahpd.toml"; then
        log "pointing blahpd's condor driver at the pool ($pool_collector)"
        printf '\n[driver.condor]\ncollector = "%s"\n' "$pool_collector" >>"$DIR/blahpd.toml"
    fi
    cat "$DIR/env"
    exit 0
fi

# ---------------------------------------------------------------- unpack + packages
TARBALL="$SHARED/htcondor-$VERSION-debian12-x86_64.tar.xz"
[ -f "$TARBALL" ] || die "no bundle $TARBALL (set GAHP_SHARED)"
if pid="$(master_pid)"; then
    log "a condor_master (pid $pid) of $VERSION runs but does not answer: stopping it"
    kill -TERM "$pid" || true
    sleep 3
    kill -KILL "$pid" 2>/dev/null || true
fi
mkdir -p "$DIR"
if [ ! -x "$REL/sbin/condor_master" ]; then
    log "unpacking $TARBALL"
    rm -rf "$REL" "$DIR/unpack"
    mkdir -p "$DIR/unpack"
    tar -xJf "$TARBALL" -C "$DIR/unpack"
    mv "$DIR/unpack/htcondor-$VERSION" "$REL"
    rmdir "$DIR/unpack"
fi
chmod 755 "$DIR"

missing=()
read -ra deps < <(grep -A5 'packages needed' "$REL/RUNTIME-DEPS" | sed -n 2p)
for p in "${deps[@]}"; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$p")
done
apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    for _ in $(seq 30); do # another apt-get may hold the lock (the other scripts run beside)
        if apt-get install -y -q --no-install-recommends "$@" >/dev/null 2>&1; then return 0; fi
        sleep 5
        apt-get update -q >/dev/null 2>&1 || true
    done
    return 1
}
if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
fi

# ---------------------------------------------------------------- owner + venv
if ! id "$OWNER" >/dev/null 2>&1; then
    log "creating user $OWNER"
    useradd --create-home --shell /bin/bash "$OWNER"
fi

mkdir -p "$(dirname "$VENV")"
# Editable when the job owner can read the checkout, else a copy (stamped with the commit).
if runuser -u "$OWNER" -- test -r "$CHECKOUT/gahp_core/__init__.py"; then
    PIP_MODE=(-e)
    STAMP="$CHECKOUT editable"
else
    PIP_MODE=()
    STAMP="$CHECKOUT copy $(git -C "$CHECKOUT" rev-parse HEAD 2>/dev/null || date +%s)"
fi
(
    flock 9
    if [ ! -x "$VENV/bin/blahpd" ] || [ ! -x "$VENV/bin/boinc-gahp" ] \
        || ! "$VENV/bin/python" -c 'import classad2, gahp_blah, httptools' 2>/dev/null \
        || [ "$(cat "$VENV/.gahp-checkout" 2>/dev/null)" != "$STAMP" ]; then
        if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
            log "installing python3-venv"
            apt_install python3 python3-venv || die "apt-get install python3-venv failed"
        fi
        log "making the venv $VENV (Debian's python3) with ${PIP_MODE[*]} $CHECKOUT[blah]"
        rm -rf "$VENV"
        /usr/bin/python3 -m venv "$VENV"
        PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
            "$VENV/bin/pip" install -q "${PIP_MODE[@]}" "$CHECKOUT[blah]" >"$VENV.pip.log" 2>&1 \
            || { tail -n 20 "$VENV.pip.log" >&2; die "pip install into $VENV failed"; }
        echo "$STAMP" >"$VENV/.gahp-checkout"
    fi
    chmod -R a+rX "$VENV"
) 9>"$VENV.lock"

# ---------------------------------------------------------------- wrappers + config
mkdir -p "$DIR/bin" "$DIR/local"/{log,spool,execute,lock,run} "$DIR/blah-state"
SLURM_CONF_FILE="${SLURM_CONF:-${GAHP_SLURM_DIR:-/tmp/gahp-slurm}/slurm.conf}"
SGE_ENV_FILE="${GAHP_SGE_DIR:-/tmp/gahp-sge}/env"
PBS_ENV_FILE="${GAHP_PBS_DIR:-/tmp/gahp-pbs}/env"
LSF_ENV_FILE="${GAHP_LSF_DIR:-/tmp/gahp-lsf}/env"
POOL_ENV_FILE="${GAHP_HTCONDOR_POOL_DIR:-/tmp/gahp-htcondor-pool}/env"
env_value() { # file name -> the value of "export name=value" in file (empty when none)
    [ -f "$1" ] && sed -n "s/^\(export \)\{0,1\}$2=//p" "$1" | tail -n 1 | tr -d "'\""
}
PBS_BIN_DIR="$(env_value "$PBS_ENV_FILE" GAHP_PBS_BIN_DIR || true)"
PBS_CONF_VALUE="$(env_value "$PBS_ENV_FILE" PBS_CONF_FILE || true)"
LSF_ENVDIR_VALUE="$(env_value "$LSF_ENV_FILE" LSF_ENVDIR || true)"
POOL_COLLECTOR="$(env_value "$POOL_ENV_FILE" GAHP_HTCONDOR_POOL_COLLECTOR || true)"

write_wrapper() { # name program extra-args...
    local name="$1" prog="$2"
    shift 2
    cat >"$DIR/bin/$name" <<EOF
#!/bin/sh
# $name for HTCondor $VERSION (written by .ci/htcondor-up.sh); nothing here writes to stdout.
export SLURM_CONF="$SLURM_CONF_FILE"
if [ -f "$SGE_ENV_FILE" ]; then
    eval "\$(grep -E '^(export )?SGE_(ROOT|CELL|QMASTER_PORT|EXECD_PORT|ARCH)=' '$SGE_ENV_FILE')"
    export SGE_ROOT SGE_CELL SGE_QMASTER_PORT SGE_EXECD_PORT 2>/dev/null
fi
if [ -n "$PBS_CONF_VALUE" ]; then export PBS_CONF_FILE="$PBS_CONF_VALUE"; fi
if [ -n "$LSF_ENVDIR_VALUE" ]; then export LSF_ENVDIR="$LSF_ENVDIR_VALUE"; fi
log="$DIR/local/log/$name.log"
if [ -f "$DIR/bin/$name.log-path" ]; then log="\$(cat "$DIR/bin/$name.log-path")"; fi
exec "$VENV/bin/$prog" --log "\$log" $* "\$@"
EOF
    chmod 755 "$DIR/bin/$name"
}
write_wrapper blahpd blahpd --config "$DIR/blahpd.toml"
write_wrapper boinc-gahp boinc-gahp

cat >"$DIR/blahpd.toml" <<EOF
# blahpd for HTCondor $VERSION (written by .ci/htcondor-up.sh)
state_dir = "$DIR/blah-state"

[driver.slurm]
slurm_conf = "$SLURM_CONF_FILE"

EOF
if [ -n "$PBS_BIN_DIR" ]; then # the real OpenPBS of .ci/pbs-up.sh
    printf '\n[driver.pbs]\nbin_dir = "%s"\n' "$PBS_BIN_DIR" >>"$DIR/blahpd.toml"
else # Slurm's Torque-style wrappers
    printf '\n[driver.pbs]\nslurm_conf = "%s"\n' "$SLURM_CONF_FILE" >>"$DIR/blahpd.toml"
fi
if [ -n "$LSF_ENVDIR_VALUE" ]; then # the LSF of .ci/lsf-up.sh
    printf '\n[driver.lsf]\nlsf_envdir = "%s"\n' "$LSF_ENVDIR_VALUE" >>"$DIR/blahpd.toml"
fi
if [ -n "$POOL_COLLECTOR" ]; then # the pool of .ci/htcondor-pool-up.sh, as a remote pool
    printf '\n[driver.condor]\ncollector = "%s"\n' "$POOL_COLLECTOR" >>"$DIR/blahpd.toml"
fi

# A collector port of its own per version (nothing listens there: the tools use the schedd's
# address file).
case "$VERSION" in 9.*) CPORT=19618 ;; *) CPORT=19625 ;; esac
GAHP_KNOBS="BATCH_GAHP = $DIR/bin/blahpd"
case "$VERSION" in 9.*) GAHP_KNOBS="$GAHP_KNOBS
BOINC_GAHP = $DIR/bin/boinc-gahp" ;; esac

cat >"$CONDOR_CONFIG" <<EOF
# Personal HTCondor $VERSION for gahp's tests (written by .ci/htcondor-up.sh)
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

CONDOR_HOST = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:$CPORT
NETWORK_INTERFACE = 127.0.0.1
BIND_ALL_INTERFACES = False
USE_SHARED_PORT = False
DAEMON_LIST = MASTER, SCHEDD
START = False
UID_DOMAIN = localhost
FILESYSTEM_DOMAIN = localhost
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
$GAHP_KNOBS
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

chown -R "$OWNER:" "$DIR/local" "$DIR/blah-state"
chmod 644 "$CONDOR_CONFIG" "$DIR/blahpd.toml"

# ---------------------------------------------------------------- start
log "starting condor_master $VERSION as $OWNER"
as_owner "$REL/sbin/condor_master" -pidfile "$DIR/local/run/master.pid" || die "condor_master did not start"
deadline=$((SECONDS + WAIT_S))
until answers; do
    [ "$SECONDS" -lt "$deadline" ] || die "condor_q got no answer within ${WAIT_S}s"
    sleep 1
done

cat >"$DIR/env" <<EOF
CONDOR_CONFIG=$CONDOR_CONFIG
PATH=$REL/bin:$REL/sbin:\$PATH
GAHP_HTCONDOR_VERSION=$VERSION
GAHP_HTCONDOR_DIR=$DIR
GAHP_HTCONDOR_BIN=$REL/bin
GAHP_HTCONDOR_USER=$OWNER
GAHP_HTCONDOR_LOG=$DIR/local/log
GAHP_HTCONDOR_VENV=$VENV
EOF
chmod 644 "$DIR/env"
log "HTCondor $VERSION answers (config $CONDOR_CONFIG)"
cat "$DIR/env"
