#!/usr/bin/env bash
# Give the running OpenPBS's node two stand-in GPUs (no hardware): a consumable host resource
# `ngpus` (OpenPBS has none built in), resources_available.ngpus=2 on the node, and `ngpus`
# among the resources the scheduler counts (sched_config, then SIGHUP).  Idempotent, and it
# touches no job.  Run by .ci/pbs-up.sh; usable alone (as root) on a PBS that is up.
set -euo pipefail

log() { printf 'pbs-gpus: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

export PBS_CONF_FILE="${PBS_CONF_FILE:-/etc/pbs.conf}"
# shellcheck disable=SC1090 # PBS_EXEC, PBS_HOME
. "$PBS_CONF_FILE"
BIN="${PBS_EXEC:-/opt/pbs}/bin"
HOME_DIR="${PBS_HOME:-/var/spool/pbs}"

"$BIN/qmgr" -c 'list resource ngpus' >/dev/null 2>&1 ||
    "$BIN/qmgr" -c 'create resource ngpus type=long, flag=nh' || die "cannot create ngpus"
node="$("$BIN/pbsnodes" -a | awk 'NF && !/^[[:space:]]/ { print; exit }')"
[ -n "$node" ] || die "no PBS node"
"$BIN/qmgr" -c "set node $node resources_available.ngpus = 2" || die "cannot set ngpus"

config="$HOME_DIR/sched_priv/sched_config"
if ! grep -Eq '^resources:.*\bngpus\b' "$config"; then
    sed -i -E 's/^(resources: *"[^"]*)"/\1, ngpus"/' "$config"
    grep -Eq '^resources:.*\bngpus\b' "$config" || die "cannot add ngpus to $config"
    lock="$HOME_DIR/sched_priv/sched.lock"
    if [ -s "$lock" ] && kill -0 "$(cat "$lock")" 2>/dev/null; then
        kill -HUP "$(cat "$lock")"
    fi
fi
log "node $node has resources_available.ngpus=2"
