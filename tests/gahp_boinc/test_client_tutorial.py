"""The tutorial docs/boinc-client.md: published in the site's navigation, and its Python
examples run, in order, in one namespace, against the emulator they start themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "boinc-client.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def test_the_tutorial_is_in_the_navigation():
    assert "boinc-client.md" in (ROOT / "mkdocs.yml").read_text()


def test_the_tutorial_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    text = PAGE.read_text()
    blocks = BLOCK.findall(text)
    assert len(blocks) >= 5 and "<!-- no-test -->" not in text
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "boinc_client_tutorial"}
    try:
        for i, body in enumerate(blocks):
            exec(compile(body, f"{PAGE.name} block {i + 1}", "exec"), namespace)  # noqa: S102
    finally:
        emu = namespace.get("emu")
        if emu is not None:
            emu.stop()  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    assert "batch 1: 2 files uploaded" in out
    assert "GOODBYE" in out and "error 3 too_many_total_results" in out
    assert (tmp_path / "results" / "tutorial-4-a.out").read_text() == "HELLO, VOLUNTEERS\n"
