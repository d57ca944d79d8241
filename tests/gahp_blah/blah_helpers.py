"""What the blahpd tests share (a module of its own: importable by a unique name)."""

from __future__ import annotations


def ad_string(**attrs: object) -> str:
    """A submit ad in the BLAH syntax: strings quoted and escaped, anything else as is."""
    parts = []
    for k, v in attrs.items():
        if isinstance(v, str):
            v = '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{k} = {v}")
    return "[ " + "; ".join(parts) + " ]"
