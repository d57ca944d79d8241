"""The C blahp's ``blah.config``, found and read as the C blahp finds it, never run.

Search order (as the C blahp's ``config_read``): ``$BLAHPD_CONFIG_LOCATION``; else
``$BLAHPD_LOCATION/etc/blah.config`` (``$GLITE_LOCATION``, then ``/usr``, when
``BLAHPD_LOCATION`` is unset) when readable; else ``/etc/blah.config``. Then every file of
``<that file>.d/`` in name order (dot files left out), then ``~/.blah/user.config``; a later
value overrides an earlier one. Files are read by :mod:`gahp_blah.shellvars`.

:func:`translate` turns the keys into blahpd's settings (the tables below), naming where each
came from; a key that changes what jobs get and is not honoured gives a warning.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from gahp_blah.shellvars import Assignment, ShellFile, parse_assignments
from gahp_core import ConfigError

__all__ = ["BlahConfigFiles", "find_blah_config", "libexec_default", "translate"]

BASE = "blah.config"
SYSTEM_CONFIG = Path("/etc") / BASE
MAX_BYTES = 1 << 20
MAX_DIR_FILES = 256
PACKAGE_SCRIPT_DIR = Path("/etc/blahp")
"""Where HTCondor's packages keep the site scripts (``/usr/libexec/blahp`` links to them)."""


@attrs.frozen
class BlahConfigFiles:
    """The files read, in order, and what they assign."""

    files: tuple[str, ...]
    shell: ShellFile


def _c_true(value: str) -> bool:
    """The C blahp's ``config_test_boolean``: a number above 0, or ``yes...``/``true...``."""
    v = value.strip()
    m = re.match(r"[-+]?\d+", v)
    if m and int(m.group()) > 0:
        return True
    return v[:3].lower() == "yes" or v[:4].lower() == "true"


def _read(path: Path) -> str:
    """The text of a configuration file: a regular file of at most 1 MiB that not everyone
    may write (blahpd would otherwise take settings from any user)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file")
        if st.st_mode & stat.S_IWOTH:
            raise ConfigError(f"{path} may be written by every user: refused (chmod o-w)")
        if st.st_size > MAX_BYTES:
            raise ConfigError(f"{path} is larger than {MAX_BYTES} bytes")
        data = fh.read(MAX_BYTES + 1)
    return data.decode("utf-8", errors="replace")


def _install_location(environ: Mapping[str, str]) -> str:
    return environ.get("BLAHPD_LOCATION") or environ.get("GLITE_LOCATION") or "/usr"


def main_config_path(environ: Mapping[str, str]) -> Path | None:
    """The ``blah.config`` the C blahp reads first, or None when there is none."""
    named = environ.get("BLAHPD_CONFIG_LOCATION")
    if named:
        return Path(named)  # named: must be readable
    candidate = Path(_install_location(environ)) / "etc" / BASE
    if os.access(candidate, os.R_OK):
        return candidate
    return SYSTEM_CONFIG if os.path.exists(SYSTEM_CONFIG) else None


def user_config_path() -> Path:
    return Path(os.path.expanduser("~")) / ".blah" / "user.config"


def _drop_ins(main: Path) -> list[Path]:
    """The files of ``<main>.d/`` in name order (dot files left out); none without it."""
    d = Path(f"{main}.d")
    if not d.is_dir():
        return []
    if d.stat().st_mode & stat.S_IWOTH:
        raise ConfigError(f"{d} may be written by every user: refused (chmod o-w)")
    names = sorted(n for n in os.listdir(d) if not n.startswith("."))
    if len(names) > MAX_DIR_FILES:
        raise ConfigError(f"{d} holds more than {MAX_DIR_FILES} files")
    return [d / name for name in names if (d / name).is_file()]


def find_blah_config(environ: Mapping[str, str] | None = None) -> BlahConfigFiles:
    """Read every ``blah.config`` file in the C blahp's order (none: no file, no value)."""
    env = os.environ if environ is None else environ
    shell = ShellFile()
    files: list[str] = []

    def read(path: Path) -> None:
        parse_assignments(_read(path), str(path), env, shell)
        files.append(str(path))

    main = main_config_path(env)
    if main is not None:
        read(main)
        for path in _drop_ins(main):
            read(path)
    user = user_config_path()
    if os.access(user, os.R_OK):
        read(user)
    return BlahConfigFiles(tuple(files), shell)


def libexec_default(environ: Mapping[str, str]) -> Path:
    """``blah_libexec_directory`` when blah.config does not set it, as the C blahp's
    scripts derive it: ``$BLAHPD_LOCATION/libexec``, else ``${GLITE_LOCATION:-/opt/glite}/
    libexec``, else ``/usr/libexec``; its ``blahp`` subdirectory when there is one."""
    base = Path("/usr/libexec")
    loc = environ.get("BLAHPD_LOCATION")
    glite = environ.get("GLITE_LOCATION") or "/opt/glite"
    if loc and os.path.isdir(os.path.join(loc, "libexec")):
        base = Path(loc) / "libexec"
    elif os.path.isdir(os.path.join(glite, "libexec")):
        base = Path(glite) / "libexec"
    return base / "blahp" if (base / "blahp").is_dir() else base


# ---- the keys ------------------------------------------------------------------------------

PATHS = {
    "slurm_binpath": ("driver.slurm.bin_dir",),
    "pbs_binpath": ("driver.pbs.bin_dir",),
    "lsf_binpath": ("driver.lsf.bin_dir",),
    "sge_binpath": ("driver.sge.bin_dir",),
    "lsf_confpath": ("driver.lsf.lsf_envdir",),
    "sge_rootpath": ("driver.sge.sge_root",),
}
"""Keys that name a directory: the driver options they set."""

WORDS = {
    "sge_cellname": ("driver.sge.sge_cell",),
    "sge_pe_policy": ("driver.sge.parallel_environment",),
}

EXPORTS = {
    "SLURM_CONF": ("driver.slurm.slurm_conf", "driver.pbs.slurm_conf"),
    "SGE_ROOT": ("driver.sge.sge_root",),
    "SGE_CELL": ("driver.sge.sge_cell",),
    "SGE_QMASTER_PORT": ("driver.sge.sge_qmaster_port",),
    "LSF_ENVDIR": ("driver.lsf.lsf_envdir",),
    "CONDOR_CONFIG": ("driver.condor.condor_config",),
}
"""``export NAME=...`` lines the C blahp's scripts pass to the batch commands: the driver
options that do the same (a ``*_binpath``-style key, when set too, wins). Every exported
variable is also set in blahpd's environment (see :attr:`Translated.exports`)."""

HONOURED = frozenset(
    {
        *PATHS,
        *WORDS,
        "pbs_pro",
        "blah_libexec_directory",
        "local_submit_attributes_setup_args",
        "blah_pass_submit_attributes",
        "blah_pass_all_submit_attributes",
        "supported_lrms",
        "blah_run_in_workdir",
        "blah_shared_directories",
    }
)

NOT_HONOURED: dict[str, tuple[Callable[[str], bool], str]] = {
    "blah_run_in_workdir": (
        lambda v: v != "yes",
        "jobs run in their Iwd (as with blah_run_in_workdir=yes), never in a scratch directory",
    ),
    "blah_shared_directories": (
        lambda v: v != "/",
        "the whole file system is taken as shared (as with blah_shared_directories=/): "
        "files are not copied to the worker node",
    ),
    "blah_wn_inputsandbox": (bool, "input files are not copied to the worker node"),
    "blah_wn_outputsandbox": (bool, "output files are not copied back from the worker node"),
    "blah_wn_temporary_home_dir": (bool, "jobs run in their Iwd"),
    "blah_set_default_workdir_to_home": (_c_true, "a job without Iwd is refused"),
    "blah_require_proxy_on_submit": (_c_true, "submits without a proxy are accepted"),
    "blah_enable_glexec_from_condor": (_c_true, "there is no glexec"),
    "blah_delegate_renewed_proxies": (
        _c_true,
        "renewed proxies are not delegated: BLAH_JOB_REFRESH_PROXY rewrites the proxy file",
    ),
    "blah_disable_limited_proxy": (
        lambda v: not _c_true(v),
        "no limited proxy is made: the job gets the proxy file itself",
    ),
    "blah_job_env_confs": (
        lambda v: any(os.path.exists(f.strip()) for f in v.split(",") if f.strip()),
        "the variables of these files are not added to the jobs' environment",
    ),
    "BLAHPD_ACCOUNTING_INFO_LOG": (bool, "no accounting log is written"),
    "pbs_set_pvmem": (lambda v: v == "yes", "no pvmem request: memory goes in the select"),
    "pbs_maui": (lambda v: v == "yes", "no Maui-specific directives"),
    "condor_expand_home_env": (
        lambda v: v == "yes",
        "$HOME in a condor job's environment is passed as written, not replaced",
    ),
}
"""Keys that change what jobs get and are not honoured: (set in a way that matters, what
blahpd does instead). A warning names each at startup."""

QUIET = frozenset(
    {
        "blah_max_threaded_cmds",
        "blah_graceful_kill_timeout",
        "blah_accounting_log_umask",
        "blah_children_restart_interval",
        "blah_check_children_interval",
        "blah_disable_wn_proxy_renewal",
        "blah_disable_proxy_user_copy",
        "blah_get_lock_on_limited_proxies",
        "blah_temp_dir",
        "blah_debug_save_submit_info",
        "blah_debug_save_wn_files",
        "blah_bin_directory",
        "blah_sbin_directory",
        "blah_torque_multiple_staging_directive_bug",
        "blah_wn_proxy_renewal_daemon",
        "condor_binpath",
        "condor_batch_caching_enabled",
        "pbs_nochecksubmission",
        "pbs_nologaccess",
        "pbs_fallback",
        "pbs_spoolpath",
        "pbs_batch_caching_enabled",
        "lsf_nochecksubmission",
        "lsf_nologaccess",
        "lsf_fallback",
        "lsf_batch_caching_enabled",
        "loop_interval",
        "purge_interval",
        "finalstate_query_interval",
        "alldone_interval",
        "batch_command_caching_filter",
        "async_notification_host",
        "async_notification_port",
        "sge_helper_path",
    }
)
"""Keys of machinery blahpd does not have (status daemons, job registry, thread limits,
caches, debugging, the condor driver's commands: it speaks to the schedd through HTCondor's
Python bindings): ignored without a word."""

QUIET_PATTERN = re.compile(
    r"(bupdater|bnotifier|bhist|tracejob|job_registry|blparser)\w*"
    r"|(pbs|lsf)_(BLParser|BLPserver\d*|BLPport\d*|num_BLParser)"
)

_MODES = ("pbspro", "auto")

UNSAFE_EXPORT = re.compile(r"PATH|HOME|IFS|ENV|SHELL|PWD|BLAHPD_\w*|GAHP_\w*|(LD|PYTHON|BASH)\w*")
"""Exported names not passed on: they would change how blahpd (Python, bash) runs."""


def _names(value: str | tuple[str, ...]) -> list[str]:
    """An array's elements, or a plain value's words (spaces or commas between)."""
    items = value if isinstance(value, tuple) else tuple(re.split(r"[\s,]+", value))
    return [v.strip() for v in items if v.strip()]


def _scalar(value: str | tuple[str, ...]) -> str:
    return value if isinstance(value, str) else (value[0] if value else "")


def _known(name: str) -> bool:
    """Whether ``name`` is a blah.config key blahpd reads, warns about or ignores quietly."""
    return bool(
        name in HONOURED or name in NOT_HONOURED or name in QUIET or QUIET_PATTERN.fullmatch(name)
    )


def _origin(a: Assignment) -> str:
    return f"{a.path}, line {a.line}: {a.raw}"


@attrs.frozen
class Translated:
    """blah.config as blahpd settings: a blahpd.toml-shaped table, each setting's origin,
    the site script directory, warnings and notes."""

    table: dict[str, Any]
    origins: dict[str, str]
    libexec: Path | None
    warnings: tuple[str, ...]
    supported_lrms: tuple[str, ...] = ()
    exports: dict[str, str] = attrs.field(factory=dict)
    """``export NAME=value``: set in blahpd's environment, so the batch commands (and the
    jobs, which inherit the submitter's environment) see them as under the C blahp."""


def translate(found: BlahConfigFiles) -> Translated:
    """blahpd's settings from what ``blah.config`` assigns."""
    into = _Translation()
    values = found.shell.values
    for name, a in values.items():
        if a.exported and name in EXPORTS:
            v = _scalar(a.value)
            if v:
                for setting in EXPORTS[name]:
                    into.put(setting, v, a)
    for name, a in values.items():
        into.assignment(name, a)
        if a.exported and isinstance(a.value, str):
            into.export(name, a.value, a)
    into.warnings += [f"{n}: ignored" for n in found.shell.notes]
    return Translated(
        into.table, into.origins, into.libexec, tuple(into.warnings), into.lrms, into.exports
    )


@attrs.define
class _Translation:
    """What :func:`translate` has made of blah.config so far."""

    table: dict[str, Any] = attrs.field(factory=dict)
    origins: dict[str, str] = attrs.field(factory=dict)
    warnings: list[str] = attrs.field(factory=list)
    exports: dict[str, str] = attrs.field(factory=dict)
    libexec: Path | None = None
    lrms: tuple[str, ...] = ()

    def put(self, setting: str, value: Any, a: Assignment) -> None:
        node = self.table
        *parents, leaf = setting.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
        self.origins[setting] = _origin(a)

    def assignment(self, name: str, a: Assignment) -> None:
        """One ``name=value`` of blah.config: a setting, a warning, or nothing."""
        v = _scalar(a.value).strip()
        self.not_honoured(name, v, a)
        if name in PATHS or name in WORDS:
            if v:  # empty: unset, as for the C blahp
                for setting in PATHS.get(name) or WORDS[name]:
                    self.put(setting, v, a)
        elif name in _SPECIAL:
            _SPECIAL[name](self, v, a)
        elif not (_known(name) or a.exported):
            self.warnings.append(f"{_origin(a)}: unknown key {name}: ignored")

    def not_honoured(self, name: str, v: str, a: Assignment) -> None:
        """A warning for a key of :data:`NOT_HONOURED` set in a way that matters."""
        if name in NOT_HONOURED and v:
            active, instead = NOT_HONOURED[name]
            if active(v):
                self.warnings.append(f"{_origin(a)}: not honoured: {instead}")

    def export(self, name: str, value: str, a: Assignment) -> None:
        """``export NAME=value``: passed on to blahpd's environment, unless unsafe."""
        if UNSAFE_EXPORT.fullmatch(name):
            self.warnings.append(
                f"{_origin(a)}: exported {name} is not passed on (it would change how "
                "blahpd itself runs): set it in blahpd's environment"
            )
        else:
            self.exports[name] = value
            self.origins[f"export {name}"] = _origin(a)

    def pbs_pro(self, v: str, a: Assignment) -> None:
        if v:
            self.put("driver.pbs.flavor", _MODES[0] if v == "yes" else _MODES[1], a)

    def libexec_directory(self, v: str, a: Assignment) -> None:
        if v:
            self.libexec = Path(v)
            self.origins["site.libexec"] = _origin(a)

    def setup_args(self, v: str, a: Assignment) -> None:
        if _names(a.value):
            self.put("site.local_submit_attributes_setup_args", _names(a.value), a)

    def pass_attributes(self, v: str, a: Assignment) -> None:
        if _names(a.value):
            self.put("site.pass_submit_attributes", _names(a.value), a)

    def pass_all_attributes(self, v: str, a: Assignment) -> None:
        if v:
            self.put("site.pass_all_submit_attributes", _c_true(v), a)

    def supported_lrms(self, v: str, a: Assignment) -> None:
        self.lrms = tuple(_names(v))
        self.origins["supported_lrms"] = _origin(a)


_SPECIAL: dict[str, Callable[[_Translation, str, Assignment], None]] = {
    "pbs_pro": _Translation.pbs_pro,
    "blah_libexec_directory": _Translation.libexec_directory,
    "local_submit_attributes_setup_args": _Translation.setup_args,
    "blah_pass_submit_attributes": _Translation.pass_attributes,
    "blah_pass_all_submit_attributes": _Translation.pass_all_attributes,
    "supported_lrms": _Translation.supported_lrms,
}
