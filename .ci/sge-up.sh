#!/usr/bin/env bash
# Install (if missing), configure and start a single-host Son of Grid Engine for gahp's tests.
#
# Usage (as root, no systemd needed):   bash .ci/sge-up.sh
#
# Runs beside the Slurm of .ci/slurm-up.sh.  Debian's gridengine-client cannot be installed
# with slurm-wlm-torque (both ship /usr/bin/qsub), so no gridengine package is installed with
# dpkg: the four packages are fetched with `apt-get download` and unpacked with `dpkg-deb -x`
# into $GAHP_SGE_PREFIX (default /opt/gahp-sge); /usr/bin/qsub stays Slurm's.  Their shared
# library dependencies are installed with apt-get.  The one system path touched is the symlink
# /usr/lib/gridengine -> $GAHP_SGE_PREFIX/usr/lib/gridengine (only when /usr/lib/gridengine
# does not exist): Debian's sge_qmaster loads its spooling library from that fixed path.
#
# No package maintainer script runs: the cluster is made here, owned by root (admin_user
# root, no sgeadmin user needed), in $GAHP_SGE_DIR (default /tmp/gahp-sge), which is the
# SGE_ROOT: bin/, utilbin/, lib/, util/ are symlinks into the prefix, the cell
# ($GAHP_SGE_CELL, default "gahp") is $GAHP_SGE_DIR/<cell>, spool/ holds the daemons' spool
# directories and logs (spool/qmaster/messages, spool/execd/<host>/messages).  Classic
# spooling, min_uid/min_gid 0 (root may run jobs), 1 s scheduling, root is manager and
# operator, accounting on (flushed at once), queue all.q with >= 4 slots and the parallel
# environment "smp" ($pe_slots).  sge_qmaster and sge_execd are started directly, on free
# ports picked from 6444/6445.  Idempotent: when our cell answers it only prints the env again.
#
# The script writes $GAHP_SGE_DIR/env (SGE_ROOT, SGE_CELL, SGE_QMASTER_PORT, SGE_EXECD_PORT
# and a PATH addition) and prints it on stdout.  Source it only where Slurm's PBS `qsub`
# is not wanted: the SGE bin directory then comes first in PATH.
set -euo pipefail

PREFIX="${GAHP_SGE_PREFIX:-/opt/gahp-sge}"
DIR="${GAHP_SGE_DIR:-/tmp/gahp-sge}"
CELL="${GAHP_SGE_CELL:-gahp}"
WAIT_S="${GAHP_SGE_WAIT:-60}"
PKGS=(gridengine-common gridengine-client gridengine-master gridengine-exec)
LIBS=(libjemalloc2 libmunge2 libssl3 libtirpc3 libdb5.3 libhwloc15 libpam0g libcrypt1 libtinfo6)

log() { printf 'sge-up: %s\n' "$*" >&2; }
# shellcheck source=.ci/daemons.sh
. "$(dirname "${BASH_SOURCE[0]}")/daemons.sh"

die() {
    log "ERROR: $*"
    for f in "$DIR/spool/qmaster/messages" "$DIR"/spool/execd/*/messages \
        /tmp/qmaster_messages /tmp/execd_messages.*; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 40 lines) =====\n' "$f" >&2
            tail -n 40 "$f" >&2 || true
        fi
    done
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    die "must run as root (it installs packages and starts sge_qmaster/sge_execd)"
fi

# ---------------------------------------------------------------- install
LIBDIR="$PREFIX/usr/lib/gridengine"
if [ ! -x "$LIBDIR/sge_qmaster" ] || [ ! -x "$LIBDIR/sge_execd" ] || [ ! -x "$LIBDIR/qsub" ]; then
    export DEBIAN_FRONTEND=noninteractive
    missing=()
    for p in "${LIBS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    dl="$(mktemp -d)"
    trap 'rm -rf "$dl"' EXIT
    chmod 755 "$dl" # apt-get download fetches as the _apt user where it can
    fetch() { (cd "$dl" && apt-get download -qq "${PKGS[@]}") >"$dl/download.log" 2>&1; }
    updated=0
    if ! fetch; then
        apt-get update -qq >/dev/null || die "apt-get update failed"
        updated=1
        fetch || die "apt-get download ${PKGS[*]} failed: $(cat "$dl/download.log")"
    fi
    if [ "${#missing[@]}" -gt 0 ]; then
        log "installing libraries: ${missing[*]}"
        if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
            [ "$updated" -eq 0 ] && apt-get update -qq >/dev/null
            apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
                die "apt-get install ${missing[*]} failed"
        fi
    fi
    log "unpacking ${PKGS[*]} into $PREFIX (dpkg-deb -x: beside slurm-wlm-torque's qsub)"
    rm -rf "$PREFIX.new"
    mkdir -p "$PREFIX.new"
    for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$PREFIX.new" || die "dpkg-deb -x $deb failed"; done
    rm -rf "$PREFIX"
    mv "$PREFIX.new" "$PREFIX"
    rm -rf "$dl"
    trap - EXIT
fi
if [ ! -e /usr/lib/gridengine ]; then # missing, or a dangling symlink of an older prefix
    ln -sfn "$LIBDIR" /usr/lib/gridengine
fi
[ -f /usr/lib/gridengine/libspoolc.so ] ||
    die "/usr/lib/gridengine/libspoolc.so missing (sge_qmaster loads its spooling from there)"

ARCH="$(sh "$PREFIX/usr/share/gridengine/util/arch")"
export SGE_ROOT="$DIR" SGE_CELL="$CELL"
BIN="$DIR/bin/$ARCH"
COMMON="$DIR/$CELL/common"

print_env() {
    {
        printf 'export SGE_ROOT=%s\n' "$DIR"
        printf 'export SGE_CELL=%s\n' "$CELL"
        printf 'export SGE_QMASTER_PORT=%s\n' "$SGE_QMASTER_PORT"
        printf 'export SGE_EXECD_PORT=%s\n' "$SGE_EXECD_PORT"
        printf 'export PATH=%s:"$PATH"\n' "$BIN"
    } >"$DIR/env"
    cat "$DIR/env"
}

HOST="$(hostname -s)"
QPID="$DIR/spool/qmaster/qmaster.pid"
execd_pidfile() { # sge_execd names its spool directory after its own view of the host name
    local f
    for f in "$DIR"/spool/execd/*/execd.pid; do [ -f "$f" ] && echo "$f" && return; done
    echo "$DIR/spool/execd/$HOST/execd.pid"
}

sge_up() { # the exec host reports load and all.q accepts jobs
    timeout 5 "$BIN/qstat" -f -q all.q 2>/dev/null |
        awk '$1 ~ /^all\.q@/ && (NF == 5 || $6 !~ /[uadEcCs]/) { ok = 1 } END { exit !ok }'
}

if [ -f "$DIR/ports" ]; then
    # shellcheck disable=SC1091
    . "$DIR/ports"
    export SGE_QMASTER_PORT SGE_EXECD_PORT
    if pid_alive "$QPID" && pid_alive "$(execd_pidfile)" && sge_up; then
        log "already running"
        GAHP_SGE_DIR="$DIR" bash "$(dirname "${BASH_SOURCE[0]}")/sge-gpus.sh" || die "sge-gpus.sh failed"
        print_env
        exit 0
    fi
fi

# ---------------------------------------------------------------- stop our stale daemons
for pidfile in "$(execd_pidfile)" "$QPID"; do stop_daemon "$pidfile"; done

# ---------------------------------------------------------------- configuration
SGE_QMASTER_PORT="$(pick_port "${GAHP_SGE_QMASTER_PORT:-6444}")"
SGE_EXECD_PORT="$(pick_port "${GAHP_SGE_EXECD_PORT:-6445}")"
[ "$SGE_EXECD_PORT" != "$SGE_QMASTER_PORT" ] || SGE_EXECD_PORT="$(pick_port $((SGE_QMASTER_PORT + 1)))"
export SGE_QMASTER_PORT SGE_EXECD_PORT

SLOTS="$(nproc)"
[ "$SLOTS" -ge 4 ] || SLOTS=4

# A fresh cell every time (the spool of a stopped cell is not worth keeping for tests).
rm -rf "$DIR/$CELL" "$DIR/spool" "$DIR/bin" "$DIR/utilbin" "$DIR/lib" "$DIR/util"
mkdir -p "$DIR/bin" "$DIR/utilbin" "$DIR/lib" "$COMMON" "$DIR/spool/qmaster" \
    "$DIR/spool/execd" "$DIR/conf"
ln -s "$LIBDIR" "$DIR/bin/$ARCH"
ln -s "$LIBDIR" "$DIR/utilbin/$ARCH"
ln -s "$LIBDIR" "$DIR/lib/$ARCH"
ln -s "$PREFIX/usr/share/gridengine/util" "$DIR/util"
printf 'SGE_QMASTER_PORT=%s\nSGE_EXECD_PORT=%s\n' "$SGE_QMASTER_PORT" "$SGE_EXECD_PORT" \
    >"$DIR/ports"

cat >"$COMMON/bootstrap" <<EOF
# Written by gahp .ci/sge-up.sh
admin_user              root
default_domain          none
ignore_fqdn             true
spooling_method         classic
spooling_lib            libspoolc
spooling_params         $COMMON;$DIR/spool/qmaster
binary_path             $DIR/bin
qmaster_spool_dir       $DIR/spool/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
echo "$HOST" >"$COMMON/act_qmaster"
echo "gahp" >"$COMMON/cluster_name"
# Every name this host is known by (hostname, its FQDN, what 127.0.0.1 resolves back to)
# is the one host $HOST for Grid Engine.
aliases="$(
    {
        hostname -f 2>/dev/null || true
        getent hosts 127.0.0.1 | awk '{ for (i = 2; i <= NF; i++) print $i }'
        getent hosts "$HOST" | awk '{ for (i = 2; i <= NF; i++) print $i }'
        echo localhost
    } | sort -u | grep -vx -- "$HOST" | tr '\n' ' '
)"
echo "$HOST $aliases" >"$COMMON/host_aliases"

sed -e "s#^execd_spool_dir .*#execd_spool_dir        $DIR/spool/execd#" \
    -e 's#^mailer .*#mailer                 /bin/true#' \
    -e 's#^min_uid .*#min_uid                0#' \
    -e 's#^min_gid .*#min_gid                0#' \
    -e 's#^load_report_time .*#load_report_time       00:00:02#' \
    -e 's#^reporting_params .*#reporting_params       accounting=true reporting=false flush_time=00:00:01 joblog=false sharelog=00:00:00 accounting_flush_time=00:00:00#' \
    -e 's#^execd_params .*#execd_params           KEEP_ACTIVE=false#' \
    -e 's#^loglevel .*#loglevel               log_info#' \
    "$PREFIX/usr/share/gridengine/default-configuration" >"$DIR/conf/global"

SPOOL_ENV=(env "LD_LIBRARY_PATH=$LIBDIR" SGE_ROOT="$DIR" SGE_CELL="$CELL")
"${SPOOL_ENV[@]}" "$LIBDIR/spoolinit" classic libspoolc "$COMMON;$DIR/spool/qmaster" init \
    >/dev/null || die "spoolinit failed"
sd() { "${SPOOL_ENV[@]}" "$LIBDIR/spooldefaults.bin" "$@" >/dev/null || die "spooldefaults $1 failed"; }
sd configuration "$DIR/conf/global"
sd complexes "$PREFIX/usr/share/gridengine/util/resources/centry"
sd usersets "$PREFIX/usr/share/gridengine/util/resources/usersets"
sd managers root
sd operators root
{
    printf 'SGE_ROOT=%s; export SGE_ROOT\nSGE_CELL=%s; export SGE_CELL\n' "$DIR" "$CELL"
    printf 'SGE_QMASTER_PORT=%s; export SGE_QMASTER_PORT\n' "$SGE_QMASTER_PORT"
    printf 'SGE_EXECD_PORT=%s; export SGE_EXECD_PORT\n' "$SGE_EXECD_PORT"
    printf 'PATH=%s:$PATH; export PATH\n' "$BIN"
} >"$COMMON/settings.sh"

# ---------------------------------------------------------------- daemons
log "starting sge_qmaster (port $SGE_QMASTER_PORT) on $HOST"
"$BIN/sge_qmaster" || die "sge_qmaster did not start"
deadline=$((SECONDS + WAIT_S))
until timeout 5 "$BIN/qconf" -sh >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "sge_qmaster does not answer after ${WAIT_S}s"
    sleep 0.2
done

q() { "$BIN/qconf" "$@" >/dev/null 2>"$DIR/conf/qconf.err" ||
    die "qconf $* failed: $(cat "$DIR/conf/qconf.err")"; }
"$BIN/qconf" -sh 2>/dev/null | grep -qx "$HOST" || q -ah "$HOST"
q -as "$HOST"
sed -e 's#^schedule_interval .*#schedule_interval                0:0:1#' \
    -e 's#^flush_submit_sec .*#flush_submit_sec                 1#' \
    -e 's#^flush_finish_sec .*#flush_finish_sec                 1#' \
    -e 's#^schedd_job_info .*#schedd_job_info                  true#' \
    -e 's#^job_load_adjustments .*#job_load_adjustments             NONE#' \
    -e 's#^load_adjustment_decay_time .*#load_adjustment_decay_time       0:0:0#' \
    "$PREFIX/usr/share/gridengine/util/install_modules/inst_schedd_normal.conf" \
    >"$DIR/conf/sched"
q -Msconf "$DIR/conf/sched"
printf 'group_name @allhosts\nhostlist %s\n' "$HOST" >"$DIR/conf/allhosts"
q -Ahgrp "$DIR/conf/allhosts"
sed -e 's#^pe_name .*#pe_name            smp#' -e 's#^control_slaves .*#control_slaves     FALSE#' \
    "$PREFIX/usr/share/gridengine/util/resources/pe/smp" >"$DIR/conf/pe-smp"
q -Ap "$DIR/conf/pe-smp"
"$BIN/qconf" -sq >"$DIR/conf/all.q" 2>/dev/null || true # the queue template
[ -s "$DIR/conf/all.q" ] || die "qconf -sq printed no queue template"
sed -i -e 's#^qname .*#qname                 all.q#' \
    -e 's#^hostlist .*#hostlist              @allhosts#' \
    -e 's#^pe_list .*#pe_list               smp#' \
    -e "s#^slots .*#slots                 $SLOTS#" \
    -e 's#^shell .*#shell                 /bin/sh#' \
    -e 's#^load_thresholds .*#load_thresholds       NONE#' \
    -e 's#^suspend_thresholds .*#suspend_thresholds    NONE#' \
    "$DIR/conf/all.q"
q -Aq "$DIR/conf/all.q"

log "starting sge_execd (port $SGE_EXECD_PORT)"
"$BIN/sge_execd" || die "sge_execd did not start"
until sge_up; do
    [ "$SECONDS" -lt "$deadline" ] || {
        log "qstat -f: $(timeout 5 "$BIN/qstat" -f 2>&1 || true)"
        die "all.q@$HOST not available after ${WAIT_S}s"
    }
    sleep 0.2
done

# ---------------------------------------------------------------- a trivial job
out="$DIR/spool/first-job.out"
rm -f "$out"
jid="$("$BIN/qsub" -terse -b y -o "$out" -j y -N gahp-up /bin/echo ok 2>&1)" ||
    die "qsub of a trivial job failed: $jid"
until [ "$(cat "$out" 2>/dev/null)" = ok ]; do
    [ "$SECONDS" -lt "$deadline" ] || {
        log "qstat: $(timeout 5 "$BIN/qstat" -j "$jid" 2>&1 || true)"
        die "the trivial job $jid did not run within ${WAIT_S}s"
    }
    sleep 0.2
done
log "up: queue all.q@$HOST, $SLOTS slots, pe smp; first job $jid ran"
print_env
# Two stand-in GPUs (the gpu complex), for the GPU requests' tests (it reads $DIR/env).
GAHP_SGE_DIR="$DIR" bash "$(dirname "${BASH_SOURCE[0]}")/sge-gpus.sh" || die "sge-gpus.sh failed"
