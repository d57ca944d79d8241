#!/usr/bin/env bash
# Build the sdist and wheel, check their contents, install the wheel into a fresh venv and
# check every console script there (--version, and a whole boinc-gahp-demo run).
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
version="$(python3 -c 'import gahp_core; print(gahp_core.__version__)')"
scripts=(gahp-server boinc-gahp boinc-emulator boinc-gahp-demo blahpd gahp-shell
         ng_invoke_server.Fork ng_invoke_server.Slurm ng_invoke_server.SGE)

echo "== build $version"
python3 -m pip install -q build
python3 -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=("$work"/dist/gahp-"$version"-*.whl)
sdist="$work/dist/gahp-$version.tar.gz"
test -f "${wheel[0]}" && test -f "$sdist"

echo "== contents"
python3 - "${wheel[0]}" "$sdist" <<'PY'
import sys, tarfile, zipfile
from pathlib import Path

wheel, sdist = sys.argv[1:]
in_wheel = set(zipfile.ZipFile(wheel).namelist())
in_sdist = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
packages = sorted(
    p.parent.as_posix() for p in Path(".").glob("gahp_*/**/__init__.py")
    if "__pycache__" not in p.parts
)
typed = sorted(p.as_posix() for p in Path(".").glob("gahp_*/py.typed"))
missing = [f"{pkg}/__init__.py" for pkg in packages if f"{pkg}/__init__.py" not in in_wheel]
missing += [t for t in typed if t not in in_wheel]
missing += [f"sdist:{p}" for p in [*typed, "pyproject.toml", "README.md"] if p not in in_sdist]
missing += [f"sdist:{pkg}/__init__.py" for pkg in packages if f"{pkg}/__init__.py" not in in_sdist]
if missing:
    sys.exit(f"missing from the distributions: {missing}")
print(f"{len(packages)} packages and {len(typed)} py.typed files in the wheel and the sdist")
PY

echo "== fresh venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "${wheel[0]}"
for s in "${scripts[@]}"; do
    out="$("$work/venv/bin/$s" --version)"
    [[ "$out" == "$s $version" ]] || { echo "$s --version printed '$out'"; exit 1; }
    echo "$out"
done

echo "== boinc-gahp-demo from the venv"
(cd "$work" && PATH="$work/venv/bin:$PATH" "$work/venv/bin/boinc-gahp-demo" --jobs 4 \
    --job-delay 0.1 --out "$work/demo-output") | tail -n 3
test -f "$work/demo-output/job0.out"
echo "package: OK"
