"""BLAH job ids: ``<lrms>/<yyyymmdd>/<native id>``, usable by any later server process.

The C blahp's ids have the same form, except for Grid Engine, whose date is a timestamp
(``sge/<yyyymmddHHMMSS>/<native id>``): both are accepted, so jobs the C blahp submitted are
followed by this server after a switch (the date is never used to find the job)."""

from __future__ import annotations

import datetime as dt
import re

import attrs

from gahp_blah.errors import BlahError

_LRMS = re.compile(r"^[a-z][a-z0-9_-]*$")
_DATE = re.compile(r"^\d{8}(?:\d{6})?$")  # the C blahp's sge ids: 14 digits


class BadJobId(BlahError, ValueError):
    """A string that is not a job id this server hands out."""


@attrs.frozen
class JobId:
    """A parsed job id."""

    lrms: str
    date: str
    native: str

    def __str__(self) -> str:
        return f"{self.lrms}/{self.date}/{self.native}"


def make_job_id(lrms: str, native: str, when: dt.date | None = None) -> JobId:
    """The id for a job the ``lrms`` driver knows as ``native``."""
    if not native or any(c.isspace() for c in native):
        raise BadJobId(f"driver returned an unusable job id {native!r}")
    day = (when or dt.date.today()).strftime("%Y%m%d")
    return JobId(lrms, day, native)


def parse_job_id(text: str) -> JobId:
    """Parse an id from a request; :class:`BadJobId` says what is wrong."""
    parts = text.split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise BadJobId(f"malformed job id {text!r} (expected <lrms>/<date>/<id>)")
    lrms, date, native = parts
    if not _LRMS.match(lrms) or not _DATE.match(date) or any(c.isspace() for c in native):
        raise BadJobId(f"malformed job id {text!r} (expected <lrms>/<date>/<id>)")
    return JobId(lrms, date, native)
