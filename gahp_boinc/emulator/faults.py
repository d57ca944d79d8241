"""Fault injection: make the next N matching requests misbehave.

Kinds (``FAULT_KINDS``); "before" kinds answer without executing the RPC, "after" kinds
execute it and then spoil the reply (the lost-reply case a client must survive):

- ``http500``      before: HTTP 500 with an HTML body
- ``http503``      before: HTTP 503 with ``Retry-After: <seconds or 1>``
- ``maintenance``  before: HTTP 200, ``<error>`` -183 ``project down for maintenance``
- ``database``     before: the project without its database: HTTP 200, ``<error>`` -138
                   ``Can't connect to database`` in the command element (RPC pages), or the
                   project's "Unable to handle request" HTML page (download pages)
- ``reset``        before: close the connection (RST) without any reply
- ``delay``        sleep ``seconds`` (default 1), then answer normally
- ``malformed_xml`` after: HTTP 200 whose body is cut in half (invalid XML, consistent length)
- ``truncated``    after: full Content-Length announced, half the body sent, connection closed
- ``reset_after``  after: close the connection (RST) without a reply
"""

from __future__ import annotations

import threading

import attrs

FAULT_KINDS = (
    "http500",
    "http503",
    "maintenance",
    "database",
    "reset",
    "delay",
    "malformed_xml",
    "truncated",
    "reset_after",
)
BEFORE = frozenset({"http500", "http503", "maintenance", "database", "reset"})


@attrs.define
class Fault:
    kind: str
    count: int = 1
    rpc: str | None = None
    seconds: float | None = None

    def matches(self, rpc: str, endpoint: str) -> bool:
        if self.rpc is None:
            return True
        want = self.rpc.removesuffix(".php")
        return want in (rpc, endpoint.removesuffix(".php"))


class FaultInjector:
    """A thread-safe queue of pending faults; the first matching one fires."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.fired: dict[str, int] = {}

    def add(
        self, kind: str, count: int = 1, rpc: str | None = None, seconds: float | None = None
    ) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; choose from {', '.join(FAULT_KINDS)}")
        if count < 1:
            raise ValueError("count must be >= 1")
        with self._lock:
            self._faults.append(Fault(kind, count, rpc, seconds))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def pending(self) -> list[Fault]:
        with self._lock:
            return [attrs.evolve(f) for f in self._faults]

    def take(self, rpc: str, endpoint: str) -> Fault | None:
        """Consume one use of the first fault matching this request."""
        with self._lock:
            for f in self._faults:
                if f.matches(rpc, endpoint):
                    f.count -= 1
                    if f.count <= 0:
                        self._faults.remove(f)
                    self.fired[f.kind] = self.fired.get(f.kind, 0) + 1
                    return attrs.evolve(f)
        return None


def parse_fault_spec(spec: str) -> Fault:
    """Parse a CLI spec ``KIND[,count=N][,rpc=NAME][,seconds=S]``."""
    kind, *opts = spec.split(",")
    f = Fault(kind.strip())
    if f.kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {f.kind!r}; choose from {', '.join(FAULT_KINDS)}")
    for opt in opts:
        key, _, value = opt.partition("=")
        key = key.strip()
        if key == "count":
            f.count = int(value)
        elif key == "rpc":
            f.rpc = value.strip()
        elif key == "seconds":
            f.seconds = float(value)
        else:
            raise ValueError(f"bad fault option {opt!r}")
    return f
