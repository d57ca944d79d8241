"""Sending one BOINC RPC through a transport: the request slots, the deadline, and the
retry policy (idempotent RPCs are retried with backoff on transport errors and HTTP
502/503/504, honouring Retry-After, within a deadline; the others are sent once)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

import attrs

from gahp_boinc._errors import RpcError
from gahp_boinc._http import HttpTimeout, HttpTooLarge, HttpTransportError, Slots
from gahp_boinc._replies import status_error
from gahp_boinc._transport import Form, Reply, Transport

log = logging.getLogger("gahp.boinc.rpc")


@attrs.frozen
class RetryPolicy:
    """How often and how long an idempotent RPC is tried: at most ``max_tries`` times,
    waiting ``backoff`` seconds doubled at each retry (with jitter, at least a 503's
    Retry-After) through ``sleep``, the RPC and its retries within ``deadline`` seconds."""

    deadline: float = 240.0
    max_tries: int = 5
    backoff: float = 0.5
    sleep: Callable[[float], Awaitable[None]] = attrs.field(default=asyncio.sleep, repr=False)

    def delay(self, err: RpcError, attempt: int, elapsed: float) -> float | None:
        """How long to wait before trying again after ``err`` (try ``attempt``, ``elapsed``
        seconds since the first began); None when it is not retryable or the tries or
        the deadline are spent."""
        delay = self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random())
        if err.retry_after is not None:
            delay = max(delay, err.retry_after)
        if not err.retryable or attempt >= self.max_tries or elapsed + delay > self.deadline:
            return None
        return delay


async def post(
    transport: Transport,
    slots: Slots,
    policy: RetryPolicy,
    url: str,
    command: str,
    form: Form | None,
    *,
    limit: int | None,
    idempotent: bool = True,
) -> bytes:
    """Send ``form`` to ``url`` (a GET when None) and return the body of its 200 reply
    (at most ``limit`` bytes); retry what is safe to retry; any failure as an
    :class:`RpcError` naming ``command``."""
    method = "GET" if form is None else "POST"
    start = time.monotonic()
    end = asyncio.get_running_loop().time() + policy.deadline
    attempt = 0
    while True:
        attempt += 1
        got = await _attempt(transport, slots, method, url, command, form, limit, end, policy)
        if not isinstance(got, RpcError):
            return got
        delay = policy.delay(got, attempt, time.monotonic() - start) if idempotent else None
        if delay is None:
            raise got
        log.info("%s failed (%s); retry %d in %.1f s", command, got, attempt, delay)
        await policy.sleep(delay)


async def _attempt(
    transport: Transport,
    slots: Slots,
    method: str,
    url: str,
    command: str,
    form: Form | None,
    limit: int | None,
    end: float,
    policy: RetryPolicy,
) -> bytes | RpcError:
    """One try of :func:`post`: the reply's body, or the error to retry on (if it may be);
    an error never worth a retry is raised."""
    try:
        async with asyncio.timeout_at(end):
            async with slots.hold(url):
                sent = time.monotonic()
                reply = await transport.send(method, url, form, limit)
            _log_reply(command, reply, sent)
    except TimeoutError:
        raise RpcError(
            f"{command}: no reply from {url} within the deadline ({policy.deadline:g} s)"
        ) from None
    except HttpTimeout as exc:
        return RpcError(f"{command}: no reply from {url} in time ({exc.kind})", retryable=True)
    except HttpTooLarge as exc:
        raise RpcError(f"{command}: reply from {url} too large ({exc})") from None
    except HttpTransportError as exc:
        return RpcError(f"{command}: cannot reach {url}: {exc}", retryable=exc.retryable)
    except OSError as exc:
        raise RpcError(f"{command}: cannot read input file: {exc}") from None
    refused = status_error(reply, command, url)
    return reply.content if refused is None else refused


def _log_reply(command: str, reply: Reply, sent: float) -> None:
    """Log a reply's status, size and time since ``sent`` (at DEBUG level)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "%s: HTTP %d, %d bytes in %.3f s",
            command,
            reply.status_code,
            len(reply.content),
            time.monotonic() - sent,
        )
