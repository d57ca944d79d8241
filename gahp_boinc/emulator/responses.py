"""Byte-exact reply bodies of a BOINC 8.3 project's submission pages.

Every builder returns a :class:`Reply`. The whitespace (indentation, the trailing
``"\\n        </cmd>\\n    "``), the ISO-8859-1 declaration over UTF-8 content and the
unescaped names are those of the real PHP pages; see ``tests/gahp_boinc/emulator/fixtures``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from email.utils import formatdate

import attrs

from gahp_boinc.emulator.errors import EmulatorError

XML_DECL = '<?xml version="1.0" encoding="ISO-8859-1" ?>\n'
XML_TYPE = "text/xml;charset=UTF-8"
HTML_TYPE = "text/html; charset=UTF-8"
OCTET_TYPE = "application/octet-stream"


@attrs.frozen
class Reply:
    """One HTTP reply: status, body and extra headers."""

    body: bytes
    status: int = 200
    content_type: str = XML_TYPE
    headers: tuple[tuple[str, str], ...] = ()
    #: answer with an ``HTTP/1.0`` status line and close, as Apache does after a PHP crash
    crashed: bool = False
    #: a Content-Length announced but not honoured: the body is cut short, the connection closed
    declared_length: int | None = None


class RequestRefused(EmulatorError):
    """An error the PHP page reports with ``xml_error(num, msg)``."""

    def __init__(self, msg: str, num: int = -1) -> None:
        super().__init__(msg)
        self.msg = msg
        self.num = num


class PhpCrash(EmulatorError):  # noqa: N818 - named after what it emulates
    """An uncaught PHP exception: HTTP 500 with what was echoed so far (display_errors off)."""

    def __init__(self, partial: str) -> None:
        super().__init__("PHP fatal error")
        self.partial = partial


def php_float(x: float) -> str:
    """Format a float as PHP's ``echo`` does (precision=14: ``1.0E-7``, ``1.0E+14``)."""
    s = f"{x:.14G}"
    if "E" in s:
        mant, exp = s.split("E")
        if "." not in mant:
            mant += ".0"
        s = f"{mant}E{'+' if int(exp) >= 0 else '-'}{abs(int(exp))}"
    return s


def db_float(x: float) -> str:
    """Format a DOUBLE column as the page echoes it: PHP 8's mysqlnd returns it as a PHP
    float, printed with precision 14 (1795371743.369 for 1795371743.368999)."""
    return php_float(x)


def htmlspecialchars(s: str) -> str:
    """PHP 8 ``htmlspecialchars`` with its default flags (ENT_QUOTES)."""
    return (
        s.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#039;")
    )


def xml(body: str, status: int = 200) -> Reply:
    return Reply(body=(XML_DECL + body).encode("utf-8"), status=status)


def _close(cmd: str) -> str:
    return f"\n        </{cmd}>\n    "


def _error_xml(msg: str, num: int = -1, extra: Iterable[tuple[str, str]] = ()) -> str:
    more = "".join(f"    <{k}>{v}</{k}>\n" for k, v in extra)
    return (
        f"<error>\n    <error_num>{num}</error_num>\n    <error_msg>{msg}</error_msg>\n"
        f"{more}</error>\n"
    )


def error(
    msg: str, num: int = -1, cmd: str | None = None, extra: Iterable[tuple[str, str]] = ()
) -> Reply:
    """``xml_error()``: inside the command element if it was opened, else alone; ``extra``
    elements (file, line) follow the message."""
    err = _error_xml(msg, num, extra)
    if cmd is None:
        return xml(err)
    return xml(f"<{cmd}>\n{err}</{cmd}>\n")


def crash(partial: str) -> Reply:
    return Reply(body=(XML_DECL + partial).encode("utf-8"), status=500, crashed=True)


def ping() -> Reply:
    return xml("<ping>\n<success>1</success>" + _close("ping"))


def batch_id(cmd: str, bid: int) -> Reply:
    """create_batch and submit_batch."""
    return xml(f"<{cmd}>\n<batch_id>{bid}</batch_id>" + _close(cmd))


def templates(input_template: str, output_template: str) -> Reply:
    return xml(
        f"<get_templates>\n<templates>\n{input_template}\n{output_template}\n</templates>"
        + _close("get_templates")
    )


def query_files(absent: Iterable[int]) -> Reply:
    files = "".join(f"<file>{i}</file>\n" for i in absent)
    return xml(f"<query_files>\n<absent_files>\n{files}</absent_files>" + _close("query_files"))


def upload_files() -> Reply:
    return xml("<upload_files>\n<success/>" + _close("upload_files"))


def query_batch2(server_time: float, batches: Iterable[list[tuple[str, str]]]) -> Reply:
    parts = [f"<query_batch2>\n<server_time>{php_float(server_time)}</server_time>\n"]
    for jobs in batches:
        parts.append(f"   <batch_size>{len(jobs)}</batch_size>\n")
        parts.extend(
            f"    <job>\n        <job_name>{name}</job_name>\n"
            f"        <status>{status}</status>\n    </job>\n"
            for name, status in jobs
        )
    parts.append("</query_batch2>\n")
    return xml("".join(parts))


def abort_jobs(names: Iterable[str], failed: RequestRefused | None = None) -> Reply:
    """The aborted jobs, then success, or the error that stopped the page."""
    # "<aborted NAME>" is not well-formed XML: the real page prints exactly this.
    aborted = "".join(f"<aborted {n}>\n" for n in names)
    if failed is not None:
        return xml(f"<abort_jobs>\n{aborted}{_error_xml(failed.msg, failed.num)}</abort_jobs>\n")
    return xml(f"<abort_jobs>\n{aborted}<success>1</success>" + _close("abort_jobs"))


def query_job(instances: Iterable[tuple[str, int, str, Sequence[int]]]) -> Reply:
    """query_job: per instance its name, id, state text and, once over, its output sizes."""
    parts = ["<query_job>\n"]
    for name, rid, state, sizes in instances:
        parts.append(
            f"    <instance>\n        <name>{name}</name>\n        <id>{rid}</id>\n"
            f"        <state>{state}</state>\n"
        )
        parts.extend(
            f"        <outfile>\n            <size>{size}</size>\n        </outfile>\n"
            for size in sizes
        )
        parts.append("</instance>\n")
    parts.append("</query_job>\n")
    return xml("".join(parts))


def estimate_batch(seconds: float) -> Reply:
    body = f"<estimate_batch>\n<seconds>{php_float(seconds)}</seconds>"
    return xml(body + _close("estimate_batch"))


def job_counts(counts: Iterable[tuple[str, int]]) -> Reply:
    """server_status.php?counts=1."""
    items = "".join(f"<{name}>{value}</{name}>\n" for name, value in counts)
    return xml(f"<job_counts>\n{items}</job_counts>\n")


def abort_batch() -> Reply:
    return xml("<abort_batch>\n<success>1</success>" + _close("abort_batch"))


def retire_batch() -> Reply:
    return xml("<retire_batch>\n<success>1</success>" + _close("retire_batch"))


def set_expire_time() -> Reply:
    return xml("<set_expire_time>\n<success>1</success></set_expire_time>\n")


def batch_params(b: dict, get_cpu_time: bool) -> str:
    """``print_batch_params()`` of submit_rpc_handler.php (``b`` is a row plus app_name)."""
    s = (
        f"\n        <id>{b['id']}</id>\n"
        f"        <create_time>{b['create_time']}</create_time>\n"
        f"        <expire_time>{db_float(b['expire_time'])}</expire_time>\n"
        f"        <est_completion_time>0</est_completion_time>\n"
        f"        <njobs>{b['njobs']}</njobs>\n"
        f"        <fraction_done>{php_float(b['fraction_done'])}</fraction_done>\n"
        f"        <nerror_jobs>{b['nerror_jobs']}</nerror_jobs>\n"
        f"        <state>{b['state']}</state>\n"
        f"        <completion_time>{db_float(b['completion_time'])}</completion_time>\n"
        f"        <credit_estimate>0</credit_estimate>\n"
        f"        <credit_canonical>{php_float(b.get('credit_canonical', 0))}</credit_canonical>\n"
        f"        <name>{b['name']}</name>\n"
        f"        <app_name>{b['app_name']}</app_name>\n"
    )
    if get_cpu_time:
        s += f"        <total_cpu_time>{php_float(b['total_cpu_time'])}</total_cpu_time>\n"
    return s


def query_batches(batches: Iterable[dict], get_cpu_time: bool) -> Reply:
    body = "".join(f"    <batch>\n{batch_params(b, get_cpu_time)}   </batch>\n" for b in batches)
    return xml(f"<query_batches>\n{body}</query_batches>\n")


WU_ERRORS = (
    (1, "couldnt_send_result"),
    (2, "too_many_error_results"),
    (4, "too_many_success_results"),
    (8, "too_many_total_results"),
    (16, "cancelled"),
    (32, "no_canonical_result"),
)


def query_batch(b: dict, jobs: Iterable[dict], get_cpu_time: bool, details: bool) -> Reply:
    parts = ["<query_batch>\n", batch_params(b, get_cpu_time)]
    for j in jobs:
        parts.append(
            f"        <job>\n        <id>{j['id']}</id>\n        <name>{j['name']}</name>\n"
            f"        <canonical_instance_id>{j['canonical_resultid']}</canonical_instance_id>\n"
        )
        if details:
            # one element per bit of the workunit's error mask
            parts.extend(
                f"   <error>{name}</error>\n" for bit, name in WU_ERRORS if j["error_mask"] & bit
            )
            status = {"UNSENT": "queued", "IN_PROGRESS": "in_progress"}.get(
                j["status"], j["status"].lower()
            )
            if status == "done":
                parts.append(f"            <cpu_time>{db_float(j['cpu_time'])}</cpu_time>\n")
            elif status == "error" and j["exit_status"] is not None:
                parts.append(f"            <exit_status>{j['exit_status']}</exit_status>\n")
            parts.append(f"            <status>{status}</status>\n")
        parts.append("        </job>\n")
    parts.append("</query_batch>\n")
    return xml("".join(parts))


def completed_job_head(error_mask: int) -> str:
    return f"<query_completed_job>\n<completed_job>\n   <error_mask>{error_mask}</error_mask>\n"


def completed_job(
    error_mask: int,
    resultid: int,
    exit_status: int,
    elapsed: float,
    cpu: float,
    stderr_out: str,
    error_resultid: int = 0,
) -> Reply:
    which = (
        f"   <error_resultid>{error_resultid}</error_resultid>\n"
        if error_resultid
        else f"   <canonical_resultid>{resultid}</canonical_resultid>\n"
    )
    return xml(
        completed_job_head(error_mask) + which + f"   <exit_status>{exit_status}</exit_status>\n"
        f"   <elapsed_time>{db_float(elapsed)}</elapsed_time>\n"
        f"   <cpu_time>{db_float(cpu)}</cpu_time>\n"
        f"   <stderr_out><![CDATA[\n{htmlspecialchars(stderr_out)}   ]]></stderr_out>\n"
        "</completed_job>" + _close("query_completed_job")
    )


def download_error(msg: str) -> Reply:
    """get_output.php's ``die("ERROR: ...")``."""
    return Reply(body=f"ERROR: {msg}".encode(), content_type=HTML_TYPE)


def apache_not_found(server: str, host: str, port: int) -> bytes:
    """The body of Apache 2.4's 404 page."""
    return (
        '<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.org/TR/html4/strict.dtd">'
        "\n<html><head>\n<title>404 Not Found</title>\n</head><body>\n<h1>Not Found</h1>\n"
        "<p>The requested URL was not found on this server.</p>\n<hr>\n"
        f"<address>{server} Server at {host} Port {port}</address>\n</body></html>\n"
    ).encode()


def error_page(message: str) -> Reply:
    """A BOINC web page's ``error_page()`` (without the project's site navigation)."""
    body = (
        '<!DOCTYPE html>\n        <html lang="en">\n        <head>\n'
        "    <title>Unable to handle request</title>\n        </head>\n    <body >\n"
        f"    <h2>Unable to handle request</h2>\n{message}<br>\n        </body>\n        </html>\n"
    )
    return Reply(
        body=body.encode(),
        content_type="text/html; charset=utf-8",
        headers=(
            ("Expires", "Mon, 26 Jul 1997 05:00:00 UTC"),
            ("Last-Modified", formatdate(usegmt=True).replace("GMT", "UTC")),
            ("Cache-Control", "no-cache, must-revalidate, post-check=0, pre-check=0"),
            ("Pragma", "no-cache"),
        ),
    )


def plain(text: str) -> Reply:
    """A bare text/html body (what a PHP page echoes before ``exit``)."""
    return Reply(body=text.encode(), content_type=HTML_TYPE)


def redirect(location: str) -> Reply:
    """An empty 302 to ``location``."""
    return Reply(body=b"", status=302, content_type=HTML_TYPE, headers=(("Location", location),))


def missing_arg(name: str) -> Reply:
    """BOINC's ``get_int()`` on a missing or non-numeric parameter: a redirect."""
    return redirect(f"missing_arg_{name}.html")


def _download_headers(filename: str) -> tuple[tuple[str, str], ...]:
    return (
        ("Content-Description", "File Transfer"),
        ("Content-Disposition", f"attachment; filename={filename}"),
        ("Content-Transfer-Encoding", "binary"),
        ("Expires", "0"),
        ("Cache-Control", "must-revalidate, post-check=0, pre-check=0"),
        ("Pragma", "public"),
    )


def download(data: bytes, filename: str) -> Reply:
    return Reply(body=data, content_type=OCTET_TYPE, headers=_download_headers(filename))


def broken_download(filename: str, size: int) -> Reply:
    """Download headers announcing ``size`` bytes, then nothing (the read failed)."""
    return Reply(
        body=b"", content_type=OCTET_TYPE, headers=_download_headers(filename), declared_length=size
    )
