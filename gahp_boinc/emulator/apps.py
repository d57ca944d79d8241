"""The emulator's BOINC applications: templates and the programs the volunteer runs.

Run one as a program, in a directory holding its inputs under their open names::

    python -m gahp_boinc.emulator.apps uppercase [--repeat N] [--fail] [--exit-code N] [--sleep S]

Every app accepts ``--fail`` (exit with ``--exit-code``, default 1, writing no output),
``--exit-code N`` and ``--sleep S``; unknown arguments are ignored, as BOINC apps usually do.
"""

from __future__ import annotations

import io
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

import attrs


@attrs.frozen
class AppSpec:
    """A BOINC application: its input open names, output open names and description."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    description: str
    max_nbytes: int = 10_000_000
    collect: bool = False
    """Batch-collect: the canonical outputs move to ``results/<batch id>/`` (BOINC's
    batch_collect_assimilator), served by get_output3.php only."""
    gzip: bool = False
    """The volunteer gzips the outputs before uploading them (``<gzip_when_done/>``)."""

    def input_template(self, quorum: int = 1) -> str:
        infos = "".join("    <file_info>\n    </file_info>\n" for _ in self.inputs)
        refs = "".join(
            f"        <file_ref>\n            <open_name>{n}</open_name>\n        </file_ref>\n"
            for n in self.inputs
        )
        return (
            f"<input_template>\n{infos}    <workunit>\n{refs}"
            f"        <target_nresults>{quorum}</target_nresults>\n"
            f"        <min_quorum>{quorum}</min_quorum>\n"
            "        <rsc_fpops_est>1e10</rsc_fpops_est>\n"
            "        <rsc_fpops_bound>1e12</rsc_fpops_bound>\n"
            "        <rsc_memory_bound>1e8</rsc_memory_bound>\n"
            "        <rsc_disk_bound>1e8</rsc_disk_bound>\n"
            "        <delay_bound>86400</delay_bound>\n"
            "    </workunit>\n</input_template>\n"
        )

    def output_template(self) -> str:
        infos = "".join(
            "    <file_info>\n"
            f"        <name><OUTFILE_{i}/></name>\n"
            "        <generated_locally/>\n"
            "        <upload_when_present/>\n"
            + ("        <gzip_when_done/>\n" if self.gzip else "")
            + f"        <max_nbytes>{self.max_nbytes}</max_nbytes>\n"
            "        <url><UPLOAD_URL/></url>\n"
            "    </file_info>\n"
            for i in range(len(self.outputs))
        )
        refs = "".join(
            "        <file_ref>\n"
            f"            <file_name><OUTFILE_{i}/></file_name>\n"
            f"            <open_name>{n}</open_name>\n"
            "            <copy_file/>\n"
            "        </file_ref>\n"
            for i, n in enumerate(self.outputs)
        )
        return f"<output_template>\n{infos}    <result>\n{refs}    </result>\n</output_template>\n"


APPS: dict[str, AppSpec] = {
    a.name: a
    for a in (
        AppSpec(
            "worker",
            ("in",),
            ("out",),
            "upper-cases 'in' into 'out' (the transcripts' app); "
            "--cpu_time S sleeps S s, --early_exit exits 246 on input > 30 chars",
            max_nbytes=1_000_000,
        ),
        AppSpec("uppercase", ("in",), ("out",), "upper-cases 'in' into 'out'; --repeat N"),
        AppSpec("fail", ("in",), ("out",), "always exits non-zero (--exit-code N, default 1)"),
        AppSpec("concat", ("in1", "in2"), ("out1", "out2"), "out1 = in1 + in2, out2 = in2 + in1"),
        AppSpec(
            "zipper",
            ("in",),
            ("out.zip",),
            "out.zip holds 'input.txt' (a copy) and 'upper.txt' (upper-cased)",
        ),
        AppSpec(
            "collect",
            ("in",),
            ("out",),
            "the worker, with the batch-collect assimilator",
            max_nbytes=1_000_000,
            collect=True,
        ),
        AppSpec(
            "gzworker",
            ("in",),
            ("out",),
            "the worker, its output gzipped by the volunteer",
            max_nbytes=1_000_000,
            gzip=True,
        ),
    )
}


def _opt(args: Sequence[str], name: str, default: str | None = None) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return default


def _worker(d: Path, args: Sequence[str], log: TextIO) -> int:
    log.write("worker: starting\n")
    time.sleep(float(_opt(args, "--cpu_time", "0") or 0))
    if "--early_exit" in args and len((d / "in").read_bytes()) > 30:
        log.write("worker: early exit\n")  # as BOINC's uc2: after 30 characters
        return 246
    (d / "out").write_bytes((d / "in").read_bytes().upper())
    log.write("worker: done\n")
    return 0


def _uppercase(d: Path, args: Sequence[str], log: TextIO) -> int:
    data = (d / "in").read_bytes().upper()
    (d / "out").write_bytes(data * int(_opt(args, "--repeat", "1") or 1))
    log.write(f"uppercase: {len(data)} bytes; args: {' '.join(args)}\n")
    return 0


def _fail(d: Path, args: Sequence[str], log: TextIO) -> int:
    code = int(_opt(args, "--exit-code", "1") or 1)
    log.write(f"fail: failing on purpose with exit code {code}\n")
    return code


def _concat(d: Path, args: Sequence[str], log: TextIO) -> int:
    a, b = (d / "in1").read_bytes(), (d / "in2").read_bytes()
    (d / "out1").write_bytes(a + b)
    (d / "out2").write_bytes(b + a)
    log.write(f"concat: {len(a)} + {len(b)} bytes\n")
    return 0


def _zipper(d: Path, args: Sequence[str], log: TextIO) -> int:
    data = (d / "in").read_bytes()
    with zipfile.ZipFile(d / "out.zip", "w") as z:
        z.writestr("input.txt", data)
        z.writestr("upper.txt", data.upper())
    log.write("zipper: wrote out.zip\n")
    return 0


PROGRAMS: dict[str, Callable[[Path, Sequence[str], TextIO], int]] = {
    "worker": _worker,
    "collect": _worker,
    "gzworker": _worker,
    "uppercase": _uppercase,
    "fail": _fail,
    "concat": _concat,
    "zipper": _zipper,
}


def run_app(name: str, args: Sequence[str], workdir: Path, log: TextIO) -> int:
    """Run app ``name`` in ``workdir``; write its messages to ``log``; return its exit code."""
    sleep = _opt(args, "--sleep")
    if sleep:
        time.sleep(float(sleep))
    if "--fail" in args:
        code = int(_opt(args, "--exit-code", "1") or 1)
        log.write(f"{name}: --fail given, exiting with {code}\n")
        return code
    try:
        return PROGRAMS[name](workdir, args, log)
    except (OSError, ValueError) as e:
        log.write(f"{name}: error: {e}\n")
        return 1


def run_inline(name: str, args: Sequence[str], workdir: Path) -> tuple[int, str]:
    """Run an app in this process (fast mode); return (exit code, log text)."""
    buf = io.StringIO()
    return run_app(name, args, workdir, buf), buf.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in PROGRAMS:
        sys.stderr.write(f"usage: apps {{{','.join(PROGRAMS)}}} [args...]\n")
        return 2
    code = run_app(argv[0], argv[1:], Path.cwd(), sys.stderr)
    sys.stderr.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
