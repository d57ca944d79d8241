"""``blahpd install-remote``: put this blahpd where HTCondor's ``remote_gahp`` starts one.

For ``grid_resource = batch <lrms> user@host`` the gridmanager runs ``remote_gahp``, which runs
``ssh user@host /bin/bash -l -c 'BLAHPD_LOCATION=~/bosco/glite GLITE_LOCATION=~/bosco/glite
~/bosco/glite/bin/blahpd'`` for the BLAH server and ``~/bosco/glite/bin/condor_ft-gahp -f``
(with ``CONDOR_CONFIG=~/bosco/glite/etc/condor_config.ft-gahp``) for the sandboxes; both come
from ``condor_remote_cluster -a user@host <lrms>``.  This command writes, in that tree (by
default ``~/bosco/glite``):

* ``bin/blahpd``: a small ``sh`` wrapper that runs this Python's ``gahp_blah`` with its log in
  ``log/BlahpdLog`` (the C blahpd it replaces is kept as ``bin/blahpd.orig``);
* ``etc/blahpd.toml``: the configuration (kept when it exists; ``--force`` rewrites it),
  with the batch systems' settings found in the environment (``SLURM_CONF``, ``LSF_ENVDIR``,
  ``SGE_ROOT``...);
* ``log/``.

``condor_remote_cluster -a`` rsyncs ``~/bosco`` with ``--delete``: a reinstall removes these
files.  ``--override-tree OUT`` writes the same files as ``OUT/glite/...`` instead, for
``condor_remote_cluster -o OUT`` on the access point, which lays them over every reinstall
(``--python`` then names the interpreter on the cluster).

Then it checks what remote_gahp needs and says what is missing: ``condor_ft-gahp`` and its
configuration, the ClassAd library, a login shell that prints nothing on stdout (``bash -l``
output would break the GAHP banner), the batch system's commands.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from gahp_blah.errors import BlahError

MARKER = "# written by `blahpd install-remote`"
DEFAULT_DIR = "~/bosco/glite"
MIN_PYTHON = (3, 11)

_COMMANDS = {"slurm": "sbatch", "pbs": "qsub", "lsf": "bsub", "sge": "qsub"}
"""The command each batch system's driver cannot work without (looked for on PATH)."""


class InstallError(BlahError):
    """The installation cannot be made (a path that is unsafe or cannot be written)."""


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def wrapper_text(python: str) -> str:
    """The ``bin/blahpd`` wrapper: runs ``python -m gahp_blah``, logs to ``log/BlahpdLog``
    beside it; never writes to stdout itself (the GAHP banner must come first)."""
    if not python or any(ord(c) < 32 for c in python):
        raise InstallError(f"not a usable path to a Python: {python!r}")
    q = _sh_quote(python)
    return f"""#!/bin/sh
{MARKER}: the Python blahpd for HTCondor's remote_gahp.
# remote_gahp sets BLAHPD_LOCATION (its --rgahp-glite, default ~/bosco/glite); blahpd then reads
# $BLAHPD_LOCATION/etc/blahpd.toml.  Nothing here may write to stdout.
if [ -z "$BLAHPD_LOCATION" ]; then
    BLAHPD_LOCATION=$(cd "$(dirname "$0")/.." && pwd) || exit 1
fi
export BLAHPD_LOCATION
if [ ! -x {q} ]; then
    echo "blahpd: the Python of this installation is gone:" {q} \\
        "(run 'blahpd install-remote' again)" >&2
    exit 1
fi
exec {q} -m gahp_blah --log "$BLAHPD_LOCATION/log/BlahpdLog" "$@"
"""


def _toml_string(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def config_text(environ: Mapping[str, str]) -> str:
    """A ``blahpd.toml`` with the batch systems' settings ``environ`` has (the login
    shell's, when run there)."""
    tables: dict[str, dict[str, str]] = {}
    if environ.get("SLURM_CONF"):
        tables.setdefault("slurm", {})["slurm_conf"] = environ["SLURM_CONF"]
    if environ.get("LSF_ENVDIR"):
        tables.setdefault("lsf", {})["lsf_envdir"] = environ["LSF_ENVDIR"]
    for var, key in (
        ("SGE_ROOT", "sge_root"),
        ("SGE_CELL", "sge_cell"),
        ("SGE_QMASTER_PORT", "sge_qmaster_port"),
    ):
        if environ.get(var) and environ.get("SGE_ROOT"):
            tables.setdefault("sge", {})[key] = environ[var]
    lines = [
        f"{MARKER} (edit freely: a new install keeps this file unless --force).",
        "# blahpd finds it as $BLAHPD_LOCATION/etc/blahpd.toml; `blahpd --show-config` with",
        "# BLAHPD_LOCATION set shows what is in force.  The state directory defaults to",
        "# ~/.local/state/gahp-blah: safe when several login nodes share the home.",
        '# state_dir = "/path/on/a/local/or/shared/disk"',
        '# drivers = ["slurm"]',
    ]
    for name, table in tables.items():
        lines += ["", f"[driver.{name}]"]
        lines += [f"{k} = {_toml_string(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@attrs.frozen
class Outcome:
    """What one run did and found."""

    written: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    """What remote_gahp needs and is not there (each with what to do)."""
    notes: tuple[str, ...] = ()


def _check_dir(path: Path) -> None:
    """``path`` is a directory (not a link) of this user that others cannot write."""
    try:
        st = path.lstat()
    except OSError as exc:
        raise InstallError(f"cannot use {path}: {exc}") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise InstallError(f"{path} is not a directory (a link is not followed)")
    if st.st_uid != os.geteuid():
        raise InstallError(f"{path} belongs to uid {st.st_uid}, not to this user")
    if st.st_mode & 0o022:
        raise InstallError(f"{path} may be written by other users (mode {st.st_mode & 0o777:o})")


def _make_dirs(path: Path) -> None:
    """``path`` and its missing parents (mode 755); every one checked."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise InstallError(f"cannot create {d}: {exc}") from None
    for d in dict.fromkeys([*reversed(missing), path]):
        _check_dir(d)


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``path`` through a new file and a rename (a link at ``path`` is replaced,
    never followed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise InstallError(f"cannot write {path}: {exc}") from None


def _ours(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return MARKER.encode() in fh.read(4096)
    except OSError:
        return False


def install(
    glite: Path,
    python: str,
    environ: Mapping[str, str],
    *,
    force: bool = False,
) -> tuple[list[str], list[str]]:
    """Write the wrapper, the configuration and ``log/`` under ``glite``: (written, kept)."""
    written: list[str] = []
    kept: list[str] = []
    for sub in ("bin", "etc", "log"):
        _make_dirs(glite / sub)
    wrapper = glite / "bin" / "blahpd"
    if os.path.lexists(wrapper) and not _ours(wrapper):
        original = wrapper.with_name("blahpd.orig")
        try:
            os.replace(wrapper, original)
        except OSError as exc:
            raise InstallError(f"cannot keep the old {wrapper} as {original}: {exc}") from None
        written.append(f"{original} (the blahpd that was there)")
    _write(wrapper, wrapper_text(python), 0o755)
    written.append(str(wrapper))
    conf = glite / "etc" / "blahpd.toml"
    if os.path.lexists(conf) and not force:
        kept.append(str(conf))
    else:
        _write(conf, config_text(environ), 0o644)
        written.append(str(conf))
    return written, kept


def _python_ok(python: str, environ: Mapping[str, str]) -> list[str]:
    """What ``python`` lacks to run blahpd (run as the wrapper runs it: no PYTHONPATH)."""
    env = {k: v for k, v in environ.items() if k != "PYTHONPATH"}
    probe = (
        "import sys; v = sys.version_info[:2]; "
        f"print('old' if v < {MIN_PYTHON!r} else 'ok', '%d.%d' % v); "
        "import gahp_blah; print('gahp_blah'); import classad2; print('classad2')"
    )
    try:
        proc = subprocess.run(
            [python, "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"{python} does not run: {exc}"]
    out = proc.stdout.split()
    if not out:
        return [f"{python} does not run: {proc.stderr.strip()[-300:]}"]
    if out[0] == "old":
        return [f"{python} is Python {out[1]}; blahpd needs 3.11 or newer"]
    if "gahp_blah" not in out:
        return [f"{python} cannot import gahp_blah: pip install 'gahp[blah]' with it"]
    if "classad2" not in out:
        return [
            f"{python} cannot import classad2 (the ClassAd library): "
            "pip install 'gahp[blah]' (the htcondor wheel) with it"
        ]
    return []


def _login_shell_quiet() -> str | None:
    """What ``bash -l`` prints on stdout, if anything (remote_gahp starts blahpd so)."""
    bash = shutil.which("bash")
    if bash is None:
        return "no bash on PATH (remote_gahp runs /bin/bash -l)"
    try:
        proc = subprocess.run(
            [bash, "-l", "-c", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bash -l does not run: {exc}"
    if proc.stdout:
        shown = proc.stdout[:80].decode(errors="replace")
        return (
            f"the login shell prints on stdout ({shown!r}): remote_gahp runs blahpd through"
            " `bash -l`, and that output breaks the GAHP banner; print to stderr in your"
            " ~/.bash_profile / ~/.profile"
        )
    return None


def check(glite: Path, python: str, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """What remote_gahp needs on this host that is missing, and notes."""
    missing: list[str] = []
    notes: list[str] = []
    ft = glite / "bin" / "condor_ft-gahp"
    if not os.access(ft, os.X_OK):
        missing.append(
            f"{ft} (HTCondor's file transfer GAHP, which moves each job's sandbox): run"
            " `condor_remote_cluster -a user@this-host <lrms>` on the access point (it installs"
            " it; then run this command again, or give it -o with an --override-tree)"
        )
    ft_conf = glite / "etc" / "condor_config.ft-gahp"
    if not ft_conf.is_file():
        missing.append(f"{ft_conf} (condor_ft-gahp's configuration, from condor_remote_cluster)")
    missing += _python_ok(python, environ)
    loud = _login_shell_quiet()
    if loud:
        missing.append(loud)
    found = sorted(
        {n for n, cmd in _COMMANDS.items() if shutil.which(cmd, path=environ.get("PATH"))}
    )
    notes.append(
        "batch system commands on PATH: "
        + (", ".join(f"{n} ({_COMMANDS[n]})" for n in found) if found else "none")
    )
    return missing, notes


def run(
    target: Path,
    python: str,
    environ: Mapping[str, str],
    *,
    force: bool = False,
    override_tree: bool = False,
) -> Outcome:
    """Install under ``target`` (``~/bosco/glite``), or write an override tree
    ``target/glite/...`` for ``condor_remote_cluster -o target``; then check."""
    if override_tree:
        _make_dirs(target)
        written, kept = install(target / "glite", python, environ, force=force)
        return Outcome(
            written=tuple(written),
            kept=tuple(kept),
            notes=(
                f"on the access point: condor_remote_cluster -o {target} -a user@host <lrms>;"
                f" {python} must exist on the cluster",
            ),
        )
    written, kept = install(target, python, environ, force=force)
    missing, notes = check(target, python, environ)
    return Outcome(tuple(written), tuple(kept), tuple(missing), tuple(notes))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="blahpd install-remote",
        description="Install this blahpd where HTCondor's remote_gahp starts it "
        "(grid_resource = batch <lrms> user@host), or write an override tree for "
        "condor_remote_cluster -o.",
    )
    p.add_argument(
        "dir",
        nargs="?",
        help=f"the glite tree (default {DEFAULT_DIR}); with --override-tree, the tree to write",
    )
    p.add_argument(
        "--override-tree",
        action="store_true",
        help="write DIR/glite/... for condor_remote_cluster -o DIR (run on the access point)",
    )
    p.add_argument(
        "--python",
        help="the Python that runs blahpd (default: this one, %(default)s)",
        default=sys.executable,
    )
    p.add_argument("--force", action="store_true", help="rewrite an existing etc/blahpd.toml")
    return p


def main(argv: Sequence[str]) -> int:
    """Exit status: 0 ready, 1 cannot install, 2 usage, 3 installed but pieces missing."""
    options = _parser().parse_args(list(argv))
    if options.override_tree and not options.dir:
        print("blahpd install-remote: --override-tree needs DIR", file=sys.stderr)
        return 2
    target = Path(os.path.expanduser(options.dir or DEFAULT_DIR))
    target = Path(os.path.abspath(target))
    try:
        outcome = run(
            target,
            options.python,
            os.environ,
            force=options.force,
            override_tree=options.override_tree,
        )
    except InstallError as exc:
        print(f"blahpd install-remote: {exc}", file=sys.stderr)
        return 1
    for w in outcome.written:
        print(f"wrote {w}")
    for k in outcome.kept:
        print(f"kept {k} (--force rewrites it)")
    for n in outcome.notes:
        print(n)
    for m in outcome.missing:
        print(f"MISSING: {m}")
    if outcome.missing:
        return 3
    print("ready: grid_resource = batch <lrms> user@this-host runs this blahpd")
    return 0
