#!/usr/bin/env bash
# Start (or stop) a loopback HTCondor-CE 25.0.1 whose job router hands `batch slurm`, `batch
# pbs` and `batch lsf` jobs to this checkout's blahpd, as a grid site runs it.
#
# Usage (as root):   bash .ci/htcondor-ce-up.sh          # start it (idempotent)
#                    bash .ci/htcondor-ce-up.sh --down   # stop it
#
# The CE is brought up by the shared recipe ${GAHP_SHARED:-<checkout>/../shared}/htcondor-ce/
# htcondor-ce-setup.sh (phases htcondor ce venv config, then start) in $GAHP_HTCONDOR_CE_DIR
# (default /tmp/gahp-htcondor-ce), in ROOT mode: the daemons run as a service user (cedaemon),
# the jobs belong to another user (ceuser1), and the gridmanager runs blahpd as the job owner.
# blahpd is this checkout's HEAD (the recipe installs `git archive HEAD` with the `htcondor`
# 25.0.13 wheel from PyPI into $DIR/venv).
#
# On top of the recipe (which keeps the Slurm route only):
# * three routes, chosen by the job's `+GahpLrms` attribute ("pbs", "lsf"; Slurm otherwise),
#   each the CE's own route for that batch system; PBS and LSF only when .ci/pbs-up.sh and
#   .ci/lsf-up.sh ran first (their env files name the commands' directories);
# * no blahpd.toml at all: blahpd reads a C-blahp-style blah.config, as a site that moved from
#   the C blahp keeps it: $DIR/blahp/etc/blah.config (Slurm and PBS: binpaths, exports,
#   pbs_pro; blah_libexec_directory) and blah.config.d/50-ci (LSF's lsf_confpath), root's,
#   mode 0644; BLAHPD_LOCATION = $DIR/blahp in the CE's configuration, which the gridmanager
#   puts in the GAHP's environment (as for a tarball install of the C blahp); the wrapper only
#   adds the per-user --log and --state-dir;
# * a site-script directory ($DIR/site-scripts, blah.config's blah_libexec_directory), empty:
#   tests put C-blahp-style <lrms>_local_submit_attributes.sh scripts there;
# * faster polling for tests (job router 2 s, gridmanager job probe 2 s, schedd interval 5 s);
# * ENABLE_JOB_RETRIES = True: a released job that had started is routed again (the CE's
#   default removes it, "disabled job retries").
#
# It waits until condor_ce_q answers as the job owner, then writes $DIR/env (the CE's bin
# directory and config, the users, the routes, the log directories), which tests/htcondor_ce
# reads, and prints it.
set -euo pipefail

log() { printf 'htcondor-ce-up: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    for f in "${DIR:-/nonexistent}"/local-root/log/{MasterLog,SchedLog,JobRouterLog}; do
        if [ -f "$f" ]; then
            printf '\n===== %s (last 30 lines) =====\n' "$f" >&2
            tail -n 30 "$f" >&2 || true
        fi
    done
    exit 1
}

DOWN=0
if [ "${1:-}" = "--down" ]; then DOWN=1; shift; fi
[ "$(id -u)" -eq 0 ] || die "run as root (the CE's daemons and its jobs belong to other users)"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SHARED="${GAHP_SHARED:-$ROOT/../shared}"
BUNDLE="$SHARED/htcondor-ce"
DIR="${GAHP_HTCONDOR_CE_DIR:-/tmp/gahp-htcondor-ce}"
RECIPE="$BUNDLE/htcondor-ce-setup.sh"
DAEMON_USER=cedaemon
JOB_USER=ceuser1
LOCAL="$DIR/local-root"
CE="$DIR/ce-root"

recipe() {
    WORK="$DIR" MODE=root DAEMON_USER="$DAEMON_USER" JOB_USER="$JOB_USER" PORT="${PORT:-19719}" \
        HTC_CE_BUNDLE="$BUNDLE/htcondor-25.0.13-ce-debian12-x86_64.tar.xz" \
        CE_TREE="$BUNDLE/htcondor-ce-25.0.1-tree.tar.xz" GAHP_SRC="$ROOT" \
        SLURM_CONF="$SLURM_CONF_FILE" bash "$RECIPE" "$@"
}
SLURM_CONF_FILE="${SLURM_CONF:-${GAHP_SLURM_DIR:-/tmp/gahp-slurm}/slurm.conf}"

master_alive() {
    local p
    p="$(cat "$LOCAL/run/master.pid" 2>/dev/null || true)"
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null
}

if [ "$DOWN" = 1 ]; then
    if master_alive; then
        p="$(cat "$LOCAL/run/master.pid")"
        kill -TERM "$p"
        for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
        kill -0 "$p" 2>/dev/null && { log "master $p still up after 60 s: killing"; kill -KILL "$p"; }
        log "stopped"
    fi
    # every daemon of the CE runs as the service user; nothing of it may outlive it
    pkill -u "$DAEMON_USER" -f "$DIR/" 2>/dev/null || true
    exit 0
fi

[ -f "$RECIPE" ] || die "no HTCondor-CE bundle at $BUNDLE (set GAHP_SHARED)"
if master_alive && [ -f "$DIR/env" ]; then
    cat "$DIR/env"
    exit 0
fi

# ---------------------------------------------------------------- the recipe's phases
mkdir -p "$DIR"
if [ -z "${PORT:-}" ]; then
    PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
fi
export PORT
recipe htcondor ce venv config >"$DIR/setup.log" 2>&1 || { tail -n 40 "$DIR/setup.log" >&2; die "the recipe failed"; }

# ---------------------------------------------------------------- PBS and LSF beside Slurm
env_value() { # file name -> the value of "export name=value" in file (empty when none)
    [ -f "$1" ] && sed -n "s/^\(export \)\{0,1\}$2=//p" "$1" | tail -n 1 | tr -d "'\""
}
PBS_ENV_FILE="${GAHP_PBS_DIR:-/tmp/gahp-pbs}/env"
LSF_ENV_FILE="${GAHP_LSF_DIR:-/tmp/gahp-lsf}/env"
PBS_BIN_DIR="$(env_value "$PBS_ENV_FILE" GAHP_PBS_BIN_DIR || true)"
PBS_CONF_VALUE="$(env_value "$PBS_ENV_FILE" PBS_CONF_FILE || true)"
LSF_ENVDIR_VALUE="$(env_value "$LSF_ENV_FILE" LSF_ENVDIR || true)"

VENV="$DIR/venv"
# the site's <lrms>_local_submit_attributes.sh scripts (root's, readable by the job owners)
mkdir -p "$DIR/site-scripts" && chmod 755 "$DIR/site-scripts"
cat >"$DIR/bin/blahpd-wrapper" <<EOF
#!/bin/sh
# BATCH_GAHP of the CI's HTCondor-CE (written by .ci/htcondor-ce-up.sh); runs as the job owner;
# nothing here writes to stdout. Its settings are blah.config's (found through BLAHPD_LOCATION).
exec "$VENV/bin/blahpd" --log "$DIR/blahlog/BlahpdLog.\$(id -un)" \\
    --state-dir "$DIR/blah-users/\$(id -un)" "\$@"
EOF
chmod 755 "$DIR/bin/blahpd-wrapper"

# ---------------------------------------------------------------- the site's blah.config
# no blahpd.toml anywhere (the recipe writes one): a TOML file in force means no blah.config
rm -f "$DIR/blahpd.toml"
BLAH_LOCATION="$DIR/blahp"
BLAH_CONFIG="$BLAH_LOCATION/etc/blah.config"
SBATCH="$(command -v sbatch)" || die "no sbatch on PATH (run .ci/slurm-up.sh first)"
rm -rf "$BLAH_LOCATION"
install -d -o root -g root -m 755 "$BLAH_LOCATION" "$BLAH_LOCATION/etc" "$BLAH_CONFIG.d"
{
    printf '# blah.config of the CI HTCondor-CE (written by .ci/htcondor-ce-up.sh), as a site\n'
    printf '# running the C blahp has it; blahpd reads it (there is no blahpd.toml).\n'
    printf 'supported_lrms=slurm,pbs,lsf\n'
    printf 'blah_libexec_directory=%s\n' "$DIR/site-scripts"
    printf '\n# Slurm\nslurm_binpath=%s\nexport SLURM_CONF=%s\n' "$(dirname "$SBATCH")" "$SLURM_CONF_FILE"
    if [ -n "$PBS_BIN_DIR" ]; then
        printf '\n# OpenPBS\npbs_binpath=%s\npbs_pro=yes\n' "$PBS_BIN_DIR"
        if [ -n "$PBS_CONF_VALUE" ]; then printf 'export PBS_CONF_FILE=%s\n' "$PBS_CONF_VALUE"; fi
    fi
} >"$BLAH_CONFIG.new"
install -o root -g root -m 644 "$BLAH_CONFIG.new" "$BLAH_CONFIG"
{
    printf '# LSF (volclava), from a blah.config.d file (written by .ci/htcondor-ce-up.sh)\n'
    if [ -n "$LSF_ENVDIR_VALUE" ]; then printf 'lsf_confpath=%s\n' "$LSF_ENVDIR_VALUE"; fi
} >"$BLAH_CONFIG.new"
install -o root -g root -m 644 "$BLAH_CONFIG.new" "$BLAH_CONFIG.d/50-ci"
rm -f "$BLAH_CONFIG.new"

ROUTES="Slurm_Cluster"
route() { # name lrms requirement
    printf 'JOB_ROUTER_ROUTE_%s @=jrt\n  REQUIREMENTS %s\n  TargetUniverse = 9\n  GridResource = "batch %s"\n@jrt\n\n' "$1" "$3" "$2"
}
{
    printf '# CI: a route per batch system, chosen by +GahpLrms (written by .ci/htcondor-ce-up.sh)\n'
    # the gridmanager puts BLAHPD_LOCATION in the GAHP's environment (its default, the
    # release directory, would be used otherwise); blahpd, like the C blahp, then reads
    # $BLAHPD_LOCATION/etc/blah.config
    printf 'BLAHPD_LOCATION = %s\n\n' "$BLAH_LOCATION"
    route Slurm_Cluster slurm '(GahpLrms ?: "slurm") == "slurm"'
    if [ -n "$PBS_BIN_DIR" ]; then
        route PBS_Cluster pbs 'GahpLrms is "pbs"'
        ROUTES="$ROUTES PBS_Cluster"
    fi
    if [ -n "$LSF_ENVDIR_VALUE" ]; then
        route LSF_Cluster lsf 'GahpLrms is "lsf"'
        ROUTES="$ROUTES LSF_Cluster"
    fi
    printf 'JOB_ROUTER_ROUTE_NAMES = %s\n\n' "$ROUTES"
    printf '# tests: faster rounds\nJOB_ROUTER_POLLING_PERIOD = 2\nGRIDMANAGER_JOB_PROBE_INTERVAL = 2\nSCHEDD_INTERVAL = 5\n'
    # a released job that had started is routed again, not removed ("disabled job retries")
    printf 'ENABLE_JOB_RETRIES = True\n'
} >"$CE/etc/condor-ce/config.d/99-zz-gahp-ci.conf"

recipe start >>"$DIR/setup.log" 2>&1 || { tail -n 40 "$DIR/setup.log" >&2; die "the CE did not start"; }

# ---------------------------------------------------------------- wait until it answers
ce_q() { su - "$JOB_USER" -c "$CE/usr/bin/condor_ce_q -totals" >/dev/null 2>&1; }
for _ in $(seq 1 60); do ce_q && break; sleep 1; done
ce_q || die "condor_ce_q does not answer after 60 s"
for _ in $(seq 1 30); do
    [ -n "$(ls "$LOCAL"/log/JobRouterLog* 2>/dev/null)" ] && break
    sleep 1
done

cat >"$DIR/env" <<EOF
GAHP_CE_DIR=$DIR
GAHP_CE_BIN=$CE/usr/bin
GAHP_CE_BOOTSTRAP=$CE/usr/share/condor-ce/condor_ce_env_bootstrap
GAHP_CE_LOCAL=$LOCAL
GAHP_CE_LOG=$LOCAL/log
GAHP_CE_BLAHLOG=$DIR/blahlog
GAHP_CE_STATE=$DIR/blah-users
GAHP_CE_VENV=$VENV
GAHP_CE_PORT=$PORT
GAHP_CE_JOB_USER=$JOB_USER
GAHP_CE_DAEMON_USER=$DAEMON_USER
GAHP_CE_ROUTES=$ROUTES
GAHP_CE_BLAH_CONFIG=$BLAH_CONFIG
GAHP_CE_SITE_SCRIPTS=$DIR/site-scripts
EOF
log "HTCondor-CE up (root mode, port $PORT, routes: $ROUTES)"
cat "$DIR/env"
