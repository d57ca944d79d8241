"""Every code example in docs/ is executed: python blocks run, toml blocks are loaded by the
server they configure, and gahp-session blocks are replayed against the real server executable.

The ``gahp-session`` format (documented in docs/protocol.md):

- ``# key: value`` header lines: ``server:`` the command (a console script of this project
  or any program), ``env:`` ``NAME=VALUE`` for it, ``emulator:`` ``URL AUTHENTICATOR`` as
  written in the session (the test starts a boinc-emulator and puts its real URL and
  authenticator in their place), ``file:`` ``NAME TEXT`` (a file created in the session's
  working directory), ``sleep:`` ``SECONDS`` (a pause at that point). Other ``#`` lines are
  comments.
- ``> LINE``: a request, sent exactly as written (plus CRLF).
- any other line: the next line the server writes, compared exactly except that ``...``
  matches any text (dates, times, ids). Lines before the first request are the banner.
- After ``> RESULTS`` whose expected reply is ``S n``, RESULTS is repeated until n result
  lines have arrived (results are produced asynchronously); they are compared in order.

A block preceded by ``<!-- no-test -->`` is skipped. Python and toml blocks whose first line
is ``# file: PATH`` are also written to a scratch project directory, whose ``src`` is put on
the import path of the page's other examples (a page can show a whole package and run it).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gahp_core import split
from gahp_core.testing import GahpClient

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXECUTED = {"python", "toml", "gahp-session"}
SCRIPTS = {  # console scripts run with this interpreter, so the test needs no PATH set-up
    "gahp-server": ["-m", "gahp_core"],
    "boinc-gahp": ["-m", "gahp_boinc"],
    "blahpd": ["-m", "gahp_blah"],
}

FENCE = re.compile(
    r"^(?P<indent> *)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```\s*$", re.M | re.S
)
NO_TEST = "<!-- no-test -->"


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    skipped: bool

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for m in FENCE.finditer(text):
            before = text[: m.start()].rstrip()
            body = "\n".join(
                line[len(m["indent"]) :] if line.startswith(m["indent"]) else line
                for line in m["body"].splitlines()
            )
            out.append(
                Block(
                    page=page,
                    line=text.count("\n", 0, m.start()) + 1,
                    lang=m["lang"],
                    body=body + "\n",
                    skipped=before.endswith(NO_TEST),
                )
            )
    return out


ALL = blocks()


def test_docs_have_examples_of_each_kind() -> None:
    langs = {b.lang for b in ALL if not b.skipped}
    assert {"python", "gahp-session", "toml"} <= langs
    assert sum(b.lang == "gahp-session" for b in ALL) >= 4


def test_every_block_has_a_language() -> None:
    bare = [b.id for b in ALL if not b.lang]
    assert not bare, f"fenced blocks without a language (say text, sh, ini...): {bare}"


# ---- python and toml ------------------------------------------------------------------------


def file_blocks(page: Path) -> dict[str, str]:
    """Blocks of ``page`` whose first line is ``# file: PATH``: files of an example project."""
    files = {}
    for b in ALL:
        first, _, rest = b.body.partition("\n")
        if b.page == page and first.startswith("# file: "):
            files[first.removeprefix("# file: ").strip()] = b.body
    return files


def materialize(page: Path, dest: Path) -> list[str]:
    """Write the page's example project into ``dest``; return the import paths it needs."""
    for name, body in file_blocks(page).items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body)
    return [str(dest / "src"), str(dest)] if file_blocks(page) else []


def _pages_with(lang: str) -> list[Path]:
    return sorted({b.page for b in ALL if b.lang == lang and not b.skipped})


@pytest.mark.parametrize("page", _pages_with("python"), ids=lambda p: str(p.relative_to(DOCS)))
def test_python_blocks(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's python blocks run in order in one namespace, in a scratch directory."""
    monkeypatch.chdir(tmp_path)
    paths = [*materialize(page, tmp_path / "project"), str(DOCS / "examples")]
    for path in reversed(paths):
        monkeypatch.syspath_prepend(path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*paths, str(ROOT)]))
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for b in ALL:
        if b.page == page and b.lang == "python" and not b.skipped:
            code = compile(b.body, b.id, "exec")
            exec(code, namespace)  # noqa: S102 - the docs' own examples


def _pages_with_tests() -> list[Path]:
    return sorted({b.page for b in ALL if any(n.startswith("tests/") for n in file_blocks(b.page))})


@pytest.mark.parametrize("page", _pages_with_tests(), ids=lambda p: str(p.relative_to(DOCS)))
def test_example_projects_pass_their_own_tests(page: Path, tmp_path: Path) -> None:
    """A page's example project (its ``# file:`` blocks) passes its own tests/, run by
    pytest as its author would."""
    project = tmp_path / "project"
    paths = materialize(page, project)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " skipped" not in done.stdout, done.stdout[-3000:]


@pytest.mark.parametrize(
    "block", [b for b in ALL if b.lang == "toml" and not b.skipped], ids=lambda b: b.id
)
def test_toml_blocks_load(block: Block, tmp_path: Path) -> None:
    """Every configuration block is read by the server it configures, as a file: blahpd's
    (state_dir, drivers, [driver.NAME] with each driver's own keys and types) or boinc-gahp's. Files
    it names (authenticators, CA bundles) are made in a scratch directory."""
    data = tomllib.loads(block.body)
    assert data
    if block.body.startswith("# file: "):
        return  # a file of an example project (pyproject.toml), not a configuration
    body = block.body
    for key, value in _strings(data):
        if key.endswith("_file") or key == "ca_bundle":
            stand_in = tmp_path / Path(value).name
            stand_in.write_text("0123456789abcdef0123456789abcdef\n")
            body = body.replace(f'"{value}"', f'"{stand_in}"')
    path = tmp_path / "config.toml"
    path.write_text(body)
    options = argparse.Namespace(config=str(path))
    if data.keys() & {"state_dir", "drivers", "default_gridtype", "driver", "site"}:
        from gahp_blah.config import load_config as load_blahpd_config

        load_blahpd_config(options)  # each [driver.NAME] checked by its driver's settings
    else:
        from gahp_boinc._config import (  # private: unit test of the config loader
            load_config as load_boinc_config,
        )

        load_boinc_config(options)


def _strings(data: dict) -> list[tuple[str, str]]:
    out = []
    for key, value in data.items():
        if isinstance(value, dict):
            out += _strings(value)
        elif isinstance(value, str):
            out.append((key, value))
    return out


# ---- gahp-session ---------------------------------------------------------------------------


@dataclass
class Step:
    request: str | None  # None: the banner
    expected: list[str] = field(default_factory=list)
    sleep: float = 0.0


@dataclass
class Session:
    server: list[str]
    env: dict[str, str]
    emulator: tuple[str, str] | None
    files: dict[str, str]
    steps: list[Step]


def parse_session(text: str) -> Session:
    server: list[str] = []
    env: dict[str, str] = {}
    emulator = None
    files: dict[str, str] = {}
    steps = [Step(None)]
    pending_sleep = 0.0
    for line in text.splitlines():
        if line.startswith("#"):
            key, sep, value = line[1:].strip().partition(":")
            value = value.strip()
            if not sep:
                continue
            if key == "server":
                server = shlex.split(value)
            elif key == "env":
                name, _, val = value.partition("=")
                env[name] = val
            elif key == "emulator":
                url, auth = value.split()
                emulator = (url, auth)
            elif key == "file":
                name, _, content = value.partition(" ")
                files[name] = content + "\n"
            elif key == "sleep":
                pending_sleep += float(value)
            continue
        if line.startswith("> "):
            steps.append(Step(line[2:], sleep=pending_sleep))
            pending_sleep = 0.0
        elif line.strip():
            steps[-1].expected.append(line)
    assert server, "a gahp-session needs a '# server:' line"
    return Session(server, env, emulator, files, steps)


def _pattern(expected: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in expected.split("...")) + r"\Z", re.S)


def _check(expected: str, got: str, where: str) -> None:
    assert _pattern(expected).match(got), f"{where}\n  expected: {expected!r}\n  got:      {got!r}"


def _command(server: list[str]) -> list[str]:
    if server[0] in SCRIPTS:
        return [sys.executable, *SCRIPTS[server[0]], *server[1:]]
    if server[0] == "python":
        return [sys.executable, *server[1:]]
    return server


def replay(session: Session, workdir: Path, block_id: str, paths: Sequence[str] = ()) -> None:
    replace: dict[str, str] = {}
    srv = None
    if session.emulator is not None:
        from gahp_boinc.emulator import EmulatorServer

        srv = EmulatorServer(state_dir=workdir / "emu", job_delay=0.05, inline_apps=True)
        srv.start()
        replace = {session.emulator[0]: srv.url, session.emulator[1]: srv.authenticator}
    for name, content in session.files.items():
        (workdir / name).write_text(content)
    env = {k: v.replace("$TMP", str(workdir)) for k, v in session.env.items()}
    env["PYTHONPATH"] = os.pathsep.join(
        [*paths, str(DOCS / "examples"), str(ROOT), *filter(None, [env.get("PYTHONPATH")])]
    )

    def sub(text: str) -> str:
        for literal, real in replace.items():
            text = text.replace(literal, real)
        return text

    client = GahpClient(_command(session.server), env=env, cwd=workdir, keep_r=True)
    try:
        steps = session.steps
        for n, exp in enumerate(steps[0].expected):
            got = client.banner if n == 0 else client.read_raw()
            _check(exp, got.rstrip("\r"), f"{block_id}: banner")
        prefix = ""
        for step in steps[1:]:
            if step.sleep:
                time.sleep(step.sleep)
            where = f"{block_id}: > {step.request}"
            request = sub(step.request or "")
            client.send_raw(request.encode() + b"\r\n")
            words = split(request)
            head = steps and step.expected[:1]
            m = re.fullmatch(r"(?P<p>.*?)S (?P<n>\d+)", head[0]) if head else None
            if words[0].upper() == "RESULTS" and m and int(m["n"]) > 0:
                want = int(m["n"])
                got_lines: list[str] = []
                deadline = time.monotonic() + 20
                first = True
                while True:
                    reply = client.read_raw(20).rstrip("\r")
                    while not first and reply == f"{prefix}R":  # a result after the last RESULTS
                        reply = client.read_raw(20).rstrip("\r")
                    count = int(split(reply[len(prefix) :])[1])
                    if first or count:
                        got_lines += [client.read_raw(20).rstrip("\r") for _ in range(count)]
                    first = False
                    if len(got_lines) >= want or time.monotonic() > deadline:
                        break
                    time.sleep(0.05)
                    client.send_raw(request.encode() + b"\r\n")
                _check(head[0], f"{prefix}S {len(got_lines)}", where)
                assert len(got_lines) == want, f"{where}: {got_lines}"
                for exp, got in zip(step.expected[1:], got_lines, strict=True):
                    _check(sub(exp), got, where)
                continue
            for exp in step.expected:
                _check(sub(exp), client.read_raw(20).rstrip("\r"), where)
            if words[0].upper() == "RESPONSE_PREFIX" and step.expected[:1] == ["S"]:
                prefix = words[1]
        if not any(split(st.request or "x")[0].upper() == "QUIT" for st in steps[1:]):
            client.send_raw(b"QUIT\r\n")
        assert client.proc.wait(10) == 0
    finally:
        client.close()
        if srv is not None:
            srv.stop()


SESSIONS = [b for b in ALL if b.lang == "gahp-session" and not b.skipped]


@pytest.mark.parametrize("block", SESSIONS, ids=lambda b: b.id)
def test_gahp_sessions(block: Block, tmp_path: Path) -> None:
    paths = materialize(block.page, tmp_path / "project")
    replay(parse_session(block.body), tmp_path, block.id, paths)


def test_session_masks_and_parsing() -> None:
    s = parse_session("# server: gahp-server --backend x\n$V ... $\n> ECHO 1 a\\ b\nS\n")
    assert s.server == ["gahp-server", "--backend", "x"]
    assert [(st.request, st.expected) for st in s.steps] == [
        (None, ["$V ... $"]),
        ("ECHO 1 a\\ b", ["S"]),
    ]
    assert _pattern("1 NULL ... 2").match("1 NULL 17.5 x 2")
    assert not _pattern("1 NULL").match("1 NULL extra")


# ---- README and CI --------------------------------------------------------------------------


def test_readme_commands_match_ci() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install . && boinc-gahp-demo" in readme
    assert "python -m pytest" in readme
    assert re.search(r"^\s*python3? -m pytest\b", ci, re.M), "CI must run the README's tests"
    assert re.search(r"pip install .*-e '\.\[test\]'", ci)
