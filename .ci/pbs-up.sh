#!/usr/bin/env bash
# Start (or stop) the real OpenPBS of the shared bundle for the tests: a one-host PBS with job
# history on, root's jobs allowed (the driver tests run as root; HTCondor's jobs come from
# its unprivileged owner).
#
# Usage (as root):  bash .ci/pbs-up.sh            # start; idempotent
#                   bash .ci/pbs-up.sh --down     # stop, keeping PBS_HOME
#
# The bundle's scripts are taken from ${GAHP_SHARED:-<checkout>/../shared}/openpbs.  It writes
# /tmp/gahp-pbs/env (PBS_CONF_FILE and GAHP_PBS_BIN_DIR), which tests/ and .ci/htcondor-up.sh
# read, and prints it.  Jobs left by an earlier run are deleted, so that PBS's only node is free.
set -euo pipefail

log() { printf 'pbs-up: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$CHECKOUT/../shared}/openpbs"
OUT="${GAHP_PBS_DIR:-/tmp/gahp-pbs}"
[ "$(id -u)" -eq 0 ] || die "must run as root"
[ -f "$SHARED/pbs-up.sh" ] || die "no $SHARED/pbs-up.sh (set GAHP_SHARED)"

if [ "${1:-}" = "--down" ]; then
    bash "$SHARED/pbs-down.sh"
    exit 0
fi

PBS_ALLOW_ROOT_JOBS=1 bash "$SHARED/pbs-up.sh" >"$OUT.up.log" 2>&1 || {
    tail -n 40 "$OUT.up.log" >&2
    die "the shared pbs-up.sh failed (log above)"
}
export PBS_CONF_FILE=/etc/pbs.conf
BIN=/opt/pbs/bin
"$BIN/qstat" -B >/dev/null || die "qstat -B does not answer"
[ "$("$BIN/qmgr" -c 'list server job_history_enable' | awk '/job_history_enable/ {print $3}')" = True ] \
    || die "job history is not on"

# Two stand-in GPUs (ngpus), for the GPU requests' tests.
bash "$CHECKOUT/.ci/pbs-gpus.sh" || die "pbs-gpus.sh failed"

# Jobs an earlier run left queued or running would hold the only node.
mapfile -t stale < <("$BIN/qselect" -s QRHSWTE 2>/dev/null || true)
if [ "${#stale[@]}" -gt 0 ]; then
    log "deleting ${#stale[@]} job(s) left by an earlier run"
    "$BIN/qdel" -W force "${stale[@]}" >/dev/null 2>&1 || true
fi

mkdir -p "$OUT"
cat >"$OUT/env" <<ENV
export PBS_CONF_FILE=$PBS_CONF_FILE
export GAHP_PBS_BIN_DIR=$BIN
ENV
chmod 644 "$OUT/env"
log "OpenPBS is up ($("$BIN/qstat" --version 2>&1 | tr -d '\n'))"
cat "$OUT/env"
