#!/usr/bin/env bash
# Adds two applications to the real BOINC test project (.ci/boinc-server-up.sh calls this;
# idempotent, run as root):
#   collect   - the `worker` program (BOINC's uc2) with BOINC's batch-collect assimilator
#               (batch_collect_assimilator --app collect): a validated job's outputs move to
#               <project>/results/<batch id>/<job>__file_<logical name>, served by
#               get_output3.php, not get_output.php/get_output2.php.
#   gzworker  - the same program whose output is gzipped by the volunteer (<gzip_when_done/>),
#               with the sample validator and dummy assimilator.
# Each app's daemons need their own <pid_file>/<lock_file> (two validators of one binary
# would otherwise share them). The submitter gets submit access to both.
set -euo pipefail

PROJECT_DIR="${1:-${PROJECTS_DIR:-/tmp/boinc-projects}/boinctest}"
DB_NAME="${GAHP_BOINC_DB_NAME:-boinctest}"
SUBMIT_AUTH="${GAHP_BOINC_AUTH:-d6de1d4cf42b72fe456a5bdb0e18d162}"
PLATFORM="x86_64-pc-linux-gnu"
VERSION="1.00"

log() { printf 'boinc-extra-apps: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
as_www() { runuser -u www-data -- "$@"; }

[ "$(id -u)" -eq 0 ] || die "must run as root"
cd "$PROJECT_DIR" || die "no project in $PROJECT_DIR"
WORKER_BIN="apps/worker/$VERSION/$PLATFORM/worker_${VERSION}_$PLATFORM"
[ -x "$WORKER_BIN" ] || die "no $WORKER_BIN"

changed=0
for app in collect gzworker; do
    if ! grep -q "<name>$app</name>" project.xml; then
        python3 - "$app" <<'PY'
import sys
app = sys.argv[1]
s = open('project.xml').read()
s = s.replace('</boinc>', '    <app>\n        <name>%s</name>\n        <user_friendly_name>%s</user_friendly_name>\n    </app>\n</boinc>' % (app, app), 1)
open('project.xml', 'w').write(s)
PY
        changed=1
    fi
    cp templates/worker_in "templates/${app}_in"
    if [ "$app" = gzworker ]; then
        sed 's|<upload_when_present/>|<upload_when_present/>\n        <gzip_when_done/>|' \
            templates/worker_out >"templates/${app}_out"
    else
        cp templates/worker_out "templates/${app}_out"
    fi
    vdir="apps/$app/$VERSION/$PLATFORM"
    mkdir -p "$vdir"
    [ -f "$vdir/${app}_${VERSION}_$PLATFORM" ] \
        || { install -m 755 "$WORKER_BIN" "$vdir/${app}_${VERSION}_$PLATFORM"; changed=1; }
done
chown -R www-data:www-data "$PROJECT_DIR"
if [ "$changed" = 1 ]; then
    as_www bin/xadd >/tmp/xadd-extra-apps.log 2>&1 || { cat /tmp/xadd-extra-apps.log; die "xadd failed"; }
    as_www bin/update_versions --noconfirm >/tmp/update_versions-extra-apps.log 2>&1 \
        || { cat /tmp/update_versions-extra-apps.log; die "update_versions failed"; }
fi
mysql -uroot "$DB_NAME" <<SQL
insert ignore into user_submit_app (user_id, app_id, manage)
    select u.id, a.id, 0 from user u, app a
    where u.authenticator='$SUBMIT_AUTH' and a.name in ('collect', 'gzworker');
SQL

if ! grep -q -- "--app collect" config.xml; then
    python3 - <<'PY'
s = open('config.xml').read()
def daemon(cmd, tag):
    return ('        <daemon>\n            <cmd>%s</cmd>\n'
            '            <pid_file>%s.pid</pid_file>\n            <lock_file>%s.lock</lock_file>\n'
            '        </daemon>\n' % (cmd, tag, tag))
extra = (daemon('sample_trivial_validator -d 3 --app collect', 'validator_collect')
         + daemon('batch_collect_assimilator -d 3 --app collect', 'assimilator_collect')
         + daemon('sample_trivial_validator -d 3 --app gzworker', 'validator_gzworker')
         + daemon('sample_dummy_assimilator -d 3 --app gzworker', 'assimilator_gzworker'))
s = s.replace('    </daemons>', extra + '    </daemons>', 1)
open('config.xml', 'w').write(s)
PY
    chown www-data:www-data config.xml
    changed=1
fi
if [ "$changed" = 1 ]; then
    ( as_www bin/stop && as_www bin/start ) >/dev/null 2>&1 || die "restarting the daemons failed"
fi
sleep 2
n=0
for d in validator_collect assimilator_collect validator_gzworker assimilator_gzworker; do
    if pid=$(cat pid_*/"$d.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; then
        n=$((n + 1))
    else
        log "daemon $d NOT running (see $PROJECT_DIR/log_*/)"
    fi
done
[ "$n" = 4 ] || die "not all daemons of the extra apps run"
log "apps collect (batch-collect) and gzworker (gzipped output) ready"
