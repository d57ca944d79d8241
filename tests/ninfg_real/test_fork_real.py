"""The real Ninf-G 5.0.0 client through ``ng_invoke_server.Fork``."""

from __future__ import annotations

import scenarios
from ng_backends import Backend, backend_for


def fork() -> Backend:
    return backend_for("Fork", lambda _kind: None)


def test_sync_call(make_client):
    scenarios.sync_call(make_client, fork())


def test_twenty_handles(make_client):
    scenarios.many_handles(make_client, fork())


def test_array_of_twenty(make_client):
    scenarios.array_handle(make_client, fork())


def test_destruct_mid_call(make_client):
    scenarios.destruct_mid_call(make_client, fork())


def test_start_timeout(make_client):
    scenarios.start_timeout(make_client, fork())


def test_missing_executable(make_client):
    scenarios.missing_executable(make_client, fork())


def test_client_killed(make_client):
    scenarios.client_killed(make_client, fork())
