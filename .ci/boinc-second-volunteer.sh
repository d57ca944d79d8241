#!/usr/bin/env bash
# A second volunteer for the real BOINC test project (.ci/boinc-server-up.sh calls this;
# idempotent, run as root), so that a job with a quorum of 2 can complete: BOINC sends one
# instance of a job to a host, and the bundle's client is one host.
#
# Debian's boinc client again (as user boinc), data dir $CLIENT2_DIR, GUI RPC on
# 127.0.0.1:$GUI_RPC_PORT2 only, 1 CPU, attached as the project's second account (a host of
# the first account on this machine would be merged with the first client's by its CPID), and
# a nudger that asks the project for work every 10 s; the project's config.xml gets
# <one_result_per_user_per_wu> so that the two instances go to the two volunteers. Pids in
# $CLIENT2_DIR/client.pid and nudge.pid; --down stops both.
set -euo pipefail

PROJECT_URL="${GAHP_BOINC_PROJECT_URL:-http://127.0.0.1/boinctest/}"
VOLUNTEER_AUTH="${GAHP_BOINC_NOSUBMIT_AUTH:-4e3c00646d82f0ead4124bc6743e2ea2}"
PROJECT_DIR="${GAHP_BOINC_PROJECT_DIR:-/tmp/boinc-projects/boinctest}"
CLIENT2_DIR="${CLIENT2_DIR:-/tmp/boinc-client-2}"
GUI_RPC_PORT2="${GUI_RPC_PORT2:-31426}"
GUI_RPC_PASSWD2="gahptest2"
NUDGE_SECONDS=10

log() { printf 'boinc-second-volunteer: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
bcmd() { boinccmd --host "localhost:$GUI_RPC_PORT2" --passwd "$GUI_RPC_PASSWD2" "$@"; }

if [ "${1:-}" = "--down" ]; then
    for p in nudge client; do
        if alive "$CLIENT2_DIR/$p.pid"; then kill "$(cat "$CLIENT2_DIR/$p.pid")"; fi
        rm -f "$CLIENT2_DIR/$p.pid"
    done
    exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root"
command -v boinc >/dev/null && command -v boinccmd >/dev/null || die "no boinc client installed"
start=$(date +%s)
# BOINC would send both instances of a replicated job to one host by default; projects that
# replicate forbid it (the scheduler reads config.xml at each request: no restart needed).
# Jobs of one instance (the other tests') are not affected.
CONFIG="$PROJECT_DIR/config.xml"
[ -f "$CONFIG" ] || die "no $CONFIG"
if ! grep -q "<one_result_per_user_per_wu>1<" "$CONFIG"; then
    if grep -q "<one_result_per_user_per_wu>" "$CONFIG"; then
        sed -i 's|<one_result_per_user_per_wu>[^<]*<|<one_result_per_user_per_wu>1<|' "$CONFIG"
    else
        sed -i '0,/<config>/s//<config>\n        <one_result_per_user_per_wu>1<\/one_result_per_user_per_wu>/' "$CONFIG"
    fi
    grep -q "<one_result_per_user_per_wu>1<" "$CONFIG" || die "could not set one_result_per_user_per_wu"
fi
install -d -o boinc -g boinc -m 0750 "$CLIENT2_DIR"
printf '%s' "$GUI_RPC_PASSWD2" >"$CLIENT2_DIR/gui_rpc_auth.cfg"
cat >"$CLIENT2_DIR/cc_config.xml" <<'EOF'
<cc_config>
  <options>
    <ncpus>1</ncpus>
    <allow_remote_gui_rpc>0</allow_remote_gui_rpc>
  </options>
</cc_config>
EOF
cat >"$CLIENT2_DIR/global_prefs_override.xml" <<'EOF'
<global_preferences>
   <run_if_user_active>1</run_if_user_active>
   <idle_time_to_run>0</idle_time_to_run>
   <suspend_cpu_usage>0</suspend_cpu_usage>
   <cpu_usage_limit>100</cpu_usage_limit>
   <max_ncpus_pct>100</max_ncpus_pct>
   <work_buf_min_days>0</work_buf_min_days>
   <work_buf_additional_days>0</work_buf_additional_days>
   <disk_min_free_gb>0.1</disk_min_free_gb>
</global_preferences>
EOF
chown boinc:boinc "$CLIENT2_DIR"/gui_rpc_auth.cfg "$CLIENT2_DIR"/cc_config.xml \
    "$CLIENT2_DIR"/global_prefs_override.xml
chmod 640 "$CLIENT2_DIR/gui_rpc_auth.cfg"

if alive "$CLIENT2_DIR/client.pid"; then
    log "client: running (pid $(cat "$CLIENT2_DIR/client.pid"))"
else
    if ss -ltn 2>/dev/null | grep -q "127.0.0.1:$GUI_RPC_PORT2 "; then
        die "port $GUI_RPC_PORT2 is taken by another program (set GUI_RPC_PORT2)"
    fi
    setsid nohup setpriv --reuid boinc --regid boinc --init-groups -- \
        /usr/bin/boinc --dir "$CLIENT2_DIR" --gui_rpc_port "$GUI_RPC_PORT2" --skip_cpu_benchmarks \
        >>"$CLIENT2_DIR/client.out" 2>&1 </dev/null &
    echo $! >"$CLIENT2_DIR/client.pid"
fi
for _ in $(seq 30); do bcmd --get_cc_status >/dev/null 2>&1 && break; sleep 1; done
bcmd --get_cc_status >/dev/null 2>&1 || die "client GUI RPC not answering (see $CLIENT2_DIR/client.out)"
bcmd --set_run_mode always >/dev/null
bcmd --set_network_mode always >/dev/null
bcmd --read_global_prefs_override >/dev/null
if ! bcmd --get_project_status | grep -qF "master URL: $PROJECT_URL"; then
    bcmd --project_attach "$PROJECT_URL" "$VOLUNTEER_AUTH"
    for _ in $(seq 30); do bcmd --get_project_status | grep -qF "master URL: $PROJECT_URL" && break; sleep 1; done
    bcmd --get_project_status | grep -qF "master URL: $PROJECT_URL" || die "not attached to $PROJECT_URL"
fi
if ! alive "$CLIENT2_DIR/nudge.pid"; then
    setsid nohup bash -c "while :; do boinccmd --host localhost:$GUI_RPC_PORT2 --passwd '$GUI_RPC_PASSWD2' --project '$PROJECT_URL' update >/dev/null 2>&1; sleep $NUDGE_SECONDS; done" \
        >/dev/null 2>&1 </dev/null &
    echo $! >"$CLIENT2_DIR/nudge.pid"
fi
log "second volunteer attached to $PROJECT_URL in $(( $(date +%s) - start )) s"
