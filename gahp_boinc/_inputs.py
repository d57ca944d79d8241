"""Input files a job takes other than staged ones: BOINC's ``inline``, ``remote``, ``local``
and ``semilocal`` modes of submit_batch (``local_staged`` is what :meth:`BoincClient.submit`
does with a local path).

Each is checked when made (a :class:`ValueError` names what is wrong) against what BOINC's
``submit_rpc_handler.php`` and ``create_work`` accept without corrupting the job:

- :class:`InlineInput`: the file's content in the request; the server writes it to
  ``jf_<md5>``. Text only (XML carries no NUL and turns CR into LF), not empty (PHP reads a
  0-byte write as a failure), at most :data:`MAX_INLINE_BYTES`.
- :class:`RemoteInput`: a URL volunteers download themselves, with its size and MD5; the
  server never reads it. ``create_work`` copies the URL unescaped into the job's XML and
  keeps 1023 bytes of it, and every volunteer sees it: no credentials, no XML specials.
- :class:`ServerFile`: a path on the project server (``local``), copied by the server into
  its download directory.
- :class:`ServerUrl`: a URL the project server fetches and stages (``semilocal``).

BOINC's sixth mode, ``sandbox``, is not offered: in ``stage_file()`` its case has no
``return`` and falls through into ``inline``, so the job gets a file whose content is the
sandbox file's *name* (see docs/boinc-client.md).
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse

import attrs

MAX_INLINE_BYTES = 1024 * 1024
"""The largest inline input (UTF-8 bytes): it travels in the request, which PHP holds whole."""
MAX_URL_BYTES = 1023
"""create_work keeps a remote file's URL in a 1024-byte buffer (longer ones are cut)."""
MAX_PATH_BYTES = 4096
MAX_REMOTE_BYTES = 2**53
"""create_work reads the size as a double: sizes past 2**53 lose their units."""

_MD5 = re.compile(r"[0-9a-f]{32}")
_XML_BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufffe\uffff]")
_URL_BAD = re.compile(r"[\x00-\x20\x7f<>\"'&\\]")


def _source(mode: str, source: str) -> str:
    return f"<input_file>\n<mode>{mode}</mode>\n<source>{_escape(source)}</source>\n</input_file>\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _check_url(what: str, url: str) -> None:
    if not isinstance(url, str):
        raise ValueError(f"{what}: a URL string, not {type(url).__name__}")
    if len(url.encode()) > MAX_URL_BYTES:
        raise ValueError(f"{what}: over {MAX_URL_BYTES} bytes (BOINC's create_work cuts it)")
    if _URL_BAD.search(url) or not url.isascii():
        raise ValueError(
            f"{what}: blanks, control characters, non-ASCII, &, <, >, quotes and backslashes "
            "are refused (BOINC copies the URL unescaped into the job's XML); "
            "percent-encode them"
        )
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what}: an http:// or https:// URL with a host, not {url[:80]!r}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError(f"{what}: no user or password in the URL (it is shown to every volunteer)")


@attrs.frozen
class InlineInput:
    """An input file given by its content (``inline``)."""

    content: str

    def __attrs_post_init__(self) -> None:
        value = self.content
        if not isinstance(value, str):
            raise ValueError(f"inline input: text, not {type(value).__name__}")
        if not value:
            raise ValueError("inline input: empty (BOINC fails on an empty inline file)")
        if len(value.encode()) > MAX_INLINE_BYTES:
            raise ValueError(f"inline input: over {MAX_INLINE_BYTES} bytes (stage it instead)")
        if "\r" in value:
            raise ValueError("inline input: CR (the server's XML parser turns it into LF)")
        if _XML_BAD.search(value):
            raise ValueError("inline input: control characters cannot travel in XML")

    mode = "inline"

    @property
    def physical_name(self) -> str:
        """The name the server gives the file (``jf_`` and the content's MD5)."""
        return "jf_" + hashlib.md5(self.content.encode()).hexdigest()

    def xml(self) -> str:
        return _source("inline", self.content)


@attrs.frozen
class RemoteInput:
    """An input file volunteers download from ``url`` (``remote``); ``nbytes`` and ``md5``
    must be the file's, volunteers check them."""

    url: str
    nbytes: int
    md5: str = attrs.field(converter=lambda v: v.lower() if isinstance(v, str) else v)

    def __attrs_post_init__(self) -> None:
        _check_url("remote input", self.url)
        if isinstance(self.nbytes, bool) or not isinstance(self.nbytes, int):
            raise ValueError(f"remote input: nbytes an integer, not {self.nbytes!r}")
        if not 0 < self.nbytes <= MAX_REMOTE_BYTES:
            raise ValueError(f"remote input: nbytes between 1 and 2**53, not {self.nbytes}")
        if not isinstance(self.md5, str) or not _MD5.fullmatch(self.md5):
            raise ValueError("remote input: md5 must be 32 hexadecimal digits")

    mode = "remote"

    @property
    def physical_name(self) -> str:
        return "jf_" + self.md5

    def xml(self) -> str:
        return (
            "<input_file>\n<mode>remote</mode>\n"
            f"<url>{_escape(self.url)}</url>\n<nbytes>{self.nbytes}</nbytes>\n"
            f"<md5>{self.md5}</md5>\n</input_file>\n"
        )


@attrs.frozen
class ServerFile:
    """A file already on the project server, by its absolute path (``local``): the server
    copies it into its download directory (the web server's user must be able to read it)."""

    path: str

    def __attrs_post_init__(self) -> None:
        p = self.path
        if not isinstance(p, str) or not p.startswith("/"):
            raise ValueError(f"server file: an absolute path, not {p!r}")
        if len(p.encode()) > MAX_PATH_BYTES or _XML_BAD.search(p) or "\n" in p or "\t" in p:
            raise ValueError("server file: control characters or over 4096 bytes")
        if "/../" in p + "/" or p.endswith("/"):
            raise ValueError(f"server file: a plain path to a file, not {p!r}")

    mode = "local"

    def xml(self) -> str:
        return _source("local", self.path)


@attrs.frozen
class ServerUrl:
    """A file the project server downloads from ``url`` and stages (``semilocal``)."""

    url: str

    def __attrs_post_init__(self) -> None:
        _check_url("server URL input", self.url)

    mode = "semilocal"

    def xml(self) -> str:
        return _source("semilocal", self.url)


InputSpec = InlineInput | RemoteInput | ServerFile | ServerUrl
"""An input file given otherwise than as a local file to stage."""

INPUT_TYPES = (InlineInput, RemoteInput, ServerFile, ServerUrl)


def input_xml(item: str | InputSpec) -> str:
    """The ``<input_file>`` of submit_batch: a str is a staged file's physical name."""
    if isinstance(item, str):
        return _source("local_staged", item)
    return item.xml()


def check_no_secret(item: InputSpec, authenticator: str) -> None:
    """Refuse an input whose URL or path holds the account's authenticator."""
    text = item.path if isinstance(item, ServerFile) else getattr(item, "url", "")
    if authenticator and authenticator in urllib.parse.unquote(text):
        raise ValueError(f"{item.mode} input: its URL or path holds the account's authenticator")
