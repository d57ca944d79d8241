"""Submit ClassAds (parsed by HTCondor's own ``classad2``) into job driver specs."""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from gahp_blah.arguments import (
    SyntaxProblem,
    parse_env_v1,
    parse_env_v2,
    split_v1,
    split_v2,
)
from gahp_blah.errors import BlahError
from gahp_lrms import JobSpec

T = TypeVar("T")


class SubmitError(BlahError):
    """A submit ClassAd that cannot be turned into a job; the message says which attribute."""


@attrs.frozen
class SubmitAd:
    """What BLAH_JOB_SUBMIT asks for."""

    gridtype: str
    spec: JobSpec
    proxy: str | None = None
    transfer_input: tuple[str, ...] = ()
    transfer_output: tuple[str, ...] = ()
    expressions: tuple[tuple[str, str], ...] = ()
    """(attribute, unparsed expression) of the ``expressions`` asked for that the ad has."""
    node_number: int | None = None
    """``NodeNumber`` as sent (the site script's ``blah_opt_mpinodes``)."""
    strings: tuple[tuple[str, str], ...] = ()
    """(attribute, value) of the ``strings`` asked for whose value is a string."""
    unknown: tuple[str, ...] = ()
    """Attributes of the ad that blahpd does not read (logged once, with the job id)."""


def _load_classad(text: str) -> Any:
    try:
        import classad2
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise SubmitError(
            "ClassAd support is not installed (pip install 'gahp[blah]' for htcondor's classad2)"
        ) from exc
    try:
        return classad2.ClassAd(text)
    except Exception as exc:
        raise SubmitError(f"cannot parse the submit ClassAd: {exc}") from None


class _Ad:
    """Case-insensitive, evaluated, type-checked access to a ClassAd's attributes."""

    def __init__(self, ad: Any) -> None:
        self._ad = ad
        self._keys = {k.lower(): k for k in ad}

    def has(self, name: str) -> bool:
        return name.lower() in self._keys

    def expression(self, name: str) -> str | None:
        """The attribute's expression as ClassAd text (unevaluated)."""
        key = self._keys.get(name.lower())
        return None if key is None else str(self._ad.lookup(key))

    def _value(self, name: str) -> Any:
        key = self._keys.get(name.lower())
        if key is None:
            return None
        try:
            value = self._ad.eval(key)
        except Exception as exc:
            raise SubmitError(f"attribute {name} cannot be evaluated: {exc}") from None
        if value is None:
            return None
        if type(value).__name__ == "Value":  # classad2's UNDEFINED and ERROR
            if value.name.lower() == "undefined":
                return None
            raise SubmitError(f"attribute {name} evaluates to {value.name.upper()}")
        return value

    def string(self, name: str) -> str | None:
        value = self._value(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise SubmitError(f"attribute {name} must be a string, not {value!r}")
        return value

    def strings(self, names: Sequence[str] | None) -> tuple[tuple[str, str], ...]:
        """(name, value) of ``names`` (None: every attribute) that evaluate to a string;
        the others are left out, as the C blahp leaves them out."""
        out = []
        for name in self._ad if names is None else names:
            try:
                value = self._value(name)
            except SubmitError:
                continue
            if isinstance(value, str):
                out.append((name, value))
        return tuple(out)

    def names(self) -> list[str]:
        """The ad's attribute names, as the ad spells them."""
        return list(self._keys.values())

    def boolean(self, name: str) -> bool:
        value = self._value(name)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise SubmitError(f"attribute {name} must be a boolean, not {value!r}")
        return value

    def count(self, name: str) -> int | None:
        """A number of things, where 0 means none (None)."""
        value = self._value(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
            return None
        return self.integer(name)

    def integer(self, name: str) -> int | None:
        value = self._value(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
                value = int(value)
            else:
                raise SubmitError(f"attribute {name} must be a number, not {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise SubmitError(f"attribute {name} must be a finite number, not {value!r}")
        if value <= 0:
            raise SubmitError(f"attribute {name} must be positive, not {value!r}")
        return math.ceil(value)


DRIVER_OPTIONS = {
    "BoincProjectUrl": "project_url",
    "BoincAuthenticatorFile": "authenticator_file",
}
"""Submit-ad attributes passed to the job driver as options (documented per driver)."""

DRIVER_INT_OPTIONS = {
    "BoincPriority": "priority",
    "BoincTargetHost": "target_host",
    "BoincTargetUser": "target_user",
    "BoincMinQuorum": "min_quorum",
    "BoincTargetNresults": "target_nresults",
    "BoincMaxErrorResults": "max_error_results",
    "BoincMaxTotalResults": "max_total_results",
    "BoincMaxSuccessResults": "max_success_results",
}
"""Integer submit-ad attributes passed to the job driver as options (their decimal text)."""


def _driver_options(ad: _Ad) -> dict[str, str]:
    out = {key: v for attr, key in DRIVER_OPTIONS.items() if (v := ad.string(attr))}
    for attr, key in DRIVER_INT_OPTIONS.items():
        value = ad._value(attr)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise SubmitError(f"attribute {attr} must be an integer, not {value!r}")
        text = str(value).strip()
        if not text.lstrip("-").isdigit() or len(text) > 12:
            raise SubmitError(f"attribute {attr} must be an integer, not {value!r}")
        out[key] = text
    return out


def _file_list(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _proxy_path(ad: _Ad, iwd: str | None) -> str | None:
    """``x509UserProxy`` as an absolute path (a relative one is in ``Iwd``, as for the C blahp)."""
    proxy = ad.string("x509UserProxy")
    if not proxy or os.path.isabs(proxy):
        return proxy or None
    if iwd is None:
        raise SubmitError(f"attribute x509UserProxy {proxy!r} is relative and Iwd is not given")
    return os.path.join(iwd, proxy)


def parse_submit_ad(
    text: str,
    default_gridtype: str | None = None,
    expressions: Sequence[str] = (),
    strings: Sequence[str] | None = (),
) -> SubmitAd:
    """Read a BLAH submit ClassAd; raise :class:`SubmitError` with a clear message.

    ``expressions`` names attributes whose unevaluated text is wanted (``CERequirements``);
    ``strings`` those whose string value is wanted (None: every attribute's).
    The job's environment gets ``X509_USER_PROXY`` (the proxy's absolute path: the file
    BLAH_JOB_REFRESH_PROXY rewrites) when the ad names a proxy file that exists."""
    ad = _Ad(_load_classad(text))
    gridtype = _gridtype(ad, default_gridtype)
    cmd = ad.string("Cmd")
    if not cmd:
        raise SubmitError("attribute Cmd (the executable) is missing")
    iwd = _iwd(ad)
    arguments, environment = _arguments_and_environment(ad)
    proxy = _proxy_path(ad, iwd)
    if proxy is not None and os.path.isfile(proxy):
        environment["X509_USER_PROXY"] = proxy
    node_number = ad.integer("NodeNumber")
    nodes, cpus = _nodes_and_cpus(
        node_number,
        ad.integer("SMPGranularity"),
        ad.integer("HostSMPSize"),
        ad.count("HostNumber"),
    )
    _refuse_remaps(ad)
    transfer_input = _file_list(ad.string("TransferInput"))
    _check_inputs_exist(transfer_input, iwd)
    try:
        spec = JobSpec(
            executable=cmd,
            arguments=tuple(arguments),
            environment=environment,
            stdin=ad.string("In"),
            stdout=ad.string("Out"),
            stderr=ad.string("Err"),
            workdir=iwd,
            queue=ad.string("Queue"),
            project=ad.string("BatchProject"),
            memory_mb=ad.integer("RequestMemory"),
            runtime_s=ad.integer("BatchRuntime"),
            nodes=nodes,
            cpus_per_node=cpus,
            transfer_input=transfer_input,
            transfer_output=_file_list(ad.string("TransferOutput")),
            options=_driver_options(ad),
            gpus=ad.count("GPUNumber"),
            gpu_model=ad.string("GPUModel") or None,
            gpu_mode=ad.string("GPUMode") or None,
            mics=ad.count("MICNumber"),
            whole_nodes=ad.boolean("WholeNodes"),
            extra_args=extra_submit_args(ad.string("BatchExtraSubmitArgs")),
        )
    except (ValueError, TypeError) as exc:
        raise SubmitError(f"bad job description: {exc}") from None
    return SubmitAd(
        gridtype=gridtype.lower(),
        spec=spec,
        proxy=proxy,
        transfer_input=transfer_input,
        transfer_output=_file_list(ad.string("TransferOutput")),
        expressions=_expressions(ad, expressions),
        node_number=node_number,
        strings=ad.strings(strings),
        # attributes handed to the site script (blah_pass_*_submit_attributes) are used too
        unknown=() if strings is None else _unknown(ad, (*expressions, *strings)),
    )


KNOWN_ATTRIBUTES = frozenset(
    name.lower()
    for name in (
        # read into the job (see docs/operators/htcondor-blah.md for each one)
        *("gridtype", "Cmd", "Arguments", "Args", "Environment", "Env", "In", "Out", "Err"),
        *("Iwd", "Queue", "BatchProject", "RequestMemory", "BatchRuntime", "NodeNumber"),
        *("SMPGranularity", "HostSMPSize", "HostNumber", "WholeNodes", "GPUNumber"),
        *("GPUModel", "GPUMode", "MICNumber", "BatchExtraSubmitArgs", "TransferInput"),
        *("TransferOutput", "TransferOutputRemaps", "x509UserProxy", "CERequirements"),
        *DRIVER_OPTIONS,
        # sent by the gridmanager, with nothing to do here: the V1 environment's delimiter
        # (the V1 parser takes both), the job's own resource name, the C blahp's scratch
        # directory and executable staging (jobs run in Iwd on a shared file system), and
        # the client's id of the job (the C blahp uses it only in its job registry)
        *("EnvDelim", "GridResource", "JobDirectory", "StageCmd", "ClientJobId"),
    )
)
"""Submit-ad attributes blahpd knows (lower case); any other is logged once per job."""

EXTRA_ARGS_LIMIT = 4096
_PREFIXES = ("#SBATCH", "#PBS", "#BSUB", "#$")


def extra_submit_args(text: str | None) -> tuple[str, ...]:
    """``BatchExtraSubmitArgs`` split into words as a POSIX shell would (quotes group words;
    nothing is expanded).  A leading directive prefix (``#SBATCH``...) is dropped, as the C
    blahp does.  The words become ONE directive line of the batch script, so a line break
    (CR, LF) or NUL is refused, and so is anything the job description then refuses (see
    ``JobSpec.extra_args``)."""
    if not text or not text.strip():
        return ()
    if len(text) > EXTRA_ARGS_LIMIT:
        raise SubmitError(f"attribute BatchExtraSubmitArgs is over {EXTRA_ARGS_LIMIT} characters")
    if any(c in text for c in "\r\n\0"):
        raise SubmitError(
            "attribute BatchExtraSubmitArgs has a line break or NUL: it must be one line"
        )
    try:
        words = shlex.split(text, posix=True)
    except ValueError as exc:
        raise SubmitError(f"attribute BatchExtraSubmitArgs cannot be split: {exc}") from None
    if words and words[0] in _PREFIXES:
        words = words[1:]
    return tuple(words)


def _refuse_remaps(ad: _Ad) -> None:
    """``TransferOutputRemaps`` moves output files after the job; jobs here run on a shared
    file system with their outputs left where the job wrote them, so a remap is refused."""
    remaps = ad.string("TransferOutputRemaps")
    if remaps and remaps.strip():
        raise SubmitError(
            "attribute TransferOutputRemaps is not supported: blahpd leaves output files where"
            " the job writes them (in Iwd, on the shared file system); remove"
            " transfer_output_remaps or write the files where they are wanted"
        )


def _gridtype(ad: _Ad, default: str | None) -> str:
    """``gridtype`` (the batch system), else ``default``; one of them must be given."""
    gridtype = ad.string("gridtype") or default
    if not gridtype:
        raise SubmitError("attribute gridtype is missing (which batch system?)")
    return gridtype


def _expressions(ad: _Ad, names: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """(name, unevaluated text) of the attributes ``names`` the ad has."""
    return tuple((name, expr) for name in names if (expr := ad.expression(name)) is not None)


def _unknown(ad: _Ad, expressions: Sequence[str]) -> tuple[str, ...]:
    """The ad's attributes blahpd does not read (the ``expressions`` asked for are read)."""
    wanted = KNOWN_ATTRIBUTES | {name.lower() for name in expressions}
    return tuple(sorted(k for k in ad.names() if k.lower() not in wanted))


def _iwd(ad: _Ad) -> str | None:
    """``Iwd``, which must be an absolute path when given."""
    iwd = ad.string("Iwd")
    if iwd is not None and not os.path.isabs(iwd):
        raise SubmitError(f"attribute Iwd must be an absolute path, not {iwd!r}")
    return iwd


def _arguments_and_environment(ad: _Ad) -> tuple[list[str], dict[str, str]]:
    """The job's arguments and environment, each read from its V2 attribute (``Arguments``,
    ``Environment``) when the ad has it, else from the V1 one (``Args``, ``Env``)."""
    try:
        arguments = _v2_or_v1(ad, ("Arguments", split_v2), ("Args", split_v1))
        environment = _v2_or_v1(ad, ("Environment", parse_env_v2), ("Env", parse_env_v1))
    except SyntaxProblem as exc:
        raise SubmitError(str(exc)) from None
    return arguments, environment


def _v2_or_v1(ad: _Ad, v2: tuple[str, Callable[[str], T]], v1: tuple[str, Callable[[str], T]]) -> T:
    """An attribute in its V2 syntax if the ad has it, else in its V1 syntax (each read with
    its parser; a missing one as empty)."""
    name, parse = v2 if ad.has(v2[0]) else v1
    return parse(ad.string(name) or "")


def _nodes_and_cpus(
    node_number: int | None,
    granularity: int | None,
    host_size: int | None,
    host_number: int | None = None,
) -> tuple[int | None, int | None]:
    """Nodes and CPUs per node: ``NodeNumber`` CPUs on nodes of ``SMPGranularity`` CPUs (or
    shared out over ``HostNumber`` nodes, or all on one node); ``HostNumber``, when given,
    is the number of nodes; the CPUs per node are set by ``HostSMPSize`` when given."""
    nodes = cpus = None
    if node_number and granularity:
        nodes, cpus = math.ceil(node_number / granularity), granularity
    elif node_number and host_number:
        cpus = math.ceil(node_number / host_number)
    elif node_number:
        cpus = node_number
    if host_number:
        nodes = host_number
    if host_size:
        cpus = host_size
    return nodes, cpus


def _check_inputs_exist(transfer_input: tuple[str, ...], iwd: str | None) -> None:
    """Refuse an input file (``TransferInput``; a relative one is in ``Iwd``) that does not
    exist."""
    base = Path(iwd) if iwd else None
    for name in transfer_input:
        p = Path(name) if os.path.isabs(name) or base is None else base / name
        if not p.exists():
            raise SubmitError(f"input file {name} (TransferInput) does not exist")
