#!/usr/bin/env bash
# Unpack (if missing) and start the single-host volclava (LSF-compatible) cluster for gahp's
# tests of the lsf driver.
#
# Usage (as root, no systemd needed):   bash .ci/lsf-up.sh
#
# The bundle is ${GAHP_SHARED:-<checkout>/../shared}/lsf/volclava-*.tar.xz (see the README
# beside it); it is checked against its .sha256 file when there is one and unpacked into
# $GAHP_LSF_PREFIX (default /opt, giving /opt/volclava) when <prefix>/volclava is missing.
# The prefix must be traversable by every user (job owners read the configuration there).
#
# The default queue "normal" is made to accept exclusive jobs (EXCLUSIVE = Y, for `bsub -x`).
# When the cluster already runs and its host is "ok", it is left as it is (other users'
# jobs keep running; a changed lsb.queues is read with `badmin reconfig`); otherwise `start.sh --clean` starts it afresh (job ids from 1, in
# about 3 s).  Then a trivial job is run as $GAHP_LSF_USER (default gahplsf, created when
# missing: LSF refuses root's jobs) to prove that jobs run.
#
# Writes $GAHP_LSF_DIR/env (default /tmp/gahp-lsf/env) with `export LSF_ENVDIR=...` and
# prints it on stdout.  GAHP_LSF_START=0: unpack only.
set -euo pipefail

CHECKOUT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SHARED="${GAHP_SHARED:-$CHECKOUT/../shared}"
PREFIX="${GAHP_LSF_PREFIX:-/opt}"
DIR="${GAHP_LSF_DIR:-/tmp/gahp-lsf}"
JOB_USER="${GAHP_LSF_USER:-gahplsf}"
WAIT_S="${GAHP_LSF_WAIT:-60}"
TOP="$PREFIX/volclava"

log() { printf 'lsf-up: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    for f in "$TOP"/log/*.log.*; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
            tail -n 30 "$f" >&2 || true
        fi
    done
    exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (it starts the LSF daemons)"

# ---------------------------------------------------------------- unpack
if [ ! -x "$TOP/start.sh" ]; then
    shopt -s nullglob
    bundles=("$SHARED"/lsf/volclava-*.tar.xz)
    shopt -u nullglob
    [ "${#bundles[@]}" -eq 1 ] ||
        die "expected one bundle $SHARED/lsf/volclava-*.tar.xz, found ${#bundles[@]} (set GAHP_SHARED)"
    bundle="${bundles[0]}"
    if [ -f "$bundle.sha256" ]; then
        want="$(awk '{ print $1; exit }' "$bundle.sha256")"
        got="$(sha256sum "$bundle" | awk '{ print $1 }')"
        [ "$want" = "$got" ] || die "$bundle: sha256 $got, expected $want"
    fi
    log "unpacking $(basename "$bundle") into $PREFIX"
    mkdir -p "$PREFIX"
    tmp="$(mktemp -d "$PREFIX/.volclava-unpack.XXXXXX")"
    trap 'rm -rf "$tmp"' EXIT
    tar -C "$tmp" -xJf "$bundle" || die "cannot unpack $bundle"
    [ -x "$tmp/volclava/start.sh" ] || die "$bundle has no volclava/start.sh"
    chmod 755 "$tmp"/volclava
    mv "$tmp/volclava" "$TOP"
    rm -rf "$tmp"
    trap - EXIT
fi

print_env() {
    mkdir -p "$DIR"
    chmod 755 "$DIR"
    printf 'export LSF_ENVDIR=%s\n' "$TOP/etc" >"$DIR/env"
    cat "$DIR/env"
}

if [ "${GAHP_LSF_START:-1}" = 0 ]; then
    print_env
    exit 0
fi

# ---------------------------------------------------------------- start
export LSF_ENVDIR="$TOP/etc"
HOST="$(getent hosts "$(hostname)" | awk '{ print $2; exit }')"
HOST="${HOST%%.*}"
lsf_ready() {
    [ -f "$TOP/etc/lsf.conf" ] &&
        timeout 20 "$TOP/bin/bhosts" 2>/dev/null |
        awk -v h="$HOST" '$1 == h && $2 == "ok" { f = 1 } END { exit !f }'
}
# The default queue accepts exclusive jobs (bsub -x: blahpd's whole-node requests); the cluster
# reads lsb.queues when it starts, or at `badmin reconfig` when it already runs.
queues_changed=0
QUEUES="$TOP/etc/lsb.queues"
if [ -f "$QUEUES" ] && ! grep -Eq '^[[:space:]]*EXCLUSIVE[[:space:]]*=[[:space:]]*Y' "$QUEUES"; then
    sed -i -E '/^[[:space:]]*QUEUE_NAME[[:space:]]*=[[:space:]]*normal[[:space:]]*$/a EXCLUSIVE    = Y' \
        "$QUEUES"
    grep -Eq '^EXCLUSIVE    = Y' "$QUEUES" || die "cannot allow exclusive jobs in $QUEUES"
    queues_changed=1
fi
if lsf_ready; then
    log "already running (host $HOST ok): left as it is"
    if [ "$queues_changed" -eq 1 ]; then
        log "reading the changed lsb.queues (badmin reconfig)"
        "$TOP/bin/badmin" reconfig -f >&2 || die "badmin reconfig failed"
    fi
else
    log "starting volclava ($TOP/start.sh --clean)"
    "$TOP/start.sh" --clean >&2 || die "start.sh --clean failed"
    lsf_ready || die "start.sh finished but bhosts does not show $HOST ok"
fi

# ---------------------------------------------------------------- a trivial job
if ! id "$JOB_USER" >/dev/null 2>&1; then
    log "creating the job owner $JOB_USER (LSF refuses root's jobs)"
    useradd --create-home --shell /bin/sh "$JOB_USER" || die "useradd $JOB_USER failed"
fi
out="$(cd / && runuser -u "$JOB_USER" -- "$TOP/bin/bsub" -o /dev/null -e /dev/null \
    -J gahp-lsf-up /bin/true 2>&1)" || die "bsub of a trivial job failed: $out"
jid="$(printf '%s\n' "$out" | sed -n 's/^Job <\([0-9]*\)> is submitted.*/\1/p')"
[ -n "$jid" ] || die "bsub printed no job id: $out"
deadline=$((SECONDS + WAIT_S))
until [ "$("$TOP/bin/bjobs" -a -o stat "$jid" 2>/dev/null | tail -n 1)" = DONE ]; do
    [ "$SECONDS" -lt "$deadline" ] || {
        log "bjobs -l $jid: $("$TOP/bin/bjobs" -l "$jid" 2>&1 || true)"
        die "the trivial job $jid was not DONE within ${WAIT_S}s"
    }
    sleep 0.5
done
log "up: host $HOST, first job $jid ran as $JOB_USER"
print_env
