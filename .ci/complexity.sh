#!/usr/bin/env bash
# The complexity gate of CI: no function rated D or worse by radon (cyclomatic complexity over
# 20), and at most GAHP_MAX_C (default 30) rated C (11 to 20). Prints what breaks it.
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(gahp_core gahp_boinc gahp_lrms gahp_blah gahp_ninfg)
MAX_C="${GAHP_MAX_C:-30}"
worse="$(radon cc -n D -s "${PACKAGES[@]}")"
if [ -n "$worse" ]; then
    printf 'complexity: rated D or worse by radon (split them up):\n%s\n' "$worse"
    exit 1
fi
rated_c="$(radon cc -n C -s "${PACKAGES[@]}")"
count="$(grep -c ' - C (' <<<"$rated_c" || true)"
if [ "$count" -gt "$MAX_C" ]; then
    printf '%s\ncomplexity: %s functions rated C, more than %s\n' "$rated_c" "$count" "$MAX_C"
    exit 1
fi
echo "complexity: none rated D or worse, $count rated C (at most $MAX_C)"
