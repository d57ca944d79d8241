"""The ``condor`` driver's helper process: HTCondor's Python bindings (``htcondor2``) behind a
pipe of JSON lines.

The bindings hold Python's global interpreter lock while they wait for a daemon (a schedd
that does not answer stops every thread of the calling process for the bindings' own
timeout, 20 s and more), and their configuration is global to the process.  So they run
here, in a process of their own that the driver can time out and kill, with the
configuration the driver gives it in its environment (``CONDOR_CONFIG``).

One request per line on stdin, one answer per line on stdout: ``{"ok": ...}`` or
``{"error": "..."}``.  Requests (``op``): ``ping``, ``submit`` (``description``, ``count``;
or ``itemdata``: one proc per item, its values for the description's ``$(name)`` macros),
``query`` and ``history`` (``constraint``, ``projection``, ``match``), ``act`` (``action``,
``constraint``, ``reason``).  ``collector`` and ``schedd_name`` (argv 1 and 2, ``-`` for none)
say which schedd.  Runs without gahp installed: standard library and htcondor2 only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

_schedd: Any = None


def _schedd_of(collector: str | None, name: str | None) -> Any:
    global _schedd
    if _schedd is None:
        import htcondor2

        if collector is None and name is None:
            _schedd = htcondor2.Schedd()
        else:
            coll = htcondor2.Collector(collector) if collector else htcondor2.Collector()
            if name:
                ad = coll.locate(htcondor2.DaemonType.Schedd, name)
            else:
                ad = coll.locate(htcondor2.DaemonType.Schedd)
            if ad is None:  # the bindings would then take the local schedd: never
                where = f"collector {collector}" if collector else "the pool's collector"
                raise LookupError(f"no schedd {name or ''} in {where}".replace("  ", " "))
            _schedd = htcondor2.Schedd(ad)
    return _schedd


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None if type(value).__name__ == "Value" else str(value)


def _ads(ads: Any, projection: list[str]) -> list[dict[str, Any]]:
    out = []
    for ad in ads:
        row = {}
        for key in projection:
            if key in ad:
                try:
                    row[key] = _plain(ad.eval(key))
                except Exception:
                    row[key] = None
        out.append(row)
    return out


def _handle(request: dict[str, Any], collector: str | None, name: str | None) -> Any:
    import htcondor2

    op = request["op"]
    schedd = _schedd_of(collector, name)
    if op == "ping":
        schedd.query(constraint="false", projection=["ClusterId"], limit=1)
        return {"version": htcondor2.version()}
    if op == "submit":
        submit = htcondor2.Submit(request["description"])
        if request.get("itemdata"):
            result = schedd.submit(submit, itemdata=iter(request["itemdata"]))
        else:
            result = schedd.submit(submit, count=request["count"])
        return {
            "cluster": result.cluster(),
            "first_proc": result.first_proc(),
            "count": result.num_procs(),
        }
    if op in ("query", "history"):
        projection = list(request["projection"])
        if op == "query":
            ads = schedd.query(constraint=request["constraint"], projection=projection)
        else:
            ads = schedd.history(
                constraint=request["constraint"], projection=projection, match=request["match"]
            )
        return _ads(ads, projection)
    if op == "act":
        action = getattr(htcondor2.JobAction, request["action"])
        # (text, code): the bindings of 25.x drop a reason given as a plain string
        reason = (request["reason"], None) if request.get("reason") else None
        ad = schedd.act(action, request["constraint"], reason)
        return {k: _plain(ad.eval(k)) for k in ad}
    raise ValueError(f"unknown request {op!r}")


def main() -> None:
    global _schedd
    collector = None if sys.argv[1] == "-" else sys.argv[1]
    name = None if sys.argv[2] == "-" else sys.argv[2]
    for line in sys.stdin:
        try:
            answer = {"ok": _handle(json.loads(line), collector, name)}
        except Exception as exc:
            _schedd = None  # located again next time (the schedd may have moved)
            text = " ".join(str(exc).split()) or type(exc).__name__
            answer = {"error": f"{type(exc).__name__}: {text}"[:2000]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
