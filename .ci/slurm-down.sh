#!/usr/bin/env bash
# Stop the Slurm daemons started by .ci/slurm-up.sh (by their pid files only; munged is left
# running, it may serve others).  GAHP_SLURM_PURGE=1 also removes $GAHP_SLURM_DIR.
set -euo pipefail

DIR="${GAHP_SLURM_DIR:-/tmp/gahp-slurm}"

alive() { [ -d "/proc/$1" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

for name in slurmd slurmctld; do
    pidfile="$DIR/$name.pid"
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if [ -n "$pid" ] && alive "$pid"; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then kill -9 "$pid" 2>/dev/null || true; fi
        printf 'slurm-down: stopped %s (pid %s)\n' "$name" "$pid" >&2
    fi
    rm -f "$pidfile"
done

if [ "${GAHP_SLURM_PURGE:-0}" = 1 ]; then
    if [ "$(readlink /etc/slurm/slurm.conf 2>/dev/null)" = "$DIR/slurm.conf" ]; then
        rm -f /etc/slurm/slurm.conf
    fi
    rm -rf "$DIR"
fi
