"""Site batch directives: ``CERequirements`` and the ``<lrms>_local_submit_attributes.sh`` hook.

HTCondor-CE (and ``+remote_cerequirements`` in a grid submit file) sends a ClassAd expression
such as ``CondorCE == 1 && Walltime == 60 && Memory >= 2000``.  The C blahp turns its
comparisons of an attribute with a literal into shell variables (``CondorCE='1'``,
``Walltime='60'``, ``Memory_Min='2000'``), runs the site's script with them, and puts what the
script prints into the batch script.  This module does the same:

* :func:`unwind` reads the comparisons.  ``==`` and ``=?=`` (``is``) give ``NAME``; ``>=``
  and ``>`` give ``NAME_Min``; ``<=`` and ``<`` give ``NAME_Max`` (with the literal on the
  left the bound is flipped: ``5 >= a`` gives ``a_Max``).  Only integer and string literals
  count; a string keeps its ClassAd quotes (``foo == "x"`` gives ``foo='"x"'``, as the C
  blahp writes it; ``#SBATCH --comment=$foo`` is then read by sbatch as ``x``).  ``!=``,
  ``=!=``, reals, booleans, ``undefined`` and attribute-to-attribute comparisons give
  nothing; every other operator (``&&``, ``||``, ``!``, parentheses, function calls) is
  looked through.  Variables appear in the expression's order; a name given twice keeps the
  later value.
* :func:`run_hook` writes a bash file that assigns the variables (single-quoted: values are
  never expanded), ``blah_opt_mpinodes`` (from ``NodeNumber``), then ``source``\\ s the site
  script, and runs it with ``/bin/bash`` in the job's working directory, standard input
  ``/dev/null``, a timeout, in a process group of its own (killed whole on timeout).  Its
  standard output lines are the job's directives; a non-zero exit status, a timeout or a
  missing bash is a :class:`LocalAttributesError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from gahp_blah.errors import BlahError

__all__ = [
    "LocalAttributesError",
    "find_site_script",
    "hook_script",
    "run_hook",
    "shell_variables",
    "unwind",
]

log = logging.getLogger("gahp.blah.site")

SCRIPT_SUFFIX = "_local_submit_attributes.sh"

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"(?:\\.|[^"\\])*")
      | (?P<qname>'(?:\\.|[^'\\])*')
      | (?P<real>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
      | (?P<int>0[xX][0-9a-fA-F]+|\d+)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<op>=\?=|=!=|==|!=|<=|>=|<<|>>>|>>|&&|\|\||[-+*/%<>!~&|^?:(){}\[\],.;=])
    )""",
    re.VERBOSE,
)

_COMPARE = {"==": "", "=?=": "", "is": "", ">=": "_Min", ">": "_Min", "<=": "_Max", "<": "_Max"}
_FLIP = {"_Min": "_Max", "_Max": "_Min", "": ""}
_BINARY = {  # ClassAd binary operators, loosest first
    "||": 1,
    "&&": 2,
    "|": 3,
    "^": 4,
    "&": 5,
    "==": 6,
    "!=": 6,
    "=?=": 6,
    "=!=": 6,
    "is": 6,
    "isnt": 6,
    "<": 7,
    "<=": 7,
    ">": 7,
    ">=": 7,
    "<<": 8,
    ">>": 8,
    ">>>": 8,
    "+": 9,
    "-": 9,
    "*": 10,
    "/": 10,
    "%": 10,
}
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = frozenset(
    {
        "PATH",
        "IFS",
        "ENV",
        "HOME",
        "CDPATH",
        "GLOBIGNORE",
        "SHELLOPTS",
        "UID",
        "EUID",
        "PPID",
        "PS4",
        "OPTIND",
        "OPTARG",
        "FUNCNEST",
        "TMOUT",
        "blah_opt_mpinodes",
    }
)


class LocalAttributesError(BlahError):
    """CERequirements that cannot be read, or a site script that failed."""


# A parsed expression: ("ref", name), ("int"|"str"|"other", text), or ("op", op, *children).
Node = tuple


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise LocalAttributesError(f"CERequirements: cannot read {text[pos : pos + 20]!r}")
        kind = m.lastgroup or "op"
        value = m.group(kind)
        if kind == "name" and value.lower() in ("is", "isnt"):
            kind, value = "op", value.lower()
        out.append((kind, value))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok != ("op", value)):
            want = f"{value!r}" if value else "more"
            raise LocalAttributesError(f"CERequirements: expected {want} at token {self.i + 1}")
        self.i += 1
        return tok

    def expression(self, min_prec: int = 0) -> Node:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "op":
                break
            if tok[1] == "?" and min_prec == 0:
                self.take()
                then = self.expression()
                self.take(":")
                return ("op", "?:", left, then, self.expression())
            prec = _BINARY.get(tok[1])
            if prec is None or prec <= min_prec:
                break
            self.take()
            left = ("op", tok[1], left, self.expression(prec))
        return left

    def unary(self) -> Node:
        kind, value = self.take()
        if kind == "op" and value in ("-", "+", "!", "~"):
            operand = self.unary()
            if value == "-" and operand[0] == "int":
                return ("int", "-" + operand[1])
            return ("op", value, operand)
        return self.postfix(self.primary(kind, value))

    def primary(self, kind: str, value: str) -> Node:
        if kind == "int":
            return ("int", str(int(value, 0)))
        if kind in ("str", "real"):
            return (kind, value)
        if kind == "qname":
            return ("other", value)  # a quoted attribute name: not a shell name
        if kind == "name":
            return self.name(value)
        return self.bracketed(value)

    def name(self, value: str) -> Node:
        """A literal name, a function call, ``MY.x``/``TARGET.x`` (as ``x``) or a reference."""
        low = value.lower()
        if low in ("true", "false", "undefined", "error"):
            return ("other", value)
        if self.peek() == ("op", "("):  # function call
            return ("op", "call", *self.items(")"))
        if low in ("my", "target") and self.peek() == ("op", "."):
            self.take()
            return self.primary(*self.take())
        return ("ref", value)

    def bracketed(self, value: str) -> Node:
        """What an opening ``(``, ``{`` or ``[`` starts."""
        if value == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if value == "{":
            self.i -= 1
            return ("op", "list", *self.items("}"))
        if value == "[":
            return self.record()
        raise LocalAttributesError(f"CERequirements: unexpected {value!r}")

    def items(self, close: str) -> list[Node]:
        self.take()  # the opening bracket
        out: list[Node] = []
        if self.peek() == ("op", close):
            self.take()
            return out
        while True:
            out.append(self.expression())
            if self.take()[1] == close:
                return out

    def record(self) -> Node:
        out: list[Node] = []
        while self.peek() != ("op", "]"):
            self.take()  # name
            self.take("=")
            out.append(self.expression())
            if self.peek() == ("op", ";"):
                self.take()
        self.take("]")
        return ("op", "record", *out)

    def postfix(self, node: Node) -> Node:
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take()[1] == ".":
                node = ("op", "select", node, ("other", self.take()[1]))
            else:
                node = ("op", "index", node, self.expression())
                self.take("]")
        return node


def _walk(node: Node, out: list[tuple[str, str]]) -> None:
    if node[0] != "op":
        return
    op, children = node[1], node[2:]
    if op in _COMPARE and len(children) == 2:
        left, right = children
        suffix = _COMPARE[op]
        if left[0] == "ref" and right[0] in ("int", "str"):
            out.append((left[1] + suffix, right[1]))
            return
        if right[0] == "ref" and left[0] in ("int", "str"):
            out.append((right[1] + _FLIP[suffix], left[1]))
            return
    for child in children:
        _walk(child, out)


def unwind(expression: str) -> list[tuple[str, str]]:
    """The (variable, value) pairs of a CERequirements-style expression, in order."""
    if not expression.strip():
        return []
    parser = _Parser(expression)
    tree = parser.expression()
    if parser.peek() is not None:
        raise LocalAttributesError(f"CERequirements: unexpected {parser.peek()[1]!r}")  # type: ignore[index]
    out: list[tuple[str, str]] = []
    _walk(tree, out)
    return out


def _sq(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


def shell_variables(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """``NAME='value'`` lines; names that are not shell names, or that would change how bash
    runs the script (PATH, IFS, BASH*, LD_*, ...), are left out (and logged)."""
    lines = []
    for name, value in pairs:
        if not _SHELL_NAME.match(name) or name in _RESERVED or name.startswith(("BASH", "LD_")):
            log.warning("CERequirements variable %r left out (reserved or not a shell name)", name)
            continue
        lines.append(f"{name}={_sq(value)}")
    return lines


def hook_script(directory: str | os.PathLike[str] | None, lrms: str) -> Path | None:
    """``<directory>/<lrms>_local_submit_attributes.sh`` when it is a readable file."""
    if not directory:
        return None
    path = Path(directory) / f"{lrms}{SCRIPT_SUFFIX}"
    return path if path.is_file() and os.access(path, os.R_OK) else None


def find_site_script(directories: Iterable[Path], lrms: str) -> Path | None:
    """The first ``<dir>/<lrms>_local_submit_attributes.sh`` of ``directories`` that is a
    readable file (the C blahp looks in ``~/.blah``, then ``blah_libexec_directory``,
    where HTCondor's packages link to ``/etc/blahp``). One that other users may change is
    refused (it runs as every job owner)."""
    for directory in directories:
        script = hook_script(directory, lrms)
        if script is None:
            continue
        st = script.stat()
        mine = st.st_uid in (0, os.geteuid())
        if st.st_mode & stat.S_IWOTH or (not mine and st.st_mode & stat.S_IWGRP):
            raise LocalAttributesError(
                f"site script {script} may be changed by other users: not run "
                "(make it writable by its owner only)"
            )
        return script
    return None


def _tail(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "..." + text[-limit:]


def _temp_dir() -> str | None:
    """``$GAHP_TEMP`` when it is a directory (else the system's temporary directory)."""
    tmpdir = os.environ.get("GAHP_TEMP") or None
    return tmpdir if tmpdir and os.path.isdir(tmpdir) else None


def _hook_text(script: Path, variables: Sequence[str], mpinodes: int | None) -> str:
    """The bash file that sets ``variables`` (and ``blah_opt_mpinodes``), then sources
    ``script``."""
    body = ["#!/bin/bash", *variables]
    if mpinodes is not None:
        body.append(f"blah_opt_mpinodes={int(mpinodes)}")
    body.append(f"source {_sq(str(script))}")
    return "\n".join(body) + "\n"


def _run_bash(path: str, script: Path, cwd: str | None, timeout: float) -> tuple[int, bytes, bytes]:
    """Run ``path`` with bash in ``cwd`` (when it is a directory) in a process group of its
    own: its exit status, standard output and standard error.  On timeout the group is
    killed and :class:`LocalAttributesError` raised."""
    bash = shutil.which("bash") or "/bin/bash"
    try:
        proc = subprocess.Popen(
            [bash, path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd if cwd is not None and os.path.isdir(cwd) else None,
            start_new_session=True,
        )
    except OSError as exc:
        raise LocalAttributesError(f"cannot run the site script {script}: {exc}") from None
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise LocalAttributesError(
            f"site script {script} did not finish within {timeout:g} s"
        ) from None
    return proc.returncode, out, err


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc``'s whole process group and reap it."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=5)
    if proc.poll() is None:  # pragma: no cover - bash ignores nothing after SIGKILL
        proc.kill()


def run_hook(
    script: Path,
    variables: Sequence[str],
    *,
    mpinodes: int | None = None,
    cwd: str | None = None,
    timeout: float = 30.0,
) -> tuple[str, ...]:
    """Run the site ``script`` with ``variables`` (lines from :func:`shell_variables`); return
    the non-blank lines it printed."""
    text = _hook_text(script, variables, mpinodes)
    fd, path = tempfile.mkstemp(prefix="blahpd-attributes-", suffix=".sh", dir=_temp_dir())
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        returncode, out, err = _run_bash(path, script, cwd, timeout)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if returncode != 0:
        why = _tail(err.decode(errors="replace")) or "no error output"
        raise LocalAttributesError(f"site script {script} failed (exit status {returncode}): {why}")
    return tuple(line.rstrip() for line in out.decode(errors="replace").split("\n") if line.strip())
