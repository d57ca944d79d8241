# Helpers shared by .ci/slurm-up.sh and .ci/sge-up.sh (sourced, not run).

pid_alive() { # pidfile -> 0 when that process exists and is not a zombie
    local pid
    [ -f "$1" ] || return 1
    pid="$(cat "$1" 2>/dev/null)" || return 1
    [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
    ! grep -q '^State:[[:space:]]*Z' "/proc/$pid/status" 2>/dev/null
}

stop_daemon() { # pidfile -> TERM, up to 5 s, then KILL
    local pidfile="$1" pid
    pid_alive "$pidfile" || return 0
    pid="$(cat "$pidfile")"
    log "stopping stale daemon (pid $pid)"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do pid_alive "$pidfile" || break; sleep 0.1; done
    if pid_alive "$pidfile"; then kill -9 "$pid" 2>/dev/null || true; fi
}

port_taken() { # port -> 0 when something listens on it (IPv4 or IPv6), from /proc
    local hex
    hex="$(printf '%04X' "$1")"
    local files=()
    for f in /proc/net/tcp /proc/net/tcp6; do [ -r "$f" ] && files+=("$f"); done
    [ "${#files[@]}" -gt 0 ] || return 1
    awk -v p=":$hex" 'FNR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 }
        END { exit !f }' "${files[@]}"
}

pick_port() { # preferred -> first free port from there
    local p="$1"
    while port_taken "$p"; do p=$((p + 10)); done
    echo "$p"
}
