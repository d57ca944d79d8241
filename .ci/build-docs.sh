#!/usr/bin/env bash
# Build the documentation site with warnings as errors (mkdocs --strict) into a temporary
# directory that is removed afterwards. Usage: .ci/build-docs.sh [SITE_DIR to keep the site]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore NO_MKDOCS_2_WARNING=1

python3 -m pip install -q -e '.[docs]'
if [[ $# -ge 1 ]]; then
    site="$1"
else
    site="$(mktemp -d)"
    trap 'rm -rf "$site"' EXIT
fi
python3 -m mkdocs build --strict --site-dir "$site"
test -f "$site/index.html" && test -f "$site/api/index.html"
echo "docs: built into $site"
