"""HTCondor's argument and environment syntaxes, as submit ClassAds carry them (pure).

``Arguments`` and ``Environment`` use the V2 syntax: whitespace separates items, single
quotes group (``''`` inside them is one quote). ``Args`` (V1) is split on whitespace
only; ``Env`` (V1) is ``NAME=value`` items separated by semicolons.
"""

from __future__ import annotations

import re

from gahp_blah.errors import BlahError


class SyntaxProblem(BlahError, ValueError):
    """An argument or environment string that cannot be read."""


_QUOTED = re.compile(r"'((?:[^']|'')*)'")
"""A single-quoted span (``''`` inside it is one quote)."""


def split_v2(text: str) -> list[str]:
    """Split a V2 arguments string into arguments."""
    out: list[str] = []
    cur: list[str] = []
    have = False  # an argument is open (even an empty quoted one)
    i = 0
    while i < len(text):
        c = text[i]
        if c == "'":
            m = _QUOTED.match(text, i)
            if m is None:
                raise SyntaxProblem(f"unbalanced single quote in {text!r}")
            cur.append(m.group(1).replace("''", "'"))
            have, i = True, m.end()
            continue
        if not c.isspace():
            cur.append(c)
            have = True
        elif have:
            out.append("".join(cur))
            cur, have = [], False
        i += 1
    if have:
        out.append("".join(cur))
    return out


def split_v1(text: str) -> list[str]:
    """Split a V1 arguments string: whitespace separates, nothing quotes."""
    return text.split()


def parse_env_v2(text: str) -> dict[str, str]:
    """``NAME=value`` items in V2 syntax."""
    return _pairs(split_v2(text), text)


def parse_env_v1(text: str) -> dict[str, str]:
    """``NAME=value;NAME=value`` (V1)."""
    return _pairs([item for item in text.split(";") if item.strip()], text)


def _pairs(items: list[str], text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        name = name.strip()
        if not eq or not name:
            raise SyntaxProblem(f"environment item {item!r} is not NAME=value")
        env[name] = value
    return env
