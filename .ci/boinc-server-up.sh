#!/usr/bin/env bash
# Bring up the REAL BOINC 8.3 project server (the prebuilt bundle in the shared directory) for
# gahp's tests/boinc_real, and write the env file those tests read.
#
# Usage (as root, Debian 12 x86_64):   bash .ci/boinc-server-up.sh
#
# Unpacks ${GAHP_SHARED:-<checkout>/../shared}/boinc-server/boinc-server-*.tar.xz into
# $GAHP_BOINC_DIR (default /tmp/gahp-boinc-server), runs the bundle's setup.sh (MariaDB,
# Apache+PHP on 127.0.0.1:80, project http://127.0.0.1/boinctest/, a volunteer client), waits
# until the project answers a ping RPC, then writes $GAHP_BOINC_DIR/env (shell syntax,
# `export NAME=value` lines) and prints it.  Idempotent: when the env file exists and the
# project answers, it only prints the env file again.  Stop with .ci/boinc-server-down.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SHARED="${GAHP_SHARED:-$HERE/../../shared}"
DIR="${GAHP_BOINC_DIR:-/tmp/gahp-boinc-server}"
WAIT_S="${GAHP_BOINC_WAIT:-120}"
ENV_FILE="$DIR/env"
BUNDLE="$DIR/boinc-server-bundle"

# Facts of the bundle's project (its README); setup.sh creates them.
PROJECT_URL="http://127.0.0.1/boinctest/"
SUBMIT_AUTH="d6de1d4cf42b72fe456a5bdb0e18d162"
NOSUBMIT_AUTH="4e3c00646d82f0ead4124bc6743e2ea2"
PROJECT_DIR="${PROJECTS_DIR:-/tmp/boinc-projects}/boinctest"
C_GAHP="${GAHP_DEST:-/tmp/anchors/boinc_gahp}"

log() { printf 'boinc-server-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

project_answers() {
    curl -sS --max-time 10 --data-urlencode 'request=<ping> </ping>' "${PROJECT_URL}submit_rpc_handler.php" \
        2>/dev/null | grep -q '<success>1</success>'
}

# Jobs an earlier run left unfinished are cancelled and the daemons restarted: they hold the one
# volunteer CPU, and a job no app version fits (an app_version_num the project lacks) blocks
# every job of its app on BOINC's scheduler, whose per-request version cache then answers "no
# app version" for the rest; the feeder keeps such a job in shared memory until it restarts.
clear_leftovers() {
    local ids n
    ids=$(mysql -N -B -h127.0.0.1 -uboincadm -pboincpw boinctest -e \
        "SELECT DISTINCT w.id FROM workunit w JOIN result r ON r.workunitid=w.id
         WHERE r.server_state IN (2,4) AND (w.error_mask & 16)=0" 2>/dev/null) || {
        log "WARNING: cannot read the project database to clear leftover jobs"; return 0; }
    n=$(printf '%s\n' "$ids" | grep -c . || true)
    [ "$n" -gt 0 ] || return 0
    log "cancelling $n job(s) left unfinished by an earlier run; restarting the project's daemons"
    for id in $ids; do
        ( cd "$PROJECT_DIR" && runuser -u www-data -- bin/cancel_jobs "$id" "$id" ) >/dev/null 2>&1 \
            || log "WARNING: bin/cancel_jobs $id failed"
    done
    ( cd "$PROJECT_DIR" && runuser -u www-data -- bin/stop && runuser -u www-data -- bin/start ) \
        >/dev/null 2>&1 || log "WARNING: restarting the project's daemons failed"
}

extra_apps() {
    # the batch-collect app `collect` and the gzipped-output app `gzworker` (idempotent)
    PROJECTS_DIR="$(dirname "$PROJECT_DIR")" bash "$HERE/boinc-extra-apps.sh" "$PROJECT_DIR" \
        || die "adding the extra apps failed"
    # a second volunteer host, so that a job with a quorum of 2 completes (about 1 s)
    GAHP_BOINC_PROJECT_DIR="$PROJECT_DIR" GAHP_BOINC_PROJECT_URL="$PROJECT_URL" \
        GAHP_BOINC_NOSUBMIT_AUTH="$NOSUBMIT_AUTH" bash "$HERE/boinc-second-volunteer.sh" \
        || die "starting the second volunteer failed"
    grep -q GAHP_BOINC_COLLECT_APP "$ENV_FILE" 2>/dev/null || cat >>"$ENV_FILE" <<ENV
export GAHP_BOINC_COLLECT_APP=collect
export GAHP_BOINC_GZIP_APP=gzworker
ENV
}

if [ -f "$ENV_FILE" ] && project_answers; then
    clear_leftovers
    extra_apps
    log "project $PROJECT_URL answers; env in $ENV_FILE"
    cat "$ENV_FILE"
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (setup.sh installs packages and starts services)"
command -v curl >/dev/null || {
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq curl >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq curl; }
}

shopt -s nullglob
tarballs=("$SHARED"/boinc-server/boinc-server-*.tar.xz)
shopt -u nullglob
[ "${#tarballs[@]}" -ge 1 ] || die "no bundle in $SHARED/boinc-server (set GAHP_SHARED)"
mkdir -p "$DIR"
if [ ! -x "$BUNDLE/setup.sh" ] || [ "${tarballs[0]}" -nt "$BUNDLE/setup.sh" ]; then
    log "unpacking ${tarballs[0]} into $DIR"
    tar -xJf "${tarballs[0]}" -C "$DIR"
    touch "$BUNDLE/setup.sh"
fi

log "running $BUNDLE/setup.sh (log: $DIR/setup.log)"
start=$(date +%s)
if ! GAHP_DEST="$C_GAHP" "$BUNDLE/setup.sh" >"$DIR/setup.log" 2>&1; then
    tail -n 40 "$DIR/setup.log" >&2
    die "setup.sh failed"
fi
log "setup.sh done in $(( $(date +%s) - start )) s"

deadline=$(( $(date +%s) + WAIT_S ))
until project_answers; do
    [ "$(date +%s)" -lt "$deadline" ] || die "project $PROJECT_URL does not answer after ${WAIT_S} s"
    sleep 1
done

tmp="$ENV_FILE.tmp.$$"
cat >"$tmp" <<ENV
export GAHP_BOINC_PROJECT_URL=$PROJECT_URL
export GAHP_BOINC_AUTH=$SUBMIT_AUTH
export GAHP_BOINC_NOSUBMIT_AUTH=$NOSUBMIT_AUTH
export GAHP_BOINC_APP=worker
export GAHP_BOINC_DB_HOST=127.0.0.1
export GAHP_BOINC_DB_NAME=boinctest
export GAHP_BOINC_DB_USER=boincadm
export GAHP_BOINC_DB_PASSWORD=boincpw
export GAHP_BOINC_PROJECT_DIR=$PROJECT_DIR
export GAHP_BOINC_C_GAHP=$C_GAHP
export GAHP_BOINC_ACCESS_LOG=/var/log/apache2/access.log
export GAHP_BOINC_BUNDLE=$BUNDLE
ENV
mv "$tmp" "$ENV_FILE"
clear_leftovers
extra_apps
log "project $PROJECT_URL up; env in $ENV_FILE"
cat "$ENV_FILE"
