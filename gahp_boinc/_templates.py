"""Per-job input templates for replication and quorum.

submit_batch sets ``min_quorum``, ``target_nresults``, ``max_error_results``,
``max_total_results`` and ``max_success_results`` only through a job's own
``<input_template>``, which replaces the application's template whole. So a job that asks for
any of them gets the application's template (from get_templates) with those values set in
its ``<workunit>``; a template the job brings is amended the same way.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

REPLICATION_FIELDS = (
    "min_quorum",
    "target_nresults",
    "max_error_results",
    "max_total_results",
    "max_success_results",
)
MAX_REPLICATION = 1000
"""The largest value accepted for any of them (each instance is a volunteer's run)."""

_DECL = re.compile(rb"^\s*<\?xml[^>]*\?>")


def check_replication(values: dict[str, int | None]) -> None:
    """Refuse values BOINC's create_work refuses (or that no project would want): each
    1 to :data:`MAX_REPLICATION`; no more successes, errors or targets than total results."""
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{key}: an integer, not {value!r}")
        if not 1 <= value <= MAX_REPLICATION:
            raise ValueError(f"{key}: between 1 and {MAX_REPLICATION}, not {value}")

    def pair(low: str, high: str) -> None:
        a, b = values.get(low), values.get(high)
        if a is not None and b is not None and a > b:
            raise ValueError(f"{low} ({a}) is over {high} ({b}): create_work refuses the job")

    pair("max_success_results", "max_total_results")
    pair("max_error_results", "max_total_results")
    pair("target_nresults", "max_success_results")
    pair("min_quorum", "target_nresults")


def input_template_of(body: bytes) -> str:
    """The ``<input_template>`` element of a get_templates reply, as XML text ("" if none)."""
    try:
        root = ET.fromstring(_DECL.sub(b"", body, count=1))
    except ET.ParseError:
        return ""
    el = root.find(".//input_template")
    return ET.tostring(el, encoding="unicode") if el is not None else ""


def with_replication(template: str, values: dict[str, Any]) -> str:
    """``template`` (an ``<input_template>``) with the given replication values set in its
    ``<workunit>`` (added where missing)."""
    root = ET.fromstring(template)
    wu = root.find("workunit")
    if wu is None:
        wu = ET.SubElement(root, "workunit")
    for key in REPLICATION_FIELDS:
        value = values.get(key)
        if value is None:
            continue
        el = wu.find(key)
        if el is None:
            el = ET.SubElement(wu, key)
        el.text = str(int(value))
    return ET.tostring(root, encoding="unicode")
