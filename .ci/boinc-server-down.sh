#!/usr/bin/env bash
# Stop the real BOINC project server started by .ci/boinc-server-up.sh (the bundle's stop.sh:
# nudger, volunteer client, project daemons, Apache, MariaDB; the second volunteer) and remove the env file, so the
# tests see it down.  Extra arguments go to stop.sh (e.g. --keep-services).  Usage (as root):
#   bash .ci/boinc-server-down.sh [--keep-services]
set -euo pipefail
DIR="${GAHP_BOINC_DIR:-/tmp/gahp-boinc-server}"
rm -f "$DIR/env"
bash "$(dirname "${BASH_SOURCE[0]}")/boinc-second-volunteer.sh" --down || true
if [ -x "$DIR/boinc-server-bundle/stop.sh" ]; then
    "$DIR/boinc-server-bundle/stop.sh" "$@"
else
    echo "boinc-server-down: nothing to stop ($DIR/boinc-server-bundle/stop.sh missing)" >&2
fi
