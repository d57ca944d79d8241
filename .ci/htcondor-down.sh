#!/usr/bin/env bash
# Stop the personal HTCondor of .ci/htcondor-up.sh.  Usage (as root): bash .ci/htcondor-down.sh VERSION
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/htcondor-up.sh" --down "$@"
