#!/usr/bin/env bash
# Build the documentation site with warnings as errors (mkdocs --strict) into a temporary
# directory that is removed afterwards. Usage: .ci/build-docs.sh [SITE_DIR to keep the site]
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore NO_MKDOCS_2_WARNING=1

# Only the docs' own requirements: mkdocstrings reads the sources from this tree (paths: [.]),
# so the gahp package installed here, editable or not, is left as it is.
python3 - <<'EOF'
import subprocess, sys, tomllib
with open("pyproject.toml", "rb") as fh:
    docs = tomllib.load(fh)["project"]["optional-dependencies"]["docs"]
subprocess.run([sys.executable, "-m", "pip", "install", "-q", *docs], check=True)
EOF
if [[ $# -ge 1 ]]; then
    site="$1"
else
    site="$(mktemp -d)"
    trap 'rm -rf "$site"' EXIT
fi
python3 -m mkdocs build --strict --site-dir "$site"
test -f "$site/index.html" && test -f "$site/api/index.html"
echo "docs: built into $site"
