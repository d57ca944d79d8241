#!/usr/bin/env bash
# Give the running Grid Engine cell of .ci/sge-up.sh two stand-in GPUs (no hardware): a
# consumable complex `gpu` (the one the C blahp asks for with `-l gpu=N`) and
# complex_values gpu=2 on every execution host.  Idempotent, and it touches no job.  Run by
# .ci/sge-up.sh; usable alone (as root) on a cell that is up.
set -euo pipefail

log() { printf 'sge-gpus: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

DIR="${GAHP_SGE_DIR:-/tmp/gahp-sge}"
[ -f "$DIR/env" ] || die "no $DIR/env (run .ci/sge-up.sh)"
# shellcheck disable=SC1091
. "$DIR/env"
command -v qconf >/dev/null || die "no qconf in PATH"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
qconf -sc >"$tmp/complexes" || die "qconf -sc failed"
if ! awk '$1 == "gpu" { found = 1 } END { exit !found }' "$tmp/complexes"; then
    printf 'gpu gpu INT <= YES YES 0 0\n' >>"$tmp/complexes"
    qconf -Mc "$tmp/complexes" >/dev/null || die "cannot add the gpu complex"
fi
for host in $(qconf -sel); do
    if ! qconf -se "$host" | grep -Eq '^complex_values.*\bgpu=2\b'; then
        qconf -mattr exechost complex_values gpu=2 "$host" >/dev/null 2>&1 ||
            qconf -aattr exechost complex_values gpu=2 "$host" >/dev/null ||
            die "cannot set gpu=2 on $host"
    fi
    log "host $host has complex_values gpu=2"
done
