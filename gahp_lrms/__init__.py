"""Job drivers for local batch systems, shared by the BLAH and Ninf-G servers.

``get_driver(name, config, state_dir)`` builds one: ``fork`` (this host), ``slurm``, ``pbs``,
``sge`` (Grid Engine), ``lsf``, ``condor`` (an HTCondor pool), ``boinc`` (a BOINC project,
through gahp_boinc).
Third-party drivers register with :func:`register_driver` or the ``gahp.lrms`` entry-point
group (a :class:`Driver` or :class:`BlockingDriver` subclass, or a callable with the same
signature as the constructor). The API is asynchronous (:class:`Driver`); a blocking
driver is adapted by :func:`get_driver` (see :mod:`gahp_lrms.base`). Each driver's options
are typed by its ``config_class`` (see :mod:`gahp_lrms.config`); :func:`driver_config`
checks them without building the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from gahp_core import UnsafePath, private_dir, setting_names
from gahp_lrms.base import BlockingDriver, Driver, RunInWorker, as_driver, driver_settings
from gahp_lrms.config import DriverConfig
from gahp_lrms.model import DriverError, JobInfo, JobSpec, JobStatus

__all__ = [
    "BlockingDriver",
    "Driver",
    "DriverError",
    "JobInfo",
    "JobSpec",
    "JobStatus",
    "available_drivers",
    "driver_config",
    "get_driver",
    "register_driver",
]

DriverFactory = Callable[..., Driver | BlockingDriver]
"""``factory(config, state_dir)``."""

_BUILTIN = {
    "fork": "gahp_lrms.fork:ForkDriver",
    "slurm": "gahp_lrms.slurm:SlurmDriver",
    "pbs": "gahp_lrms.pbs:PbsDriver",
    "sge": "gahp_lrms.sge:SgeDriver",
    "lsf": "gahp_lrms.lsf:LsfDriver",
    "boinc": "gahp_lrms.boinc:BoincDriver",
    "condor": "gahp_lrms.condor:CondorDriver",
}
_registered: dict[str, DriverFactory] = {}


def register_driver(name: str, factory: DriverFactory) -> None:
    """Make ``factory`` available as driver ``name`` (replacing any earlier one)."""
    _registered[name] = factory


def available_drivers() -> list[str]:
    """Names :func:`get_driver` accepts."""
    names = set(_BUILTIN) | set(_registered)
    names.update(ep.name for ep in entry_points(group="gahp.lrms"))
    return sorted(names)


def _load(name: str) -> DriverFactory | None:
    if name in _registered:
        return _registered[name]
    if name in _BUILTIN:
        module, _, attr = _BUILTIN[name].partition(":")
        return getattr(__import__(module, fromlist=[attr]), attr)
    for ep in entry_points(group="gahp.lrms", name=name):
        return ep.load()
    return None


def driver_config(name: str, config: Mapping[str, Any], prefix: str = "") -> DriverConfig | None:
    """The options ``config`` of driver ``name``, typed by its ``config_class`` (None for a
    driver without one), without building the driver: a :class:`DriverError` names a bad
    or unknown key (as ``prefix + key``)."""
    factory = _load(name)
    if factory is None:
        raise DriverError(
            f"no job driver named {name!r} (available: {', '.join(available_drivers())})"
        )
    cls = getattr(factory, "config_class", None)
    if not (isinstance(cls, type) and issubclass(cls, DriverConfig)):
        return None
    extra = frozenset(getattr(factory, "config_keys", ())) - setting_names(cls)
    return driver_settings(cls, config, name, extra, prefix)


def get_driver(
    name: str,
    config: Mapping[str, Any] | None,
    state_dir: Path,
    *,
    run_in_worker: RunInWorker | None = None,
) -> Driver:
    """A driver for batch system ``name`` with its ``config``; ``state_dir`` holds whatever it
    must keep across server restarts (created if missing). A blocking driver is adapted
    (:class:`~gahp_lrms.base.ThreadedDriver`): its calls run with ``run_in_worker`` (by
    default :func:`asyncio.to_thread`)."""
    factory = _load(name)
    if factory is None:
        raise DriverError(
            f"no job driver named {name!r} (available: {', '.join(available_drivers())})"
        )
    state_dir = Path(state_dir)
    try:
        private_dir(state_dir)
    except UnsafePath as exc:
        raise DriverError(str(exc)) from None
    except OSError as exc:
        raise DriverError(f"cannot create state directory {state_dir}: {exc}") from exc
    return as_driver(factory(dict(config or {}), state_dir), run_in_worker)
